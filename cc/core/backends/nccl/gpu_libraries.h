// Run-time loading of the CUDA runtime (libcudart) and NCCL (libnccl.so.2): libtfring_core
// has no link-time dependency on either, so tfring imports and runs on machines without
// them and only GPU requests fail (kUnimplemented, saying what is missing and how to get it).
//
// Where each library is looked for, first hit wins:
//   1. the path in TFRING_NCCL_LIBRARY / TFRING_CUDA_RUNTIME_LIBRARY, if set (nothing else
//      is tried then);
//   2. a copy already loaded in the process (by TensorFlow, CuPy, PyTorch, ...);
//   3. the pip layouts under site-packages (nvidia/nccl/lib, nvidia/cu13/lib, nvidia/cu12/lib,
//      nvidia/cuda_runtime/lib) next to this libtfring_core.so and under every sys.path
//      entry the Python module registered (AddGpuLibrarySearchRoot);
//   4. the dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache).
// Every function is looked up with dlsym in that library's handle, never globally.
//
// Thread-safety: loading happens once per process under a lock; the tables are immutable
// afterwards and never unloaded. A failed load is remembered and reported again.
#pragma once

#include <string>

#include "base/status.h"
#include "backends/nccl/gpu_abi.h"

namespace tfring {
namespace gpu {

#define TFRING_GPU_DECLARE_POINTER(name, ret, args) ret(*name) args = nullptr;

struct CudaApi {
  TFRING_CUDA_API(TFRING_GPU_DECLARE_POINTER)
  std::string path;
  int runtime_version = 0;  // e.g. 12040
  int device_count = 0;
};

struct NcclApi {
  TFRING_NCCL_API(TFRING_GPU_DECLARE_POINTER)
  std::string path;
  int version = 0;  // e.g. 22105
};

// kUnimplemented when the library (or, for CUDA, a usable device) is absent.
Status LoadCuda(const CudaApi** out);
Status LoadNccl(const NcclApi** out);

// "cudaErrorInsufficientDriver (35): CUDA driver version is insufficient..."
std::string CudaErrorText(const CudaApi& cuda, cudaError_t error);
// "2.21.5"
std::string NcclVersionText(int code);

}  // namespace gpu
}  // namespace tfring
