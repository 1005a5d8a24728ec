// Compile-time proof that gpu_abi.h matches the vendor headers. Not part of the library:
// `make gpu-compile-check` (CI) and TFRING_WITH_NCCL=1 compile it with -fsyntax-only
// against the real <cuda_runtime_api.h> and <nccl.h>; any drift is a compile error naming
// the function, constant or field.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <type_traits>

#include "backends/nccl/gpu_abi.h"

namespace abi = tfring::gpu;

static_assert(NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0), "the ABI check needs nccl.h 2.14 or newer");

// Every function: the signature spelled in gpu_abi.h's list, read here with the vendor's
// types (global namespace), must exactly match a vendor declaration (static_cast to a
// function pointer type picks an exact overload or fails; cuda_runtime.h adds templates).
#define TFRING_CHECK_SIGNATURE(name, ret, args) \
  using tfring_check_##name = decltype(static_cast<ret(*) args>(&::name));
TFRING_CUDA_API(TFRING_CHECK_SIGNATURE)
TFRING_NCCL_API(TFRING_CHECK_SIGNATURE)

// ... and the types gpu_abi.h uses in their place must be the same size.
#define TFRING_CHECK_SIZE(type) static_assert(sizeof(abi::type) == sizeof(::type), "size of " #type " differs");
TFRING_CHECK_SIZE(cudaError_t)
TFRING_CHECK_SIZE(cudaStream_t)
TFRING_CHECK_SIZE(cudaEvent_t)
TFRING_CHECK_SIZE(cudaMemcpyKind)
TFRING_CHECK_SIZE(ncclComm_t)
TFRING_CHECK_SIZE(ncclUniqueId)
TFRING_CHECK_SIZE(ncclResult_t)
TFRING_CHECK_SIZE(ncclDataType_t)
TFRING_CHECK_SIZE(ncclRedOp_t)
TFRING_CHECK_SIZE(ncclScalarResidence_t)
static_assert(std::is_signed<std::underlying_type<abi::ncclRedOp_t>::type>::value ==
                  std::is_signed<std::underlying_type<::ncclRedOp_t>::type>::value,
              "signedness of ncclRedOp_t differs");

// Constants.
#define TFRING_CHECK_VALUE(name) static_assert(static_cast<long long>(abi::name) == static_cast<long long>(::name), \
                                               "value of " #name " differs");
TFRING_CHECK_VALUE(cudaSuccess)
TFRING_CHECK_VALUE(cudaErrorNotReady)
TFRING_CHECK_VALUE(cudaMemcpyHostToHost)
TFRING_CHECK_VALUE(cudaMemcpyHostToDevice)
TFRING_CHECK_VALUE(cudaMemcpyDeviceToHost)
TFRING_CHECK_VALUE(cudaMemcpyDeviceToDevice)
TFRING_CHECK_VALUE(cudaMemcpyDefault)
TFRING_CHECK_VALUE(cudaMemoryTypeUnregistered)
TFRING_CHECK_VALUE(cudaMemoryTypeHost)
TFRING_CHECK_VALUE(cudaMemoryTypeDevice)
TFRING_CHECK_VALUE(cudaMemoryTypeManaged)
static_assert(abi::kCudaStreamNonBlocking == cudaStreamNonBlocking, "cudaStreamNonBlocking differs");
static_assert(abi::kCudaEventDisableTiming == cudaEventDisableTiming, "cudaEventDisableTiming differs");
TFRING_CHECK_VALUE(ncclSuccess)
TFRING_CHECK_VALUE(ncclUnhandledCudaError)
TFRING_CHECK_VALUE(ncclSystemError)
TFRING_CHECK_VALUE(ncclInternalError)
TFRING_CHECK_VALUE(ncclInvalidArgument)
TFRING_CHECK_VALUE(ncclInvalidUsage)
TFRING_CHECK_VALUE(ncclRemoteError)
TFRING_CHECK_VALUE(ncclInProgress)
TFRING_CHECK_VALUE(ncclInt8)
TFRING_CHECK_VALUE(ncclUint8)
TFRING_CHECK_VALUE(ncclInt32)
TFRING_CHECK_VALUE(ncclUint32)
TFRING_CHECK_VALUE(ncclInt64)
TFRING_CHECK_VALUE(ncclUint64)
TFRING_CHECK_VALUE(ncclFloat16)
TFRING_CHECK_VALUE(ncclFloat32)
TFRING_CHECK_VALUE(ncclFloat64)
TFRING_CHECK_VALUE(ncclBfloat16)
TFRING_CHECK_VALUE(ncclSum)
TFRING_CHECK_VALUE(ncclProd)
TFRING_CHECK_VALUE(ncclMax)
TFRING_CHECK_VALUE(ncclMin)
TFRING_CHECK_VALUE(ncclAvg)
TFRING_CHECK_VALUE(ncclScalarDevice)
TFRING_CHECK_VALUE(ncclScalarHostImmediate)
static_assert(TFRING_NCCL_UNIQUE_ID_BYTES == NCCL_UNIQUE_ID_BYTES, "NCCL_UNIQUE_ID_BYTES differs");
constexpr ::ncclConfig_t kVendorConfigInit = NCCL_CONFIG_INITIALIZER;
static_assert(abi::kNcclConfigMagic == kVendorConfigInit.magic, "the ncclConfig_t magic differs");
static_assert(abi::kNcclConfigUndefInt == NCCL_CONFIG_UNDEF_INT, "NCCL_CONFIG_UNDEF_INT differs");
static_assert(abi::NcclVersionCode(2, 19, 3) == NCCL_VERSION(2, 19, 3), "NCCL_VERSION encoding differs");

// Struct layouts: gpu_abi.h's are prefixes of (or, for cudaPointerAttributes, larger than)
// the vendor's, field for field.
#define TFRING_CHECK_FIELD(type, field) \
  static_assert(offsetof(abi::type, field) == offsetof(::type, field), "offset of " #type "." #field " differs");
TFRING_CHECK_FIELD(cudaPointerAttributes, type)
TFRING_CHECK_FIELD(cudaPointerAttributes, device)
TFRING_CHECK_FIELD(cudaPointerAttributes, devicePointer)
TFRING_CHECK_FIELD(cudaPointerAttributes, hostPointer)
static_assert(sizeof(abi::cudaPointerAttributes) >= sizeof(::cudaPointerAttributes),
              "tfring's cudaPointerAttributes is smaller than the runtime's");
TFRING_CHECK_FIELD(ncclConfig_t, size)
TFRING_CHECK_FIELD(ncclConfig_t, magic)
TFRING_CHECK_FIELD(ncclConfig_t, version)
TFRING_CHECK_FIELD(ncclConfig_t, blocking)
TFRING_CHECK_FIELD(ncclConfig_t, cgaClusterSize)
TFRING_CHECK_FIELD(ncclConfig_t, minCTAs)
TFRING_CHECK_FIELD(ncclConfig_t, maxCTAs)
TFRING_CHECK_FIELD(ncclConfig_t, netName)
static_assert(sizeof(abi::ncclConfig_t) <= sizeof(::ncclConfig_t), "tfring's ncclConfig_t is not a prefix");
