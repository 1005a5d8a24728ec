#include "backends/nccl/nccl_comm.h"

#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "base/logging.h"
#include "base/poll_backoff.h"

namespace tfring {
namespace gpu {
namespace {


Status NcclStatus(ncclResult_t result, const std::string& message) {
  // A remote or system error is how NCCL reports a dead peer or a broken network.
  if (result == ncclRemoteError || result == ncclSystemError) return Status::PeerLost(message);
  if (result == ncclInvalidArgument || result == ncclInvalidUsage) return Status::InvalidArgument(message);
  return Status::Internal(message);
}

}  // namespace

Status NcclComm::Create(const CudaApi& cuda, const NcclApi& nccl, const NcclCommOptions& options,
                        std::unique_ptr<NcclComm>* out) {
  std::unique_ptr<NcclComm> c(new NcclComm(cuda, nccl, options));
  TFRING_RETURN_IF_ERROR(c->Activate());

  // Rank 0 makes the id; everyone else reads it from the store.
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (options.rank == 0) {
    ncclResult_t rc = nccl.ncclGetUniqueId(&id);
    if (rc != ncclSuccess) {
      return NcclStatus(rc, std::string("ncclGetUniqueId failed: ") + nccl.ncclGetErrorString(rc));
    }
    if (options.store != nullptr) {
      TFRING_RETURN_IF_ERROR(options.store->Set(options.id_key, std::string(id.internal, sizeof(id.internal))));
    }
  } else {
    std::string value;
    Status st = options.store->Get(options.id_key, options.start_timeout_s, &value);
    if (!st.ok()) {
      return st.WithContext("waiting for rank 0's NCCL id (does rank 0 run the same GPU collective, "
                            "with NCCL available?)");
    }
    if (value.size() != sizeof(id.internal)) {
      return Status::Internal("NCCL id in the store has " + std::to_string(value.size()) + " bytes, expected " +
                              std::to_string(sizeof(id.internal)));
    }
    std::memcpy(id.internal, value.data(), sizeof(id.internal));
  }

  ncclConfig_t config;
  config.size = sizeof(config);
  config.magic = kNcclConfigMagic;
  config.version = static_cast<unsigned int>(NcclVersionCode(2, 14, 0));
  config.blocking = 0;
  config.cgaClusterSize = kNcclConfigUndefInt;
  config.minCTAs = kNcclConfigUndefInt;
  config.maxCTAs = kNcclConfigUndefInt;
  config.netName = nullptr;
  ncclResult_t rc = nccl.ncclCommInitRankConfig(&c->comm_, options.size, id, options.rank, &config);
  if (rc != ncclSuccess && rc != ncclInProgress) {
    c->comm_ = nullptr;  // nothing to abort
    return NcclStatus(rc, std::string("ncclCommInitRankConfig failed on GPU ") + std::to_string(options.device) +
                              ": " + nccl.ncclGetErrorString(rc) + " (" + nccl.ncclGetLastError(nullptr) + ")");
  }
  // Joining waits for every rank: bound it by the start timeout, not the per-op one.
  TFRING_RETURN_IF_ERROR(c->Poll(
      Deadline::After(options.start_timeout_s), "creating the NCCL communicator", options.start_timeout_s,
      "TFRING_START_TIMEOUT_S", [&c](Status* st) { return c->AsyncDone("NCCL communicator setup", st); }));
  TFRING_RETURN_IF_ERROR(c->CheckCuda(cuda.cudaStreamCreateWithFlags(&c->stream_, kCudaStreamNonBlocking),
                                      "cudaStreamCreateWithFlags"));
  TFRING_RETURN_IF_ERROR(c->CheckCuda(cuda.cudaEventCreateWithFlags(&c->done_, kCudaEventDisableTiming),
                                      "cudaEventCreateWithFlags"));
  TFRING_LOG(LogLevel::kInfo, "nccl", "communicator of " << options.size << " rank(s) on GPU "
                                                         << options.device << " is ready");
  *out = std::move(c);
  return Status::OK();
}

NcclComm::~NcclComm() {
  cuda_.cudaSetDevice(options_.device);
  // Not closed (the job failed): abort rather than destroy, which is local and bounded
  // (ncclCommDestroy may wait on work that a dead peer will never finish).
  if (comm_ != nullptr && !aborted_) nccl_.ncclCommAbort(comm_);
  if (done_ != nullptr) cuda_.cudaEventDestroy(done_);
  if (stream_ != nullptr) cuda_.cudaStreamDestroy(stream_);
  if (fusion_ != nullptr) cuda_.cudaFree(fusion_);
}

Status NcclComm::Close(double timeout_s) {
  if (comm_ == nullptr || aborted_) return Status::OK();
  TFRING_RETURN_IF_ERROR(Activate());
  const auto start = std::chrono::steady_clock::now();
  const ncclResult_t rc = nccl_.ncclCommFinalize(comm_);
  if (rc != ncclSuccess && rc != ncclInProgress) {
    return Fail(NcclStatus(rc, std::string("ncclCommFinalize failed: ") + nccl_.ncclGetErrorString(rc) + " (" +
                                   LastError() + ")"));
  }
  // Non-blocking: the finalize runs on NCCL's thread until the async state leaves ncclInProgress.
  TFRING_RETURN_IF_ERROR(Poll(Deadline::After(timeout_s), "finalizing the NCCL communicator", timeout_s,
                              "half of TFRING_SHUTDOWN_TIMEOUT_S",
                              [this](Status* st) { return AsyncDone("ncclCommFinalize", st); }));
  const ncclResult_t destroyed = nccl_.ncclCommDestroy(comm_);
  if (destroyed != ncclSuccess) {
    // After a finalize destroy only frees memory; a failure leaves nothing to abort safely.
    TFRING_LOG(LogLevel::kWarning, "nccl", "ncclCommDestroy on GPU " << options_.device << " failed: "
                                                                      << nccl_.ncclGetErrorString(destroyed));
  }
  comm_ = nullptr;
  const auto took_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  TFRING_LOG(LogLevel::kInfo, "nccl", "finalized and destroyed the NCCL communicator on GPU "
                                          << options_.device << " in " << took_ms << " ms");
  return Status::OK();
}

Status NcclComm::Activate() { return CheckCuda(cuda_.cudaSetDevice(options_.device), "cudaSetDevice"); }

std::string NcclComm::LastError() const {
  const char* text = nccl_.ncclGetLastError(comm_);
  return text != nullptr && text[0] != '\0' ? text : "no detail; NCCL_DEBUG=WARN shows more";
}

Status NcclComm::Fail(Status status) {
  if (comm_ != nullptr && !aborted_) {
    nccl_.ncclCommAbort(comm_);
    aborted_ = true;
    TFRING_LOG(LogLevel::kWarning, "nccl", "aborted the NCCL communicator on GPU " << options_.device
                                                                                 << ": " << status.message());
  }
  return status;
}

Status NcclComm::CheckCuda(cudaError_t result, const char* call) {
  if (result == cudaSuccess) return Status::OK();
  cuda_.cudaGetLastError();
  return Status::Internal(std::string(call) + " failed on GPU " + std::to_string(options_.device) + ": " +
                          CudaErrorText(cuda_, result));
}

Status NcclComm::Check(ncclResult_t result, const char* call) {
  if (result == ncclSuccess) return Status::OK();
  if (result != ncclInProgress) {
    return Fail(NcclStatus(result, std::string(call) + " failed: " + nccl_.ncclGetErrorString(result) + " (" +
                                       LastError() + ")"));
  }
  return Poll(Deadline::After(options_.timeout_s), call, options_.timeout_s, "TFRING_TIMEOUT_S",
              [this, call](Status* st) { return AsyncDone(call, st); });
}

bool NcclComm::AsyncDone(const std::string& what, Status* st) {
  ncclResult_t state = ncclInProgress;
  ncclResult_t q = nccl_.ncclCommGetAsyncError(comm_, &state);
  if (q != ncclSuccess) state = q;
  if (state == ncclInProgress) return false;
  if (state != ncclSuccess) {
    *st = NcclStatus(state, what + " failed: " + nccl_.ncclGetErrorString(state) + " (" + LastError() + ")");
  }
  return true;
}

Status NcclComm::Synchronize(const std::string& what) {
  TFRING_RETURN_IF_ERROR(CheckCuda(cuda_.cudaEventRecord(done_, stream_), "cudaEventRecord"));
  return Poll(Deadline::After(options_.timeout_s), what, options_.timeout_s, "TFRING_TIMEOUT_S",
              [this, &what](Status* st) {
                cudaError_t q = cuda_.cudaEventQuery(done_);
                if (q == cudaSuccess) return true;
                if (q != cudaErrorNotReady) {
                  cuda_.cudaGetLastError();
                  *st = Status::Internal(what + ": the GPU reported " + CudaErrorText(cuda_, q));
                  return true;
                }
                ncclResult_t state = ncclSuccess;
                ncclResult_t e = nccl_.ncclCommGetAsyncError(comm_, &state);
                if (e != ncclSuccess) state = e;
                if (state != ncclSuccess && state != ncclInProgress) {
                  *st = NcclStatus(state, what + ": NCCL reported " + nccl_.ncclGetErrorString(state) + " (" +
                                              LastError() + "); a peer may have died");
                  return true;
                }
                return false;
              });
}

template <typename Finished>
Status NcclComm::Poll(Deadline deadline, const std::string& what, double limit_s, const char* setting,
                      Finished finished) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    Status st;
    if (finished(&st)) return st.ok() ? st : Fail(st);
    if (options_.abort != nullptr && options_.abort->load()) {
      return Fail(Status::Aborted(what + " was interrupted: tfring is shutting down or the job failed"));
    }
    if (deadline.expired()) {
      return Fail(Status::Timeout(what + " on GPU " + std::to_string(options_.device) + " did not finish within " +
                                  std::to_string(limit_s) + " s (" + setting +
                                  "); a peer may have died or stopped submitting; the NCCL "
                                  "communicator was aborted"));
    }
    const auto sleep = PollBackoff::SleepAfter(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start));
    if (sleep.count() == 0) {
      sched_yield();
    } else {
      usleep(static_cast<useconds_t>(sleep.count()));
    }
  }
}

Status NcclComm::FusionBuffer(size_t bytes, char** out) {
  if (bytes > fusion_bytes_) {
    if (fusion_ != nullptr) {
      // cudaFree waits for the device, so nothing still reads the old buffer.
      TFRING_RETURN_IF_ERROR(CheckCuda(cuda_.cudaFree(fusion_), "cudaFree"));
      fusion_ = nullptr;
      fusion_bytes_ = 0;
    }
    size_t want = (bytes + (1u << 20) - 1) & ~size_t((1u << 20) - 1);  // whole MiB
    void* p = nullptr;
    TFRING_RETURN_IF_ERROR(CheckCuda(cuda_.cudaMalloc(&p, want), "cudaMalloc (fusion buffer)"));
    fusion_ = static_cast<char*>(p);
    fusion_bytes_ = want;
  }
  *out = fusion_;
  return Status::OK();
}

Status NcclComm::CopyAsync(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return Status::OK();
  return CheckCuda(cuda_.cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), "cudaMemcpyAsync");
}

}  // namespace gpu
}  // namespace tfring
