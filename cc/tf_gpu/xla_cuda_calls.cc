// The CUDA side of tfring's XLA custom calls (see xla_cuda_calls.h).
#include "xla_cuda_calls.h"

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>

#include "backends/nccl/gpu_libraries.h"

namespace tfring {
namespace tf_gpu {
namespace xla_cuda {
namespace {

using gpu::cudaEvent_t;
using gpu::cudaStream_t;
using gpu::CudaApi;

Status CudaCheck(const CudaApi& cuda, gpu::cudaError_t e, const char* call) {
  if (e == gpu::cudaSuccess) return Status::OK();
  cuda.cudaGetLastError();
  return Status::Internal(std::string("tfring XLA (CUDA): ") + call + " failed: " + gpu::CudaErrorText(cuda, e));
}

// One start call's state between Start and Done.
struct Call {
  std::mutex mu;
  std::condition_variable changed;
  int device = 0;
  int pending = 0;                 // members neither on the NCCL stream nor finished
  std::vector<bool> enqueued;      // per member: its done event was recorded
  Status error;                    // first member error
  bool reported_ok = false;        // Done returned success (later errors are deferred)
  std::vector<cudaEvent_t> events;  // [0]: ready; [1 + i]: member i's done event

  void Enqueued(size_t i) {
    std::lock_guard<std::mutex> lock(mu);
    if (!enqueued[i]) {
      enqueued[i] = true;
      --pending;
      changed.notify_all();
    }
  }
  void Finished(size_t i, const Status& st) {
    std::lock_guard<std::mutex> lock(mu);
    if (!st.ok() && error.ok()) error = st;
    if (!enqueued[i]) {
      enqueued[i] = true;  // nothing recorded: Done must not wait on its event
      --pending;
      changed.notify_all();
      if (st.ok()) skipped.push_back(i);
    }
  }
  std::vector<size_t> skipped;  // finished OK without an event (no device work)
};

struct State {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<Call>> calls;
  std::map<int, std::vector<cudaEvent_t>> free_events;  // by device
  Status deferred;  // an error found after Done returned success (header)
};

State& Global() {
  static State* state = new State;  // never destroyed: callbacks may run at exit
  return *state;
}

Status TakeDeferred() {
  State& g = Global();
  std::lock_guard<std::mutex> lock(g.mu);
  Status st = g.deferred;
  g.deferred = Status::OK();
  if (!st.ok()) return st.WithContext("an earlier XLA collective of this process failed after its done call");
  return st;
}

Status AcquireEvents(const CudaApi& cuda, int device, size_t n, std::vector<cudaEvent_t>* out) {
  State& g = Global();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    auto& pool = g.free_events[device];
    while (out->size() < n && !pool.empty()) {
      out->push_back(pool.back());
      pool.pop_back();
    }
  }
  while (out->size() < n) {
    cudaEvent_t e = nullptr;
    TFRING_RETURN_IF_ERROR(
        CudaCheck(cuda, cuda.cudaEventCreateWithFlags(&e, gpu::kCudaEventDisableTiming), "cudaEventCreateWithFlags"));
    out->push_back(e);
  }
  return Status::OK();
}

void ReleaseEvents(int device, std::vector<cudaEvent_t>* events) {
  State& g = Global();
  std::lock_guard<std::mutex> lock(g.mu);
  auto& pool = g.free_events[device];
  pool.insert(pool.end(), events->begin(), events->end());
  events->clear();
}

// After the core finished the group: a late error is deferred, the events go back.
void Retire(const std::string& key, const std::shared_ptr<Call>& call, const Status& st) {
  bool defer;
  {
    std::lock_guard<std::mutex> lock(call->mu);
    defer = !st.ok() && call->reported_ok;
  }
  State& g = Global();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    if (defer && g.deferred.ok()) g.deferred = st;
    auto it = g.calls.find(key);
    if (it != g.calls.end() && it->second == call) g.calls.erase(it);
  }
  ReleaseEvents(call->device, &call->events);
}

}  // namespace

Status Start(const std::string& key, void* stream, int device, std::vector<Submission> group,
             std::vector<tf_ops::InflightTable::Finish> finish) {
  TFRING_RETURN_IF_ERROR(TakeDeferred());
  const CudaApi* cuda = nullptr;
  TFRING_RETURN_IF_ERROR(gpu::LoadCuda(&cuda));
  TFRING_RETURN_IF_ERROR(CudaCheck(*cuda, cuda->cudaSetDevice(device), "cudaSetDevice"));
  auto call = std::make_shared<Call>();
  call->device = device;
  call->pending = static_cast<int>(group.size());
  call->enqueued.assign(group.size(), false);
  TFRING_RETURN_IF_ERROR(AcquireEvents(*cuda, device, group.size() + 1, &call->events));
  // The inputs are ready once XLA's stream reaches this point.
  Status st = CudaCheck(*cuda, cuda->cudaEventRecord(call->events[0], static_cast<cudaStream_t>(stream)),
                        "cudaEventRecord (inputs ready, on XLA's stream)");
  if (!st.ok()) {
    ReleaseEvents(device, &call->events);
    return st;
  }
  finish.resize(group.size());
  for (size_t i = 0; i < group.size(); ++i) {
    Submission& s = group[i];
    s.ready_event = call->events[0];
    s.done_event = call->events[1 + i];
    s.on_enqueued = [call, i] { call->Enqueued(i); };
    finish[i] = [call, i, inner = std::move(finish[i])](const Status& core) {
      Status result = inner ? inner(core) : core;
      call->Finished(i, result);
      return result;
    };
  }
  {
    State& g = Global();
    std::lock_guard<std::mutex> lock(g.mu);
    g.calls[key] = call;  // replaces a call whose execution failed before its Done
  }
  st = tf_ops::InflightTable::Global().Start(key, std::move(group), std::move(finish));
  if (!st.ok()) {  // the core took none of them
    State& g = Global();
    {
      std::lock_guard<std::mutex> lock(g.mu);
      auto it = g.calls.find(key);
      if (it != g.calls.end() && it->second == call) g.calls.erase(it);
    }
    ReleaseEvents(device, &call->events);
  }
  return st;
}

Status Done(const std::string& key, void* stream, double timeout_s) {
  std::shared_ptr<Call> call;
  {
    State& g = Global();
    std::lock_guard<std::mutex> lock(g.mu);
    auto it = g.calls.find(key);
    if (it != g.calls.end()) call = it->second;
  }
  if (call == nullptr) return Status::Internal("XLA collective '" + key + "' was not started (a tfring bug)");
  const CudaApi* cuda = nullptr;
  TFRING_RETURN_IF_ERROR(gpu::LoadCuda(&cuda));
  std::vector<cudaEvent_t> wait_for;
  Status st;
  {
    std::unique_lock<std::mutex> lock(call->mu);
    if (!call->changed.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return call->pending == 0; })) {
      return Status::Timeout("XLA collective '" + key + "' did not reach the NCCL stream within " +
                             std::to_string(timeout_s) + " s");
    }
    st = call->error;
    if (st.ok()) {
      for (size_t i = 0; i < call->enqueued.size(); ++i) {
        bool skipped = false;
        for (size_t k : call->skipped) skipped = skipped || k == i;
        if (!skipped) wait_for.push_back(call->events[1 + i]);
      }
    }
  }
  // XLA's later kernels run after the collective, on the device.
  for (cudaEvent_t e : wait_for) {
    if (!st.ok()) break;
    st = CudaCheck(*cuda, cuda->cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), e, 0),
                   "cudaStreamWaitEvent (XLA's stream on the collective's done event)");
  }
  {
    std::lock_guard<std::mutex> lock(call->mu);
    call->reported_ok = st.ok();
  }
  tf_ops::InflightTable::Global().Await(key, [key, call](const Status& final_status) {
    Retire(key, call, final_status);
  });
  if (st.ok()) st = TakeDeferred();
  return st;
}

}  // namespace xla_cuda
}  // namespace tf_gpu
}  // namespace tfring
