// Test hooks on the coordinator's wire format (tests/test_fuzz.py).
#include "bindings.h"

#include <pybind11/stl.h>

#include "control/messages.h"

namespace tfring {
namespace python {

void BindWire(py::module_& m) {
  m.def("_decode_control", [](const py::bytes& data, int world_size) {
    ControlMessage msg;
    Status st = DecodeControl(std::string(data), world_size, &msg);
    return py::make_tuple(st.ok(), st.message());
  }, "Test hook: decodes a coordinator message; returns (ok, error). Never raises.");
  m.def("_encode_requests", [](const std::vector<std::string>& names) {
    ControlMessage msg;
    msg.kind = ControlKind::kRequests;
    for (const auto& n : names) {
      Request r;
      r.name = n;
      r.shape = {2, 3};
      msg.requests.push_back(r);
    }
    return py::bytes(EncodeControl(msg));
  }, "Test hook: a valid coordinator request message (seed for fuzzing).");
}

}  // namespace python
}  // namespace tfring
