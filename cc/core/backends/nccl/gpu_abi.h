// The slice of the CUDA runtime and NCCL C ABI that tfring calls, declared here so the
// NCCL backend builds without CUDA or NCCL headers and links against neither: both
// libraries are opened at run time (gpu_libraries.cc) and every function below is looked
// up by name in the library's own handle (never in the global namespace, where the CUDA
// build of TensorFlow exports nccl*/cuda* shims of its own).
//
// Every declaration mirrors the vendor header of the same name: enum values, struct
// layouts and function signatures. abi_check.cc compiles these lists against the real
// <cuda_runtime_api.h> and <nccl.h> (make gpu-compile-check, CI) and fails on any drift.
//
// Versions: CUDA runtime 11+ (12 and 13 tested by the ABI check's headers), NCCL 2.14+
// (non-blocking communicators; ncclAvg, bfloat16 and ncclRedOpCreatePreMulSum are older).
#pragma once

#include <cstddef>

namespace tfring {
namespace gpu {

// ---------------------------------------------------------------- CUDA runtime
enum cudaError { cudaSuccess = 0, cudaErrorNotReady = 600 };  // other values: error codes
typedef enum cudaError cudaError_t;
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
enum cudaMemoryType {
  cudaMemoryTypeUnregistered = 0,
  cudaMemoryTypeHost = 1,
  cudaMemoryTypeDevice = 2,
  cudaMemoryTypeManaged = 3,
};
// CUDA 13 appended `long reserved[8]`; the runtime writes sizeof(its own struct), so this
// one is padded well past any known size. Only `type` and `device` are read.
struct cudaPointerAttributes {
  enum cudaMemoryType type;
  int device;
  void* devicePointer;
  void* hostPointer;
  long reserved[32];
};
constexpr unsigned int kCudaStreamNonBlocking = 0x01;  // cudaStreamNonBlocking
constexpr unsigned int kCudaEventDisableTiming = 0x02;  // cudaEventDisableTiming

// X(name, return type, (argument types))
#define TFRING_CUDA_API(X)                                                              \
  X(cudaGetErrorString, const char*, (cudaError_t))                                     \
  X(cudaGetLastError, cudaError_t, ())                                                  \
  X(cudaRuntimeGetVersion, cudaError_t, (int*))                                         \
  X(cudaDriverGetVersion, cudaError_t, (int*))                                          \
  X(cudaGetDeviceCount, cudaError_t, (int*))                                            \
  X(cudaGetDevice, cudaError_t, (int*))                                                 \
  X(cudaSetDevice, cudaError_t, (int))                                                  \
  X(cudaPointerGetAttributes, cudaError_t, (cudaPointerAttributes*, const void*))       \
  X(cudaMalloc, cudaError_t, (void**, size_t))                                          \
  X(cudaFree, cudaError_t, (void*))                                                     \
  X(cudaMemcpy, cudaError_t, (void*, const void*, size_t, cudaMemcpyKind))              \
  X(cudaMemcpyAsync, cudaError_t, (void*, const void*, size_t, cudaMemcpyKind, cudaStream_t)) \
  X(cudaStreamCreateWithFlags, cudaError_t, (cudaStream_t*, unsigned int))              \
  X(cudaStreamDestroy, cudaError_t, (cudaStream_t))                                     \
  X(cudaStreamSynchronize, cudaError_t, (cudaStream_t))                                 \
  X(cudaEventCreateWithFlags, cudaError_t, (cudaEvent_t*, unsigned int))                \
  X(cudaEventDestroy, cudaError_t, (cudaEvent_t))                                       \
  X(cudaEventRecord, cudaError_t, (cudaEvent_t, cudaStream_t))                          \
  X(cudaEventQuery, cudaError_t, (cudaEvent_t))                                         \
  X(cudaStreamWaitEvent, cudaError_t, (cudaStream_t, cudaEvent_t, unsigned int))

// ---------------------------------------------------------------- NCCL
typedef struct ncclComm* ncclComm_t;
#define TFRING_NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[TFRING_NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

typedef enum {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
} ncclDataType_t;

typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclMaxRedOp = 0x7fffffff  // nccl.h's sentinel: makes the enum int-sized (custom ops)
} ncclRedOp_t;

typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

// A prefix of ncclConfig_t (the NCCL 2.17 layout). NCCL copies `size` bytes and takes its
// defaults for everything after them and for every field newer than `version` (2.14: only
// `blocking` is honoured), so this is valid for every NCCL from 2.14 on.
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
} ncclConfig_t;
constexpr unsigned int kNcclConfigMagic = 0xcafebeef;
constexpr int kNcclConfigUndefInt = static_cast<int>(0x80000000u);  // NCCL_CONFIG_UNDEF_INT
constexpr int NcclVersionCode(int major, int minor, int patch) {
  return major * 10000 + minor * 100 + patch;  // NCCL_VERSION for 2.9+
}
constexpr int kMinNcclVersion = NcclVersionCode(2, 14, 0);

#define TFRING_NCCL_API(X)                                                               \
  X(ncclGetVersion, ncclResult_t, (int*))                                                \
  X(ncclGetErrorString, const char*, (ncclResult_t))                                     \
  X(ncclGetLastError, const char*, (ncclComm_t))                                         \
  X(ncclGetUniqueId, ncclResult_t, (ncclUniqueId*))                                      \
  X(ncclCommInitRankConfig, ncclResult_t, (ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*)) \
  X(ncclCommAbort, ncclResult_t, (ncclComm_t))                                           \
  X(ncclCommFinalize, ncclResult_t, (ncclComm_t))                                        \
  X(ncclCommDestroy, ncclResult_t, (ncclComm_t))                                         \
  X(ncclCommGetAsyncError, ncclResult_t, (ncclComm_t, ncclResult_t*))                    \
  X(ncclRedOpCreatePreMulSum, ncclResult_t,                                              \
    (ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t, ncclComm_t))            \
  X(ncclRedOpDestroy, ncclResult_t, (ncclRedOp_t, ncclComm_t))                           \
  X(ncclAllReduce, ncclResult_t,                                                         \
    (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t)) \
  X(ncclBroadcast, ncclResult_t,                                                         \
    (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))         \
  X(ncclReduce, ncclResult_t,                                                            \
    (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t)) \
  X(ncclAllGather, ncclResult_t,                                                         \
    (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t))              \
  X(ncclReduceScatter, ncclResult_t,                                                     \
    (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t)) \
  X(ncclSend, ncclResult_t, (const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t)) \
  X(ncclRecv, ncclResult_t, (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))       \
  X(ncclGroupStart, ncclResult_t, ())                                                    \
  X(ncclGroupEnd, ncclResult_t, ())

}  // namespace gpu
}  // namespace tfring
