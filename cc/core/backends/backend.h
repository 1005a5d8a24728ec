// Backend: where the bytes of a collective move. CpuBackend (cpu_backend.h: rings over the
// Communicator's links) serves every request with device == -1; a request with
// device >= 0 goes to the GPU backend, which an optional component
// (cc/core/backends/nccl/, built unless TFRING_WITH_NCCL=0) registers at load time. Nothing else in
// the core knows whether one exists: no #if outside that registration.
//
// Threads: Backend::Execute runs on the runtime's background thread only; Abort() and
// everything in GpuSupport may be called from any thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "base/config.h"
#include "control/messages.h"
#include "rendezvous/store.h"
#include "control/submission.h"

namespace tfring {

class Communicator;
class Timeline;

// What a backend may use of its runtime. Pointers are owned by the runtime and outlive the
// backend.
struct BackendContext {
  int rank = 0;
  int size = 1;
  Store* store = nullptr;        // the job's store; null when size == 1
  std::string key_prefix;        // namespace for this backend's keys in the store
  double timeout_s = 30;         // one collective (TFRING_TIMEOUT_S)
  double start_timeout_s = 120;  // setting up a communicator (TFRING_START_TIMEOUT_S)
  double shutdown_timeout_s = 10;  // the whole shutdown (TFRING_SHUTDOWN_TIMEOUT_S); Close's share is half
  const std::atomic<bool>* abort = nullptr;  // set when the job is being torn down
  const Config* config = nullptr;
  Communicator* comm = nullptr;  // the CPU data links (CpuBackend)
  size_t chunk_bytes = 1 << 18;  // pipelining unit of the CPU rings (TFRING_CHUNK_BYTES)
  Timeline* timeline = nullptr;  // rank 0's trace (thread-safe; usually inactive)
};

// What one Execute measured, for RuntimeStats.
struct ExecutionTimings {
  // Seconds of the transport phase alone (the collective's algorithm, without fusion
  // copies); -1 when the backend does not separate it (the whole execution counts).
  double transfer_s = -1;
  // Bytes of this rank's tensors packed into a fusion buffer (copied in, then out again).
  size_t fusion_copied_bytes = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // Runs one response (same order on every rank) over this rank's submissions for it,
  // given in response order. Blocking, bounded by the context's timeouts. A non-OK status
  // is a transfer failure: the runtime fails the job with it.
  virtual Status Execute(const Response& response, const std::vector<Submission*>& group,
                         ExecutionTimings* timings) = 0;
  // Called once, on the background thread, when the job ends, before the job's transports
  // close; nothing runs on the backend afterwards. `clean`: the job ended by shutdown()
  // without a failure, every collective finished, so the backend may release what it holds
  // gracefully (bounded by half of shutdown_timeout_s); otherwise at once.
  virtual void Close(bool clean) { (void)clean; }
  // The autotuner's values (control/tunables.h) for every later Execute; the runtime calls
  // it on every rank at the same point of the response order. A backend that reads none of
  // them ignores it.
  virtual void Retune(const std::vector<double>& values) { (void)values; }
};

// Device memory and libraries, for the bindings (the pybind module's device arrays) and
// the runtime. Registered by the GPU backend; every method is thread-safe.
class GpuSupport {
 public:
  virtual ~GpuSupport() = default;
  // Loads the GPU libraries once per process. kUnimplemented, saying what is missing and
  // how to get it, when they or a device are absent.
  virtual Status Available() = 0;
  // "NCCL 2.21.5 (path), CUDA runtime 12040 (path), 2 device(s)" or the reason it is not.
  virtual std::string Describe() = 0;
  // Whether this backend can run `request` (dtype, reduce op, scale factors); no loading.
  virtual Status CheckRequest(const Request& request) const = 0;
  virtual Status CreateBackend(const BackendContext& context, std::unique_ptr<Backend>* out) = 0;

  // Helpers for bindings. Blocking; errors are kInternal with the CUDA message.
  virtual Status Allocate(int device, size_t bytes, void** ptr) = 0;  // bytes 0 -> nullptr
  virtual void Free(int device, void* ptr) = 0;
  virtual Status PointerDevice(const void* ptr, int* device) = 0;
  virtual Status StreamSynchronize(void* stream) = 0;  // a cudaStream_t of any library
  virtual Status Copy(void* dst, const void* src, size_t bytes) = 0;  // any direction; landed on return
};

// The registered GPU support, or nullptr when tfring was built without it.
GpuSupport* GetGpuSupport();
// Called once from a static initializer of the GPU backend. Not thread-safe with Get.
void RegisterGpuSupport(GpuSupport* support);

// Enqueue-time check of a request with device >= 0: kUnimplemented when no GPU backend
// was built or its libraries cannot be loaded, else the backend's CheckRequest.
Status CheckGpuRequest(const Request& request);

// Extra directories in which to look for the pip layouts nvidia/nccl/lib, nvidia/cu12/lib,
// nvidia/cuda_runtime/lib, ... (the Python module adds sys.path). Thread-safe.
void AddGpuLibrarySearchRoot(const std::string& dir);
std::vector<std::string> GpuLibrarySearchRoots();

// The GPU library paths of the runtime's configuration (TFRING_NCCL_LIBRARY and
// TFRING_CUDA_RUNTIME_LIBRARY, from init(...) arguments or the environment), set by
// Runtime::Init; the loader (nccl/gpu_libraries.cc) prefers them to the environment, so
// init(nccl_library=...) is honoured. A library already loaded stays loaded. Thread-safe.
void SetGpuLibraryPath(const std::string& setting, const std::string& path);
// False when Runtime::Init has not configured `setting` (then the loader reads the env).
bool ConfiguredGpuLibraryPath(const std::string& setting, std::string* path);

}  // namespace tfring
