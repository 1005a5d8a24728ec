// tfring._core: the pybind11 face of libtfring_core.so (one runtime per process, shared
// with the TF op library). NumPy arrays in, NumPy arrays out.
//
// Collectives come as *_async(...) -> Handle; Handle.wait(timeout) returns the result.
// The Handle keeps the input (and a preallocated output) alive until the op completes;
// dropping an unfinished Handle waits for it first, so C++ never writes to freed memory.
// Errors raise the classes of tfring.errors (mapped from the core's ErrorCode).
// GPU arrays (anything with __cuda_array_interface__) run on the GPU backend; see
// device_array.h.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>

#include "../core/backend.h"
#include "../core/config.h"
#include "../core/messages.h"
#include "../core/runtime.h"
#include "../core/tcp_store.h"
#include "device_array.h"

namespace py = pybind11;
using namespace tfring;

namespace {

[[noreturn]] void Raise(const Status& st) {
  py::object exc = py::module_::import("tfring.errors").attr("from_code")(
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
  static const std::pair<const char*, DataType> kTypes[] = {
      {"uint8", DataType::kUInt8},     {"int8", DataType::kInt8},
      {"int32", DataType::kInt32},     {"int64", DataType::kInt64},
      {"float16", DataType::kFloat16}, {"bfloat16", DataType::kBFloat16},
      {"float32", DataType::kFloat32}, {"float64", DataType::kFloat64},
      {"bool", DataType::kBool},       {"int16", DataType::kInt16},
      {"uint16", DataType::kUInt16}};
  for (const auto& t : kTypes) {
    if (n == t.first) return t.second;
  }
  Raise(Status::Unimplemented("tensor '" + name + "' has dtype " + n +
                              ", which tfring does not support; use one of uint8, int8, int16, "
                              "uint16, int32, int64, float16, bfloat16, float32, float64, bool"));
}

py::dtype ToNumpyDtype(DataType t) {
  if (t == DataType::kBFloat16) return py::dtype::from_args(py::module_::import("ml_dtypes").attr("bfloat16"));
  return py::dtype(std::string(DataTypeName(t)));
}

py::array CheckedArray(const py::object& obj, const std::string& name) {
  if (!py::isinstance<py::array>(obj)) {
    throw py::type_error("tensor '" + name + "' must be a numpy.ndarray, got " +
                         std::string(py::str(py::type::of(obj).attr("__name__"))));
  }
  py::array a = obj.cast<py::array>();
  if (!(a.flags() & py::array::c_style)) {
    Raise(Status::InvalidArgument("tensor '" + name + "' is not C-contiguous; pass "
                                  "numpy.ascontiguousarray(x)"));
  }
  return a;
}

std::vector<int64_t> ShapeOf(const py::array& a) {
  std::vector<int64_t> shape;
  for (py::ssize_t i = 0; i < a.ndim(); ++i) shape.push_back(a.shape(i));
  return shape;
}

// Completion state shared between the background thread and the Python Handle. Holds no
// Python objects, so the background thread never needs the GIL.
struct Completion {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
  std::vector<int64_t> out_shape;
  std::unique_ptr<char[]> out_buffer;  // allgather / alltoall output
  std::shared_ptr<python::DeviceBuffer> out_device;  // the same, for GPU arrays
  std::vector<int64_t> received_splits;
};

class Handle {
 public:
  Handle(std::string name, OpType op, DataType dtype, std::shared_ptr<Completion> c, py::object input,
         py::object output)
      : name_(std::move(name)), op_(op), dtype_(dtype), c_(std::move(c)),
        input_(std::move(input)), output_(std::move(output)) {}

  ~Handle() {
    // Never free buffers the core may still write: wait (without the GIL) for completion.
    bool finished = WaitFor(600.0);
    if (!finished) {  // leak rather than risk a use-after-free
      input_.release();
      output_.release();
    }
  }

  bool poll() {
    std::lock_guard<std::mutex> lock(c_->mu);
    return c_->done;
  }

  // Blocks until done (timeout None = no limit), checking for Ctrl-C every 0.2 s.
  py::object wait(std::optional<double> timeout) {
    auto start = std::chrono::steady_clock::now();
    for (;;) {
      if (WaitFor(0.2)) break;
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      if (timeout && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= *timeout) {
        Raise(Status::Timeout(std::string(OpTypeName(op_)) + " '" + name_ + "' did not complete within " +
                              std::to_string(*timeout) + " s; other ranks may not have submitted it yet "
                              "(the stall warning names them)"));
      }
    }
    Check(c_->status);
    if (op_ == OpType::kAllgather || op_ == OpType::kAlltoall) {
      if (!result_ && c_->out_device) {
        result_ = py::cast(c_->out_device);
      } else if (!result_) {
        auto* raw = c_->out_buffer.release();
        py::capsule owner(raw, [](void* p) { delete[] static_cast<char*>(p); });
        std::vector<py::ssize_t> shape(c_->out_shape.begin(), c_->out_shape.end());
        result_ = py::array(ToNumpyDtype(dtype_), shape, raw ? raw : nullptr, owner);
      }
      if (op_ == OpType::kAlltoall) {
        py::array_t<int64_t> splits(c_->received_splits.size());
        std::memcpy(splits.mutable_data(), c_->received_splits.data(), c_->received_splits.size() * 8);
        return py::make_tuple(result_, splits);
      }
      return result_;
    }
    if (op_ == OpType::kBarrier) return py::none();
    return output_;
  }

 private:
  bool WaitFor(double seconds) {
    py::gil_scoped_release release;
    std::unique_lock<std::mutex> lock(c_->mu);
    return c_->cv.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return c_->done; });
  }

  std::string name_;
  OpType op_;
  DataType dtype_;
  std::shared_ptr<Completion> c_;
  py::object input_;
  py::object output_;
  py::object result_;
};

std::unique_ptr<Handle> Submit(Submission s, py::object input, py::object output) {
  auto c = std::make_shared<Completion>();
  s.done = [c](const Status& st) {
    {
      std::lock_guard<std::mutex> lock(c->mu);
      c->status = st;
      c->done = true;
    }
    c->cv.notify_all();
  };
  if ((s.request.op == OpType::kAllgather || s.request.op == OpType::kAlltoall) && s.request.device >= 0) {
    DataType dtype = s.request.dtype;
    int device = s.request.device;
    s.allocate_output = [c, dtype, device](const std::vector<int64_t>& shape, void** data) {
      try {
        c->out_device = std::make_shared<python::DeviceBuffer>(device, dtype, shape);
      } catch (const StatusError& e) {
        return e.status;
      }
      c->out_shape = shape;
      *data = c->out_device->data();
      return Status::OK();
    };
    s.on_received_splits = [c](const std::vector<int64_t>& splits) { c->received_splits = splits; };
  } else if (s.request.op == OpType::kAllgather || s.request.op == OpType::kAlltoall) {
    DataType dtype = s.request.dtype;
    s.allocate_output = [c, dtype](const std::vector<int64_t>& shape, void** data) {
      size_t n = DataTypeSize(dtype);
      for (int64_t d : shape) n *= static_cast<size_t>(d);
      c->out_shape = shape;
      c->out_buffer.reset(new char[n > 0 ? n : 1]);
      *data = c->out_buffer.get();
      return Status::OK();
    };
    s.on_received_splits = [c](const std::vector<int64_t>& splits) { c->received_splits = splits; };
  }
  std::string name = s.request.name;
  OpType op = s.request.op;
  DataType dtype = s.request.dtype;
  Check(Runtime::Global().Enqueue(std::move(s)));
  return std::make_unique<Handle>(name, op, dtype, c, std::move(input), std::move(output));
}

Submission Make(OpType op, const py::array& a, const std::string& name) {
  Submission s;
  s.request.name = name;
  s.request.op = op;
  s.request.dtype = ToDataType(a, name);
  s.request.shape = ShapeOf(a);
  s.input = a.data();
  return s;
}

py::array EmptyLike(const py::array& a, std::vector<py::ssize_t> shape) {
  return py::array(a.dtype(), shape);
}

// Where an allreduce/broadcast of host array `a` writes: `out` when given (checked: a
// writeable C-contiguous array of a's dtype and shape, `a` itself or not overlapping it),
// `a` when `inplace`, else a new array.
py::array OutputFor(const py::array& a, const py::object& out, bool inplace, const std::string& name) {
  if (out.is_none()) {
    return inplace ? a : EmptyLike(a, std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()));
  }
  if (!py::isinstance<py::array>(out)) {
    throw py::type_error("out= for tensor '" + name + "' must be a NumPy array, not " +
                         std::string(py::str(py::type::of(out).attr("__name__"))));
  }
  py::array o = out.cast<py::array>();
  auto fail = [&](const std::string& why) {
    throw py::value_error("out= for tensor '" + name + "' " + why +
                          ": pass a writeable C-contiguous array of the input's shape and dtype "
                          "(numpy.empty_like(array)), or the input itself to work in place");
  };
  if (!o.dtype().equal(a.dtype())) fail("has dtype " + std::string(py::str(o.dtype())) + ", the input " + std::string(py::str(a.dtype())));
  if (ShapeOf(o) != ShapeOf(a)) fail("has another shape than the input");
  if (!(o.flags() & py::array::c_style)) fail("is not C-contiguous");
  if (!o.writeable()) fail("is read-only");
  const char* ib = static_cast<const char*>(a.data());
  const char* ob = static_cast<const char*>(o.data());
  const py::ssize_t n = a.nbytes();
  if (ib != ob && n > 0 && ib < ob + n && ob < ib + n) fail("overlaps the input without being it");
  return o;
}

// A collective on a GPU array (see device_array.h). `configure` sets the op's fields;
// allreduce/broadcast/reducescatter write into a new DeviceBuffer unless `inplace`.
std::unique_ptr<Handle> SubmitDeviceArray(OpType op, const py::object& obj, const std::string& name,
                                          const std::function<void(Submission&)>& configure, bool inplace) {
  python::DeviceArrayView v = python::ParseDeviceArray(obj, name);
  const std::string what = std::string(OpTypeName(op)) + " of GPU tensor '" + name + "'";
  Submission s;
  s.request.name = name;
  s.request.op = op;
  s.request.dtype = v.dtype;
  s.request.shape = v.shape;
  configure(s);
  python::PrepareDeviceArray(&v, what);  // kUnimplemented here without NCCL / CUDA
  s.request.device = v.device;
  s.input = v.data;
  py::object out = py::none();
  if (op == OpType::kAllreduce || op == OpType::kBroadcast || op == OpType::kReducescatter) {
    std::vector<int64_t> shape = v.shape;
    if (op == OpType::kReducescatter) {
      int size = Runtime::Global().size();
      if (size < 1) Raise(Status::Precondition("tfring is not initialized: call tfring.init() first"));
      if (shape.empty()) Raise(Status::InvalidArgument(what + " needs at least one dimension"));
      shape[0] = ReducescatterRows(shape[0], size, Runtime::Global().rank());
      inplace = false;
    }
    if (inplace) {
      s.output = v.data;
      out = obj;
    } else {
      auto buf = std::make_shared<python::DeviceBuffer>(v.device, v.dtype, shape);
      s.output = buf->data();
      out = py::cast(buf);
    }
  }
  return Submit(std::move(s), obj, out);
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "tfring core runtime (C++), shared by the Python API and the TF op library.";

  // StatusError thrown by device-array helpers -> the matching tfring.errors class.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      py::object exc = py::module_::import("tfring.errors").attr("from_code")(
          static_cast<int>(e.status.code()), e.status.message());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    }
  });
  // GPU libraries may live in pip packages under any sys.path entry (nvidia/nccl/lib, ...).
  for (auto entry : py::module_::import("sys").attr("path")) AddGpuLibrarySearchRoot(py::str(entry));

  m.def("init", [](const std::map<std::string, std::string>& overrides) {
    Status st;
    {
      py::gil_scoped_release release;
      st = Runtime::Global().Init(overrides);
    }
    Check(st);
  }, py::arg("overrides") = std::map<std::string, std::string>{},
     "Initializes the runtime (rendezvous with every rank). Blocking, bounded by TFRING_START_TIMEOUT_S.");
  m.def("shutdown", [](const std::string& reason) {
    Status st;
    {
      py::gil_scoped_release release;
      st = Runtime::Global().Shutdown(reason);
    }
    Check(st);
  }, py::arg("reason") = "",
     "Stops the runtime; pending collectives fail. Idempotent. A reason tells the other ranks why.");
  m.def("is_initialized", [] { return Runtime::Global().initialized(); });
  // The core's enumerations by name, so Python never retypes their values.
  m.def("error_codes", [] {
    std::map<std::string, int> out;
    for (int c = 1; std::string(ErrorCodeName(static_cast<ErrorCode>(c))) != "UNKNOWN"; ++c) {
      out[ErrorCodeName(static_cast<ErrorCode>(c))] = c;
    }
    return out;
  }, "{name: value} of the core's error codes (cc/core/status.h), OK excluded.");
  m.def("reduce_ops", [] {
    std::map<std::string, int> out;
    for (int op = 0; op < kNumReduceOps; ++op) out[ReduceOpName(static_cast<ReduceOp>(op))] = op;
    return out;
  }, "{name: value} of the core's reduce ops (cc/core/data_type.h).");
  m.def("data_types", [] {
    std::map<std::string, int> out;
    for (int t = 0; t < kNumDataTypes; ++t) out[DataTypeName(static_cast<DataType>(t))] = t;
    return out;
  }, "{name: value} of the core's element types (cc/core/data_type.h).");
  m.def("check_health", [] { Check(Runtime::Global().Health()); },
        "Raises the job's fatal error (PeerLostError, ...) once collectives can no longer succeed; "
        "returns None while they can. Never blocks.");
  auto require = [](int v) {
    if (v < 0) Raise(Status::Precondition("tfring is not initialized: call tfring.init() (hvd.init()) first"));
    return v;
  };
  m.def("rank", [require] { return require(Runtime::Global().rank()); });
  m.def("size", [require] { return require(Runtime::Global().size()); });
  m.def("local_rank", [require] { return require(Runtime::Global().local_rank()); });
  m.def("local_size", [require] { return require(Runtime::Global().local_size()); });
  m.def("cross_rank", [require] { return require(Runtime::Global().cross_rank()); });
  m.def("cross_size", [require] { return require(Runtime::Global().cross_size()); });
  m.def("is_homogeneous", [require] { return require(Runtime::Global().homogeneous()) == 1; },
        "True when every host runs the same number of ranks.");

  m.def("config", [] {
    py::dict out;
    for (const auto& kv : Runtime::Global().config_values()) {
      bool secret = kv.first == "TFRING_SECRET";
      out[py::str(kv.first)] = py::make_tuple(secret && !kv.second.text.empty() ? "<hidden>" : kv.second.text,
                                              kv.second.source);
    }
    return out;
  }, "Effective settings: {name: (value, source)}; source is default, env or argument.");
  m.def("config_table", [] {
    py::list out;
    for (const auto& p : ParamTable()) {
      const char* type = p.type == ParamType::kInt ? "int" : p.type == ParamType::kFloat ? "float"
                         : p.type == ParamType::kBool ? "bool" : "str";
      py::dict d;
      d["name"] = p.name;
      d["type"] = type;
      d["default"] = p.default_value;
      d["min"] = p.min_value;
      d["max"] = p.max_value;
      d["description"] = p.description;
      out.append(d);
    }
    return out;
  }, "The table of every TFRING_* setting.");
  m.def("validate_config", [](const std::map<std::string, std::string>& values) {
    Config c;
    Check(Config::Load(values, false, &c));
  }, "Raises if the given settings are invalid (used by the launcher before it starts anything).");
  m.def("stats", [] {
    RuntimeStats s = Runtime::Global().stats();
    py::dict d;
    d["collectives"] = s.collectives;
    d["tensors"] = s.tensors;
    d["fused_tensors"] = s.fused_tensors;
    d["fusion_ratio"] = s.collectives > 0 ? static_cast<double>(s.tensors) / s.collectives : 0.0;
    d["bytes_reduced"] = s.bytes_reduced;
    d["bytes_sent"] = s.bytes_sent;
    d["bytes_received"] = s.bytes_received;
    d["stall_warnings"] = s.stall_warnings;
    d["cached_tensors"] = s.cached_tensors;
    d["control_bytes_sent"] = s.control_bytes_sent;
    d["control_messages_sent"] = s.control_messages_sent;
    d["negotiation_seconds"] = s.negotiation_seconds;
    d["wait_for_slowest_seconds"] = s.wait_for_slowest_seconds;
    d["queue_seconds"] = s.queue_seconds;
    d["transfer_seconds"] = s.transfer_seconds;
    d["allreduce_transfer_seconds"] = s.allreduce_transfer_seconds;
    d["execute_seconds"] = s.execute_seconds;
    d["size"] = Runtime::Global().initialized() ? Runtime::Global().size() : 0;
    return d;
  }, "Counters since init (docs/monitoring.md defines each key).");
  m.def("start_timeline", [](const std::string& path) { Check(Runtime::Global().StartTimeline(path)); },
        py::arg("path"), "Rank 0 writes a Chrome-trace JSON of every collective to path.");
  m.def("stop_timeline", [] { Check(Runtime::Global().StopTimeline()); });
  m.def("build_info", [] {
    py::dict d;
    d["cpu"] = true;
    d["tcp"] = true;
    d["shm"] = true;
    d["nccl"] = GetGpuSupport() != nullptr;  // the NCCL backend is built in (see gpu_info)
    return d;
  });
  m.def("gpu_info", [] {
    py::dict d;
    GpuSupport* gpu = GetGpuSupport();
    d["built"] = gpu != nullptr;
    Status st = gpu ? gpu->Available() : Status::Unimplemented("built with TFRING_WITH_NCCL=0");
    d["available"] = st.ok();
    d["detail"] = gpu && st.ok() ? gpu->Describe() : st.message();
    return d;
  }, "Whether GPU tensors can run: built (NCCL backend compiled in), available (NCCL, the CUDA "
     "runtime and a device found now), detail (versions and paths, or what is missing).");

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

  py::class_<Handle>(m, "Handle")
      .def("wait", &Handle::wait, py::arg("timeout") = py::none(),
           "Blocks until the collective completes and returns its result.")
      .def("poll", &Handle::poll, "True once the collective has completed.");

  m.def("allreduce_async", [](py::object obj, const std::string& name, int op, double prescale,
                              double postscale, bool inplace, py::object out_obj) {
    if (python::IsDeviceArray(obj)) {
      if (!out_obj.is_none()) throw py::type_error("out= is for NumPy arrays; GPU arrays take inplace=True");
      if (op < 0 || op >= kNumReduceOps) throw py::value_error("invalid reduce op " + std::to_string(op));
      return SubmitDeviceArray(OpType::kAllreduce, obj, name, [&](Submission& s) {
        s.request.reduce_op = static_cast<ReduceOp>(op);
        s.request.prescale = prescale;
        s.request.postscale = postscale;
      }, inplace);
    }
    py::array a = CheckedArray(obj, name);
    if (op < 0 || op >= kNumReduceOps) throw py::value_error("invalid reduce op " + std::to_string(op));
    Submission s = Make(OpType::kAllreduce, a, name);
    s.request.reduce_op = static_cast<ReduceOp>(op);
    s.request.prescale = prescale;
    s.request.postscale = postscale;
    py::array out = OutputFor(a, out_obj, inplace, name);
    s.output = out.mutable_data();
    return Submit(std::move(s), a, out);
  }, py::arg("array"), py::arg("name"), py::arg("op") = 0, py::arg("prescale") = 1.0,
     py::arg("postscale") = 1.0, py::arg("inplace") = false, py::arg("out") = py::none());

  m.def("allgather_async", [](py::object obj, const std::string& name) {
    if (python::IsDeviceArray(obj)) {
      return SubmitDeviceArray(OpType::kAllgather, obj, name, [](Submission&) {}, false);
    }
    py::array a = CheckedArray(obj, name);
    return Submit(Make(OpType::kAllgather, a, name), a, py::none());
  }, py::arg("array"), py::arg("name"));

  m.def("broadcast_async", [](py::object obj, int root, const std::string& name, bool inplace,
                              py::object out_obj) {
    if (python::IsDeviceArray(obj)) {
      if (!out_obj.is_none()) throw py::type_error("out= is for NumPy arrays; GPU arrays take inplace=True");
      return SubmitDeviceArray(OpType::kBroadcast, obj, name, [&](Submission& s) { s.request.root = root; },
                               inplace);
    }
    py::array a = CheckedArray(obj, name);
    Submission s = Make(OpType::kBroadcast, a, name);
    s.request.root = root;
    py::array out = OutputFor(a, out_obj, inplace, name);
    s.output = out.mutable_data();
    return Submit(std::move(s), a, out);
  }, py::arg("array"), py::arg("root"), py::arg("name"), py::arg("inplace") = false,
     py::arg("out") = py::none());

  m.def("alltoall_async", [](py::object obj, std::optional<std::vector<int64_t>> splits,
                             const std::string& name) {
    if (python::IsDeviceArray(obj)) {
      return SubmitDeviceArray(OpType::kAlltoall, obj, name, [&](Submission& s) {
        if (splits) s.request.splits = *splits;
      }, false);
    }
    py::array a = CheckedArray(obj, name);
    Submission s = Make(OpType::kAlltoall, a, name);
    if (splits) s.request.splits = *splits;
    return Submit(std::move(s), a, py::none());
  }, py::arg("array"), py::arg("splits"), py::arg("name"));

  m.def("reducescatter_async", [](py::object obj, const std::string& name, int op, double prescale,
                                  double postscale) {
    if (python::IsDeviceArray(obj)) {
      if (op < 0 || op >= kNumReduceOps) throw py::value_error("invalid reduce op " + std::to_string(op));
      return SubmitDeviceArray(OpType::kReducescatter, obj, name, [&](Submission& s) {
        s.request.reduce_op = static_cast<ReduceOp>(op);
        s.request.prescale = prescale;
        s.request.postscale = postscale;
      }, false);
    }
    py::array a = CheckedArray(obj, name);
    if (op < 0 || op >= kNumReduceOps) throw py::value_error("invalid reduce op " + std::to_string(op));
    Submission s = Make(OpType::kReducescatter, a, name);
    s.request.reduce_op = static_cast<ReduceOp>(op);
    s.request.prescale = prescale;
    s.request.postscale = postscale;
    int size = Runtime::Global().size();
    if (size < 1) Raise(Status::Precondition("tfring is not initialized: call tfring.init() first"));
    if (a.ndim() < 1) Raise(Status::InvalidArgument("reducescatter of tensor '" + name + "' needs at least one dimension"));
    std::vector<py::ssize_t> shape(a.shape(), a.shape() + a.ndim());
    shape[0] = ReducescatterRows(shape[0], size, Runtime::Global().rank());
    py::array out = EmptyLike(a, shape);
    s.output = out.mutable_data();
    return Submit(std::move(s), a, out);
  }, py::arg("array"), py::arg("name"), py::arg("op") = 0, py::arg("prescale") = 1.0,
     py::arg("postscale") = 1.0);

  m.def("barrier_async", [](const std::string& name) {
    Submission s;
    s.request.name = name;
    s.request.op = OpType::kBarrier;
    s.request.dtype = DataType::kUInt8;
    return Submit(std::move(s), py::none(), py::none());
  }, py::arg("name"));

  py::class_<TcpStoreServer>(m, "StoreServer",
                             "The job's authenticated rendezvous store (served by tfringrun).")
      .def(py::init([](const std::string& host, int port, const std::string& secret) {
             auto server = std::make_unique<TcpStoreServer>();
             Check(server->Start(host, port, secret));
             return server;
           }),
           py::arg("host"), py::arg("port"), py::arg("secret"))
      .def_property_readonly("port", &TcpStoreServer::port)
      .def_property_readonly("refused_connections", &TcpStoreServer::refused_connections)
      .def("stop", [](TcpStoreServer& s) {
        py::gil_scoped_release release;
        s.Stop();
      });

  py::class_<TcpStoreClient>(m, "StoreClient", "A client of the job's store (tests, tools).")
      .def(py::init([](const std::string& host, int port, const std::string& secret, double timeout) {
             std::unique_ptr<TcpStoreClient> c;
             Status st;
             {
               py::gil_scoped_release release;
               st = TcpStoreClient::Connect(host, port, secret, timeout, timeout, &c);
             }
             Check(st);
             return c;
           }),
           py::arg("host"), py::arg("port"), py::arg("secret"), py::arg("timeout") = 10.0)
      .def("set", [](TcpStoreClient& c, const std::string& k, const py::bytes& v) {
        Check(c.Set(k, std::string(v)));
      })
      .def("get", [](TcpStoreClient& c, const std::string& k, double timeout) {
        std::string v;
        Status st;
        {
          py::gil_scoped_release release;
          st = c.Get(k, timeout, &v);
        }
        Check(st);
        return py::bytes(v);
      }, py::arg("key"), py::arg("timeout") = 10.0)
      .def("add", [](TcpStoreClient& c, const std::string& k, int64_t delta) {
        int64_t v = 0;
        Check(c.Add(k, delta, &v));
        return v;
      });
}
