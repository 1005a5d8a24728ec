// InflightTable (see inflight.h).
#include "inflight.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/runtime.h"

namespace tfring {
namespace tf_ops {

namespace {

using Clock = std::chrono::steady_clock;

// When the group's calls ran, for rank 0's timeline (docs/monitoring.md): the start call
// [started, submitted] (XLA_START), the core's work [started, completed] (XLA_IN_FLIGHT),
// the done call until its future was fulfilled [awaited, told] (XLA_DONE). Recorded only
// for a group started while this rank writes a timeline (Start asks once: Group::timed), so
// a job without one reads no clock, copies no key and takes no extra lock; written by the
// notifier thread.
struct Times {
  std::string key;
  Clock::time_point started, submitted, completed, awaited;
};

struct Group {
  int remaining = 0;
  Status status;  // first error of any member
  bool awaited = false;
  bool timed = false;  // `times` is recorded (a timeline was on at Start)
  InflightTable::Callback callback;
  Times times;
};

void WriteSpans(const Times& t, Clock::time_point told) {
  Runtime::Global().TimelineSpans(t.key, {{"XLA_START", t.started, t.submitted},
                                          {"XLA_IN_FLIGHT", t.started, t.completed},
                                          {"XLA_DONE", t.awaited, told}});
}

struct Ready {
  InflightTable::Callback callback;
  Status status;
  bool timed;  // false: nothing to write (no timeline at Start, an error, an unknown key)
  Times times;
};

}  // namespace

struct InflightTable::Impl {
  std::mutex mu;
  std::condition_variable wake;
  std::condition_variable idle;  // running reached 0
  std::map<std::string, std::shared_ptr<Group>> groups;
  int running = 0;  // groups with remaining > 0
  std::deque<Ready> ready;  // for the notifier thread

  // Under mu: queues the callbacks of finished, awaited groups that may be told now (OK
  // ones at once; failed ones once nothing runs) and forgets those groups.
  void CollectReadyLocked() {
    for (auto it = groups.begin(); it != groups.end();) {
      Group& g = *it->second;
      if (g.remaining == 0 && g.awaited && (g.status.ok() || running == 0)) {
        ready.push_back(Ready{std::move(g.callback), g.status, g.timed && g.status.ok(), std::move(g.times)});
        it = groups.erase(it);
      } else {
        ++it;
      }
    }
    if (!ready.empty()) wake.notify_one();
  }

  void Complete(const std::shared_ptr<Group>& g, const Status& st) {
    std::lock_guard<std::mutex> lock(mu);
    if (!st.ok() && g->status.ok()) g->status = st;
    if (g->timed && g->remaining == 1) g->times.completed = Clock::now();
    if (--g->remaining == 0 && --running == 0) idle.notify_all();
    // This group may be told now; so may failed groups that waited for nothing to run.
    if (g->remaining == 0 && (g->awaited || running == 0)) CollectReadyLocked();
  }

  void NotifierLoop() {
    std::unique_lock<std::mutex> lock(mu);
    while (true) {
      wake.wait(lock, [this] { return !ready.empty(); });
      Ready next = std::move(ready.front());
      ready.pop_front();
      lock.unlock();
      const Clock::time_point told = Clock::now();  // the callback may run XLA's continuation
      next.callback(next.status);
      if (next.timed) WriteSpans(next.times, told);
      lock.lock();
    }
  }
};

InflightTable::InflightTable() : impl_(new Impl) {
  std::thread([impl = impl_] { impl->NotifierLoop(); }).detach();
}

InflightTable& InflightTable::Global() {
  static InflightTable* table = new InflightTable;  // never destroyed (see impl_)
  return *table;
}

Status InflightTable::Start(const std::string& key, std::vector<Submission> group, std::vector<Finish> finish) {
  auto g = std::make_shared<Group>();
  g->remaining = static_cast<int>(group.size());
  g->timed = Runtime::Global().TimelineActive();
  if (g->timed) {
    g->times.key = key;
    g->times.started = Clock::now();
  }
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = impl_->groups.find(key);
    if (it != impl_->groups.end()) {
      if (it->second->remaining > 0) {
        return Status::InvalidArgument("XLA collective '" + key +
                                       "' is already in flight: the same compiled step runs twice at once; "
                                       "run it from one thread at a time");
      }
      // Finished and never awaited: a failed execution abandoned it (see inflight.h).
      impl_->groups.erase(it);
    }
    impl_->groups.emplace(key, g);
    ++impl_->running;
  }
  for (size_t i = 0; i < group.size(); ++i) {
    Finish f = i < finish.size() ? std::move(finish[i]) : Finish();
    group[i].done = [impl = impl_, g, f = std::move(f)](const Status& st) { impl->Complete(g, f ? f(st) : st); };
  }
  Status st = Runtime::Global().EnqueueGroup(std::move(group));
  if (st.ok()) {
    if (g->timed) {  // under mu: the notifier may read the times as soon as the group is done
      std::lock_guard<std::mutex> lock(impl_->mu);
      g->times.submitted = Clock::now();
    }
  } else {  // the core took none of them: no `done` will run
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->groups.erase(key);
    if (--impl_->running == 0) impl_->idle.notify_all();
    impl_->CollectReadyLocked();  // failed groups waiting for running == 0
  }
  return st;
}

void InflightTable::Await(const std::string& key, Callback callback) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->groups.find(key);
  if (it == impl_->groups.end() || it->second->awaited) {
    impl_->ready.push_back(
        Ready{std::move(callback), Status::Internal("XLA collective '" + key + "' was not started (a tfring bug)"),
              false, Times{}});
    impl_->wake.notify_one();
    return;
  }
  it->second->awaited = true;
  if (it->second->timed) it->second->times.awaited = Clock::now();
  it->second->callback = std::move(callback);
  if (it->second->remaining == 0) impl_->CollectReadyLocked();
}

bool InflightTable::WaitUntilIdle(double timeout_s) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  return impl_->idle.wait_for(lock, std::chrono::duration<double>(timeout_s), [this] { return impl_->running == 0; });
}

int InflightTable::running() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->running;
}

}  // namespace tf_ops
}  // namespace tfring
