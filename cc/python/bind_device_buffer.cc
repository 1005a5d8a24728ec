// tfring._core.DeviceBuffer: GPU memory owned by tfring (results of collectives on GPU arrays).
#include "bindings.h"

#include <pybind11/stl.h>

#include "backends/backend.h"
#include "device_array.h"

namespace tfring {
namespace python {

void BindDeviceBuffer(py::module_& m) {
  py::class_<python::DeviceBuffer, std::shared_ptr<python::DeviceBuffer>>(
      m, "DeviceBuffer", "GPU memory owned by tfring (results of collectives on GPU arrays).")
      .def_static("from_numpy", [](py::array a, int device) {
        a = py::array::ensure(a, py::array::c_style);
        std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
        auto buf = std::make_shared<python::DeviceBuffer>(device, ToDataType(a, "array"), shape);
        Check(GetGpuSupport()->Copy(buf->data(), a.data(), buf->nbytes()));
        return buf;
      }, py::arg("array"), py::arg("device") = 0, "Copies a NumPy array to GPU `device`.")
      .def("to_numpy", [](const python::DeviceBuffer& b) {
        std::vector<py::ssize_t> shape(b.shape().begin(), b.shape().end());
        py::array out(ToNumpyDtype(b.dtype()), shape);
        Check(GetGpuSupport()->Copy(out.mutable_data(), b.data(), b.nbytes()));
        return out;
      }, "Copies the buffer to a new NumPy array.")
      .def_property_readonly("__cuda_array_interface__", &python::DeviceBuffer::CudaArrayInterface)
      .def("__dlpack_device__", [](const python::DeviceBuffer& b) { return py::make_tuple(2, b.device()); })
      .def_property_readonly("device", &python::DeviceBuffer::device)
      .def_property_readonly("shape", [](const python::DeviceBuffer& b) {
        py::tuple t(b.shape().size());
        for (size_t i = 0; i < b.shape().size(); ++i) t[i] = py::int_(b.shape()[i]);
        return t;
      })
      .def_property_readonly("dtype", [](const python::DeviceBuffer& b) { return ToNumpyDtype(b.dtype()); })
      .def_property_readonly("nbytes", &python::DeviceBuffer::nbytes);
}

}  // namespace python
}  // namespace tfring
