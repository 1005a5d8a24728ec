// Registers the NCCL backend with the core (backend.h) when this directory is linked into
// libtfring_core.so, and implements the device-memory helpers the bindings use.
#include "backends/backend.h"
#include "base/logging.h"
#include "backends/nccl/gpu_libraries.h"
#include "backends/nccl/nccl_backend.h"

namespace tfring {
namespace gpu {
namespace {

// Makes `device` current for the duration of a helper call, restoring the caller's device
// (the caller's thread may belong to a framework that tracks its own current device).
class DeviceScope {
 public:
  DeviceScope(const CudaApi& cuda, int device) : cuda_(cuda) {
    if (cuda_.cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    status_ = cuda_.cudaSetDevice(device);
  }
  ~DeviceScope() {
    if (previous_ >= 0) cuda_.cudaSetDevice(previous_);
  }
  cudaError_t status() const { return status_; }

 private:
  const CudaApi& cuda_;
  int previous_ = -1;
  cudaError_t status_ = cudaSuccess;
};

Status CudaStatus(const CudaApi& cuda, cudaError_t e, const std::string& call) {
  if (e == cudaSuccess) return Status::OK();
  cuda.cudaGetLastError();
  return Status::Internal(call + " failed: " + CudaErrorText(cuda, e));
}

class NcclGpuSupport : public GpuSupport {
 public:
  Status Available() override {
    const NcclApi* nccl = nullptr;
    const CudaApi* cuda = nullptr;
    Status n = LoadNccl(&nccl);
    Status c = LoadCuda(&cuda);
    if (n.ok() && c.ok()) return Status::OK();
    std::string why = "GPU tensors need NCCL and the CUDA runtime, which tfring loads at run time. ";
    if (!n.ok()) why += n.message();
    if (!c.ok()) why += (n.ok() ? "" : "\nAlso: ") + c.message();
    return Status::Unimplemented(why);
  }

  std::string Describe() override {
    const NcclApi* nccl = nullptr;
    const CudaApi* cuda = nullptr;
    Status n = LoadNccl(&nccl);
    Status c = LoadCuda(&cuda);
    std::string out = n.ok() ? "NCCL " + NcclVersionText(nccl->version) + " (" + nccl->path + ")"
                             : "NCCL unavailable: " + n.message();
    out += c.ok() ? "; CUDA runtime " + std::to_string(cuda->runtime_version) + " (" + cuda->path + "), " +
                        std::to_string(cuda->device_count) + " device(s)"
                  : "; CUDA unavailable: " + c.message();
    return out;
  }

  Status CheckRequest(const Request& r) const override {
    if (r.attrs.dtype == DataType::kInt16 || r.attrs.dtype == DataType::kUInt16) {
      return Status::Unimplemented(std::string("NCCL has no 16-bit integer type, so ") + DataTypeName(r.attrs.dtype) +
                                   " tensors are collected on the CPU only; keep the tensor on the CPU or "
                                   "cast it to int32");
    }
    if (r.attrs.op != OpType::kAllreduce && r.attrs.op != OpType::kReducescatter) return Status::OK();
    NcclReduction red;
    return MapReduction(r.attrs.dtype, r.attrs.reduce_op, r.attrs.prescale, r.attrs.postscale, 1, &red);
  }

  Status CreateBackend(const BackendContext& context, std::unique_ptr<Backend>* out) override {
    const NcclApi* nccl = nullptr;
    const CudaApi* cuda = nullptr;
    TFRING_RETURN_IF_ERROR(LoadNccl(&nccl));
    TFRING_RETURN_IF_ERROR(LoadCuda(&cuda));
    // Each init of the job gets fresh store keys (every rank counts its own inits, and
    // every rank creates its backend at the same response).
    int64_t generation = 0;
    if (context.store != nullptr) {
      TFRING_RETURN_IF_ERROR(context.store->Add(
          context.key_prefix + "generation/rank" + std::to_string(context.rank), 1, &generation));
    }
    out->reset(new NcclBackend(context, *cuda, *nccl, generation));
    return Status::OK();
  }

  Status Allocate(int device, size_t bytes, void** ptr) override {
    *ptr = nullptr;
    if (bytes == 0) return Status::OK();
    const CudaApi* cuda = nullptr;
    TFRING_RETURN_IF_ERROR(LoadCuda(&cuda));
    DeviceScope scope(*cuda, device);
    TFRING_RETURN_IF_ERROR(CudaStatus(*cuda, scope.status(), "cudaSetDevice(" + std::to_string(device) + ")"));
    return CudaStatus(*cuda, cuda->cudaMalloc(ptr, bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes)");
  }

  void Free(int device, void* ptr) override {
    const CudaApi* cuda = nullptr;
    if (ptr == nullptr || !LoadCuda(&cuda).ok()) return;
    DeviceScope scope(*cuda, device);
    cuda->cudaFree(ptr);
  }

  Status PointerDevice(const void* ptr, int* device) override {
    const CudaApi* cuda = nullptr;
    TFRING_RETURN_IF_ERROR(LoadCuda(&cuda));
    cudaPointerAttributes attr;
    TFRING_RETURN_IF_ERROR(CudaStatus(*cuda, cuda->cudaPointerGetAttributes(&attr, ptr), "cudaPointerGetAttributes"));
    if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) {
      return Status::InvalidArgument("the pointer is not GPU memory");
    }
    *device = attr.device;
    return Status::OK();
  }

  Status StreamSynchronize(void* stream) override {
    const CudaApi* cuda = nullptr;
    TFRING_RETURN_IF_ERROR(LoadCuda(&cuda));
    return CudaStatus(*cuda, cuda->cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
  }

  Status Copy(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return Status::OK();
    const CudaApi* cuda = nullptr;
    TFRING_RETURN_IF_ERROR(LoadCuda(&cuda));
    TFRING_RETURN_IF_ERROR(CudaStatus(*cuda, cuda->cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy"));
    // From pageable host memory cudaMemcpy returns once the data is staged, before the DMA
    // into the device buffer has finished, and tfring's NCCL stream does not wait for the
    // legacy default stream that copy runs on. Found on an H200: a premultiplied
    // allreduce (a kernel) read a half-written input. Wait for the copy to land.
    return CudaStatus(*cuda, cuda->cudaStreamSynchronize(nullptr), "cudaStreamSynchronize (after cudaMemcpy)");
  }
};

struct Registrar {
  Registrar() {
    static NcclGpuSupport support;
    RegisterGpuSupport(&support);
  }
} registrar;

}  // namespace
}  // namespace gpu
}  // namespace tfring
