// GPU arrays in the pybind module (included by module.cc only).
//
// Input: any object with __cuda_array_interface__ (CuPy, PyTorch, Numba, tfring's own
// DeviceBuffer), C-contiguous. Its device comes from __dlpack_device__ when present, else
// from the pointer. A producer stream named by the interface ("stream", version 3) is
// synchronized before the request is enqueued, so NCCL reads finished data.
// Output: DeviceBuffer, device memory owned by tfring that exposes __cuda_array_interface__
// (cupy.asarray(buf) / torch.as_tensor(buf, device="cuda") wrap it without a copy) and
// copies to and from NumPy (to_numpy / from_numpy).
// Threads: DeviceBuffer is created on the background thread for allgather/alltoall (no GIL
// needed: it holds no Python objects) and freed wherever its last reference dies.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "base/data_type.h"

namespace tfring {
namespace python {

namespace py = pybind11;

// The CUDA array interface typestr of each core dtype ("" = none: bfloat16).
inline const char* TypeStr(DataType t) {
  switch (t) {
    case DataType::kUInt8: return "|u1";
    case DataType::kInt8: return "|i1";
    case DataType::kInt32: return "<i4";
    case DataType::kInt64: return "<i8";
    case DataType::kFloat16: return "<f2";
    case DataType::kFloat32: return "<f4";
    case DataType::kFloat64: return "<f8";
    case DataType::kBool: return "|b1";
    case DataType::kBFloat16: return "";
    case DataType::kInt16: return "<i2";
    case DataType::kUInt16: return "<u2";
  }
  return "";
}

inline bool FromTypeStr(const std::string& s, DataType* out) {
  static const DataType kAll[] = {DataType::kUInt8,   DataType::kInt8,    DataType::kInt16,   DataType::kUInt16,
                                  DataType::kInt32,   DataType::kInt64,   DataType::kFloat16, DataType::kFloat32,
                                  DataType::kFloat64, DataType::kBool};
  std::string norm = s;
  if (norm.size() == 3 && norm[0] == '=') norm[0] = '<';  // native order on little-endian hosts
  for (DataType t : kAll) {
    if (norm == TypeStr(t)) {
      *out = t;
      return true;
    }
  }
  return false;
}

inline size_t NumBytes(DataType t, const std::vector<int64_t>& shape) {
  size_t n = DataTypeSize(t);
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

inline GpuSupport* RequireGpu(const std::string& what) {
  GpuSupport* gpu = GetGpuSupport();
  if (gpu == nullptr) {
    throw StatusError{Status::Unimplemented(what + ": this build of tfring has no GPU backend (built with "
                                            "TFRING_WITH_NCCL=0)")};
  }
  Status st = gpu->Available();
  if (!st.ok()) throw StatusError{st.WithContext(what)};
  return gpu;
}

class DeviceBuffer {
 public:
  // Allocates uninitialized device memory on `device`.
  DeviceBuffer(int device, DataType dtype, std::vector<int64_t> shape)
      : device_(device), dtype_(dtype), shape_(std::move(shape)) {
    GpuSupport* gpu = RequireGpu("allocating GPU memory");
    Status st = gpu->Allocate(device_, NumBytes(dtype_, shape_), &data_);
    if (!st.ok()) throw StatusError{st};
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) GetGpuSupport()->Free(device_, data_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  int device() const { return device_; }
  DataType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  size_t nbytes() const { return NumBytes(dtype_, shape_); }

  py::dict CudaArrayInterface() const {
    if (dtype_ == DataType::kBFloat16) {
      throw py::type_error("bfloat16 has no __cuda_array_interface__ type; use to_numpy()");
    }
    py::dict d;
    py::tuple shape(shape_.size());
    for (size_t i = 0; i < shape_.size(); ++i) shape[i] = py::int_(shape_[i]);
    d["shape"] = shape;
    d["typestr"] = TypeStr(dtype_);
    d["data"] = py::make_tuple(py::int_(reinterpret_cast<uintptr_t>(data_)), false);
    d["version"] = 3;
    d["strides"] = py::none();
    d["stream"] = py::none();  // complete: tfring synchronized its stream before returning it
    return d;
  }

 private:
  int device_;
  DataType dtype_;
  std::vector<int64_t> shape_;
  void* data_ = nullptr;
};

// A GPU array handed to a collective.
struct DeviceArrayView {
  void* data = nullptr;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;
  int device = 0;
  bool has_device = false;
  py::object stream;  // None or an int (a cudaStream_t value)
};

// A NumPy array never is; asking it for the attribute would raise and clear an
// AttributeError, a formatted message per call (~1 us of a small collective).
inline bool IsDeviceArray(const py::object& obj) {
  return !py::isinstance<py::array>(obj) && py::hasattr(obj, "__cuda_array_interface__");
}

// Parses __cuda_array_interface__; throws StatusError for what tfring cannot take.
inline DeviceArrayView ParseDeviceArray(const py::object& obj, const std::string& name) {
  DeviceArrayView v;
  py::dict cai = obj.attr("__cuda_array_interface__");
  for (auto d : cai["shape"].cast<py::tuple>()) v.shape.push_back(d.cast<int64_t>());
  std::string typestr = cai["typestr"].cast<std::string>();
  if (!FromTypeStr(typestr, &v.dtype)) {
    throw StatusError{Status::Unimplemented("GPU tensor '" + name + "' has typestr " + typestr +
                                            ", which tfring does not take from __cuda_array_interface__; "
                                            "use one of uint8, int8, int32, int64, float16, float32, "
                                            "float64, bool")};
  }
  v.data = reinterpret_cast<void*>(cai["data"].cast<py::tuple>()[0].cast<uintptr_t>());
  if (cai.contains("strides") && !cai["strides"].is_none()) {
    auto strides = cai["strides"].cast<py::tuple>();
    int64_t expect = static_cast<int64_t>(DataTypeSize(v.dtype));
    for (size_t i = v.shape.size(); i-- > 0;) {
      if (v.shape[i] > 1 && strides[i].cast<int64_t>() != expect) {
        throw StatusError{Status::InvalidArgument("GPU tensor '" + name +
                                                  "' is not C-contiguous; pass a contiguous copy")};
      }
      expect *= v.shape[i];
    }
  }
  v.stream = cai.contains("stream") ? py::object(cai["stream"]) : py::object(py::none());
  if (py::hasattr(obj, "__dlpack_device__")) {
    py::tuple dev = obj.attr("__dlpack_device__")();
    v.device = dev[1].cast<int>();
    v.has_device = true;
  } else if (py::isinstance<DeviceBuffer>(obj)) {
    v.device = obj.cast<const DeviceBuffer&>().device();
    v.has_device = true;
  }
  return v;
}

// Loads the GPU libraries, fills in the device from the pointer when needed and waits for
// the producer's stream. Throws StatusError (kUnimplemented without NCCL/CUDA).
inline void PrepareDeviceArray(DeviceArrayView* v, const std::string& what) {
  GpuSupport* gpu = RequireGpu(what);
  if (!v->has_device && v->data != nullptr) {
    Status st = gpu->PointerDevice(v->data, &v->device);
    if (!st.ok()) throw StatusError{st.WithContext(what)};
    v->has_device = true;
  }
  if (!v->stream.is_none()) {
    uintptr_t stream = v->stream.cast<uintptr_t>();
    py::gil_scoped_release release;
    Status st = gpu->StreamSynchronize(reinterpret_cast<void*>(stream));
    if (!st.ok()) throw StatusError{st.WithContext(what)};
  }
}

}  // namespace python
}  // namespace tfring
