// tfring._core collectives: NumPy arrays in, NumPy arrays out.
//
// Collectives come as *_async(...) -> Handle; Handle.wait(timeout) returns the result.
// The Handle keeps the input (and a preallocated output) alive until the op completes;
// dropping an unfinished Handle waits for it first, so C++ never writes to freed memory.
// GPU arrays (anything with __cuda_array_interface__) run on the GPU backend; see
// device_array.h.
#include "bindings.h"

#include <pybind11/stl.h>

#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "backends/backend.h"
#include "control/collective_attrs.h"
#include "runtime/runtime.h"
#include "device_array.h"

namespace tfring {
namespace python {
namespace {

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
  // Set (release) under `mu` after `status`; read without the lock by poll() and WaitFor's spin.
  std::atomic<bool> done{false};
  int spin_us = 0;                    // Runtime::spin_us() at submission
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

  bool poll() { return c_->done.load(std::memory_order_acquire); }

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
    // A small collective completes within microseconds: spinning (yielding the core to the
    // background thread, which may share it) saves the sleep and the wake-up.
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(c_->spin_us);
    while (!c_->done.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < spin_until) {
      sched_yield();
    }
    std::unique_lock<std::mutex> lock(c_->mu);
    return c_->cv.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return c_->done.load(std::memory_order_acquire); });
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
  c->spin_us = Runtime::Global().spin_us();
  s.done = [c](const Status& st) {
    {
      std::lock_guard<std::mutex> lock(c->mu);
      c->status = st;
      c->done.store(true, std::memory_order_release);
    }
    c->cv.notify_all();
  };
  if ((s.request.attrs.op == OpType::kAllgather || s.request.attrs.op == OpType::kAlltoall) && s.request.attrs.device >= 0) {
    DataType dtype = s.request.attrs.dtype;
    int device = s.request.attrs.device;
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
  } else if (s.request.attrs.op == OpType::kAllgather || s.request.attrs.op == OpType::kAlltoall) {
    DataType dtype = s.request.attrs.dtype;
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
  OpType op = s.request.attrs.op;
  DataType dtype = s.request.attrs.dtype;
  Check(Runtime::Global().Enqueue(std::move(s)));
  return std::make_unique<Handle>(name, op, dtype, c, std::move(input), std::move(output));
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

// This rank's index in process set `id` and the set's size (the job's for id 0), for the
// rows a reducescatter keeps. A rank outside the set, or an unknown id, gets index 0: the
// submission is then refused by the core's enqueue checks with the full message.
void SetPosition(int32_t id, int* rank, int* size) {
  Status st = Runtime::Global().ProcessSetPosition(id, rank, size);
  if (st.code() == ErrorCode::kPrecondition) Raise(st);
  if (!st.ok() || *rank < 0) {
    *rank = 0;
    *size = std::max(*size, 1);
  }
}

// Rows of a reducescatter's output on this rank: `shape` with dim 0 cut to this rank's
// share (ReducescatterRows) of process set `id`. `what` names the op and tensor.
std::vector<int64_t> ReducescatterShape(std::vector<int64_t> shape, int32_t id, const std::string& what) {
  int rank = 0, size = 1;
  SetPosition(id, &rank, &size);
  if (shape.empty()) Raise(Status::InvalidArgument(what + " needs at least one dimension"));
  shape[0] = ReducescatterRows(shape[0], size, rank);
  return shape;
}

// A collective on a GPU array (see device_array.h). Allreduce/broadcast/reducescatter write
// into a new DeviceBuffer unless `inplace`.
std::unique_ptr<Handle> SubmitDeviceArray(const py::object& obj, const std::string& name,
                                          const CollectiveAttrs& attrs, std::vector<int64_t> splits, bool inplace) {
  python::DeviceArrayView v = python::ParseDeviceArray(obj, name);
  const std::string what = std::string(OpTypeName(attrs.op)) + " of GPU tensor '" + name + "'";
  Submission s;
  s.request = attrs.MakeRequest(name, v.dtype, v.shape);
  s.request.splits = std::move(splits);
  python::PrepareDeviceArray(&v, what);  // kUnimplemented here without NCCL / CUDA
  s.request.attrs.device = v.device;
  s.input = v.data;
  py::object out = py::none();
  const OpType op = attrs.op;
  if (op == OpType::kAllreduce || op == OpType::kBroadcast || op == OpType::kReducescatter) {
    std::vector<int64_t> shape = v.shape;
    if (op == OpType::kReducescatter) {
      shape = ReducescatterShape(shape, attrs.process_set_id, what);
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

// Where a collective on host array `a` writes: allreduce/broadcast as OutputFor says, a
// reducescatter into a new array of this rank's rows; allgather/alltoall allocate theirs
// once every rank's rows are known (None here).
py::object HostOutput(const CollectiveAttrs& attrs, const py::array& a, const py::object& out_obj, bool inplace,
                      const std::string& name) {
  if (attrs.op == OpType::kAllreduce || attrs.op == OpType::kBroadcast) return OutputFor(a, out_obj, inplace, name);
  if (attrs.op != OpType::kReducescatter) return py::none();
  const std::vector<int64_t> shape = ReducescatterShape(ShapeOf(a), attrs.process_set_id,
                                                        "reducescatter of tensor '" + name + "'");
  return EmptyLike(a, std::vector<py::ssize_t>(shape.begin(), shape.end()));
}

// Submits the collective `attrs` on `obj`: a NumPy array, or a GPU array (anything with
// __cuda_array_interface__). `out_obj`: out= of allreduce/broadcast (NumPy only).
// `splits`: an alltoall's rows to each rank (empty: divide evenly).
std::unique_ptr<Handle> SubmitTensor(const py::object& obj, const std::string& name, const CollectiveAttrs& attrs,
                                     bool inplace = false, const py::object& out_obj = py::none(),
                                     std::vector<int64_t> splits = {}) {
  if (python::IsDeviceArray(obj)) {
    // A GPU result is a new DeviceBuffer or, with out= the array itself, the input reduced
    // in place (what out=array means for NumPy too); any other GPU out= is refused.
    if (!out_obj.is_none() && !out_obj.is(obj)) {
      throw py::type_error("tensor '" + name + "': out= on a GPU array must be that array itself (the result "
                           "is written in place); leave out= unset to get a new DeviceBuffer");
    }
    return SubmitDeviceArray(obj, name, attrs, std::move(splits), inplace || !out_obj.is_none());
  }
  py::array a = CheckedArray(obj, name);
  Submission s;
  s.request = attrs.MakeRequest(name, ToDataType(a, name), ShapeOf(a));
  s.request.splits = std::move(splits);
  s.input = a.data();
  py::object out = HostOutput(attrs, a, out_obj, inplace, name);
  if (!out.is_none()) s.output = out.cast<py::array>().mutable_data();
  return Submit(std::move(s), a, out);
}

CollectiveAttrs SetAttrs(OpType op, int32_t process_set_id) {
  CollectiveAttrs attrs;
  attrs.op = op;
  attrs.process_set_id = process_set_id;
  return attrs;
}

// Allreduce and reducescatter: the reduce op (checked against the core's table) and scales.
CollectiveAttrs ReduceAttrs(OpType op, int reduce_op, double prescale, double postscale, int32_t process_set_id) {
  CollectiveAttrs attrs = SetAttrs(op, process_set_id);
  Check(attrs.SetReduceOp(reduce_op));
  attrs.prescale = prescale;
  attrs.postscale = postscale;
  return attrs;
}

// A collective without a tensor (join, barrier): its output, if any, is preallocated.
std::unique_ptr<Handle> SubmitSignal(OpType op, DataType dtype, const std::string& name, py::object output) {
  Submission s;
  s.request = SetAttrs(op, 0).MakeRequest(name, dtype, {});
  if (!output.is_none()) s.output = output.cast<py::array>().mutable_data();
  return Submit(std::move(s), py::none(), std::move(output));
}

}  // namespace

void BindCollectives(py::module_& m) {
  py::class_<Handle>(m, "Handle")
      .def("wait", &Handle::wait, py::arg("timeout") = py::none(),
           "Blocks until the collective completes and returns its result.")
      .def("poll", &Handle::poll, "True once the collective has completed.");

  m.def("allreduce_async", [](py::object obj, const std::string& name, int op, double prescale,
                              double postscale, bool inplace, py::object out_obj, int32_t process_set_id) {
    return SubmitTensor(obj, name, ReduceAttrs(OpType::kAllreduce, op, prescale, postscale, process_set_id),
                        inplace, out_obj);
  }, py::arg("array"), py::arg("name"), py::arg("op") = 0, py::arg("prescale") = 1.0,
     py::arg("postscale") = 1.0, py::arg("inplace") = false, py::arg("out") = py::none(),
     py::arg("process_set_id") = 0);

  m.def("allgather_async", [](py::object obj, const std::string& name, int32_t process_set_id) {
    return SubmitTensor(obj, name, SetAttrs(OpType::kAllgather, process_set_id));
  }, py::arg("array"), py::arg("name"), py::arg("process_set_id") = 0);

  m.def("broadcast_async", [](py::object obj, int root, const std::string& name, bool inplace,
                              py::object out_obj, int32_t process_set_id) {
    CollectiveAttrs attrs = SetAttrs(OpType::kBroadcast, process_set_id);
    attrs.root = root;
    return SubmitTensor(obj, name, attrs, inplace, out_obj);
  }, py::arg("array"), py::arg("root"), py::arg("name"), py::arg("inplace") = false,
     py::arg("out") = py::none(), py::arg("process_set_id") = 0);

  m.def("alltoall_async", [](py::object obj, std::optional<std::vector<int64_t>> splits,
                             const std::string& name, int32_t process_set_id) {
    return SubmitTensor(obj, name, SetAttrs(OpType::kAlltoall, process_set_id), false, py::none(),
                        splits.value_or(std::vector<int64_t>{}));
  }, py::arg("array"), py::arg("splits"), py::arg("name"), py::arg("process_set_id") = 0);

  m.def("reducescatter_async", [](py::object obj, const std::string& name, int op, double prescale,
                                  double postscale, int32_t process_set_id) {
    return SubmitTensor(obj, name, ReduceAttrs(OpType::kReducescatter, op, prescale, postscale, process_set_id));
  }, py::arg("array"), py::arg("name"), py::arg("op") = 0, py::arg("prescale") = 1.0,
     py::arg("postscale") = 1.0, py::arg("process_set_id") = 0);

  m.def("join_async", [](const std::string& name) {
    return SubmitSignal(OpType::kJoin, DataType::kInt32, name, py::array_t<int32_t>(std::vector<py::ssize_t>{}));
  }, py::arg("name"), "This rank has no more data; wait() returns the last rank to join (an int32 array).");
  m.def("barrier_async", [](const std::string& name) {
    return SubmitSignal(OpType::kBarrier, DataType::kUInt8, name, py::none());
  }, py::arg("name"));
}

}  // namespace python
}  // namespace tfring
