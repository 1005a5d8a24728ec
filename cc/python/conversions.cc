// Status -> tfring._errors, and NumPy dtype <-> core DataType.
#include "bindings.h"

namespace tfring {
namespace python {

[[noreturn]] void Raise(const Status& st) {
  py::object exc = py::module_::import("tfring._errors").attr("from_code")(
      static_cast<int>(st.code()), st.message());
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw py::error_already_set();
}

void Check(const Status& st) {
  if (!st.ok()) Raise(st);
}

DataType ToDataType(const py::array& a, const std::string& name) {
  py::dtype dt = a.dtype();
  std::string n = py::str(dt.attr("name"));
  std::string supported;
  for (int t = 0; t < kNumDataTypes; ++t) {  // NumPy's dtype names are the core's
    const DataType type = static_cast<DataType>(t);
    if (n == DataTypeName(type)) return type;
    supported += (t ? ", " : "") + std::string(DataTypeName(type));
  }
  Raise(Status::Unimplemented("tensor '" + name + "' has dtype " + n +
                              ", which tfring does not support; use one of " + supported));
}

py::dtype ToNumpyDtype(DataType t) {
  if (t == DataType::kBFloat16) return py::dtype::from_args(py::module_::import("ml_dtypes").attr("bfloat16"));
  return py::dtype(std::string(DataTypeName(t)));
}

}  // namespace python
}  // namespace tfring
