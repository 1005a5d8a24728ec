// tfring._core: the pybind11 face of libtfring_core.so (one runtime per process, shared
// with the TF op library). Each topic binds itself (bindings.h); errors raise the classes
// of tfring._errors (mapped from the core's ErrorCode).
#include "backends/backend.h"
#include "bindings.h"

namespace py = pybind11;
using namespace tfring;

PYBIND11_MODULE(_core, m) {
  m.doc() = "tfring core runtime (C++), shared by the Python API and the TF op library.";

  // StatusError thrown by device-array helpers -> the matching tfring._errors class.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      py::object exc = py::module_::import("tfring._errors").attr("from_code")(
          static_cast<int>(e.status.code()), e.status.message());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    }
  });
  // GPU libraries may live in pip packages under any sys.path entry (nvidia/nccl/lib, ...).
  for (auto entry : py::module_::import("sys").attr("path")) AddGpuLibrarySearchRoot(py::str(entry));

  python::BindRuntime(m);
  python::BindCollectives(m);
  python::BindDeviceBuffer(m);
  python::BindStore(m);
  python::BindWire(m);
}
