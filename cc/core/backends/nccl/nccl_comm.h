// NcclComm: one NCCL communicator over every rank of the job on one GPU of this process,
// with tfring's own CUDA stream (all of tfring's GPU work for it runs there), a completion
// event, and a persistent device buffer for fusion.
//
// Never hangs: the communicator is non-blocking (ncclConfig_t.blocking = 0), so creation
// and every call return at once; tfring then polls (cudaEventQuery + ncclCommGetAsyncError)
// until the work finished, NCCL reported an asynchronous error (a peer died, the network
// broke), the runtime is torn down, or a deadline passed. In the last three cases the
// communicator is aborted with ncclCommAbort, which frees the GPU from the stuck kernels,
// and the caller gets kPeerLost / kAborted / kTimeout. An aborted NcclComm is unusable:
// the backend drops it and the job fails.
//
// Teardown: after a clean job, Close() finalizes the communicator (ncclCommFinalize flushes
// it and stops its proxy; local, no peer takes part) and destroys it, bounded; measured on
// an H200 that takes half of what ncclCommAbort does. Otherwise, or when Close fails or
// runs out of time, the communicator is aborted (the destructor does it if nobody did).
//
// Thread-safety: the runtime's background thread alone uses an NcclComm.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "base/deadline.h"
#include "rendezvous/store.h"
#include "backends/nccl/gpu_libraries.h"

namespace tfring {
namespace gpu {

struct NcclCommOptions {
  int rank = 0;
  int size = 1;
  int device = 0;             // CUDA ordinal in this process
  Store* store = nullptr;     // carries the ncclUniqueId from rank 0; null when size == 1
  std::string id_key;         // store key of this communicator's ncclUniqueId
  double start_timeout_s = 120;
  double timeout_s = 30;
  const std::atomic<bool>* abort = nullptr;
};

class NcclComm {
 public:
  // Blocking: exchanges the id through the store and waits for every rank to join,
  // bounded by start_timeout_s.
  static Status Create(const CudaApi& cuda, const NcclApi& nccl, const NcclCommOptions& options,
                       std::unique_ptr<NcclComm>* out);
  ~NcclComm();  // ncclCommAbort unless closed (local and bounded), then frees stream, event and buffer

  // Graceful teardown after a clean job: ncclCommFinalize, waited for up to `timeout_s`
  // (or until the abort flag is set), then ncclCommDestroy. On any failure the
  // communicator is aborted instead, and the reason returned. Either way it is released:
  // call nothing else on it afterwards. Blocking.
  Status Close(double timeout_s);

  int device() const { return options_.device; }
  ncclComm_t comm() const { return comm_; }
  cudaStream_t stream() const { return stream_; }
  bool aborted() const { return aborted_; }

  // Makes this communicator's device current on the calling thread.
  Status Activate();
  // Checks an NCCL call's result, waiting while the non-blocking communicator reports
  // ncclInProgress. `call` names the call in errors.
  Status Check(ncclResult_t result, const char* call);
  // Checks a CUDA runtime call's result.
  Status CheckCuda(cudaError_t result, const char* call);
  // Waits until everything enqueued on stream() has finished (see the header comment).
  Status Synchronize(const std::string& what);
  // Device buffer of at least `bytes` bytes, kept between calls (grown on demand).
  Status FusionBuffer(size_t bytes, char** out);
  // Asynchronous device-to-device copy on stream().
  Status CopyAsync(void* dst, const void* src, size_t bytes);

 private:
  NcclComm(const CudaApi& cuda, const NcclApi& nccl, const NcclCommOptions& options)
      : cuda_(cuda), nccl_(nccl), options_(options) {}
  // Polls until `finished` says so; aborts the communicator on error, abort or deadline.
  template <typename Finished>
  Status Poll(Deadline deadline, const std::string& what, double limit_s, const char* setting,
              Finished finished);
  Status Fail(Status status);  // aborts the communicator, returns `status`
  // One poll of the non-blocking communicator's state, for Poll(): false while NCCL reports
  // ncclInProgress; else true, with *st set to "<what> failed: ..." on an error.
  bool AsyncDone(const std::string& what, Status* st);
  std::string LastError() const;

  const CudaApi& cuda_;
  const NcclApi& nccl_;
  NcclCommOptions options_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t done_ = nullptr;
  char* fusion_ = nullptr;
  size_t fusion_bytes_ = 0;
  bool aborted_ = false;
};

}  // namespace gpu
}  // namespace tfring
