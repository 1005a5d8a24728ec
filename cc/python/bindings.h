// Shared pieces of the tfring._core bindings: error raising and dtype conversion, and the
// Bind* functions each of which adds one topic to the module (module.cc calls them).
//
// Errors: Raise/Check turn a core Status into the matching tfring._errors class (the GIL
// must be held).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

#include "base/status.h"
#include "base/data_type.h"

namespace tfring {
namespace python {

namespace py = pybind11;

[[noreturn]] void Raise(const Status& st);
void Check(const Status& st);
// The core element type of a NumPy array; raises UnimplementedError naming `name` otherwise.
DataType ToDataType(const py::array& a, const std::string& name);
py::dtype ToNumpyDtype(DataType t);

void BindRuntime(py::module_& m);      // bind_runtime.cc: life cycle, ranks, settings, stats
void BindCollectives(py::module_& m);  // bind_collectives.cc: *_async and Handle
void BindDeviceBuffer(py::module_& m);  // bind_device_buffer.cc: GPU memory owned by tfring
void BindStore(py::module_& m);        // bind_store.cc: StoreServer, StoreClient
void BindWire(py::module_& m);         // bind_wire.cc: coordinator-message test hooks

}  // namespace python
}  // namespace tfring
