// SpinBudget: how long a waiting thread that yields between looks goes on before it sleeps.
//
// The budget is the thread's own spinning, not wall time: a yield that handed the CPU to
// another thread (the caller, or TF's executor, on the same core) is charged at most
// kYieldCharge. So the background thread keeps looking while the threads that will give
// it work run, and is awake when their submission comes (no eventfd write, no doorbell
// from a peer whose message finds it asleep), yet on an idle CPU, where a yield returns at
// once, it burns no more than `spin` before it sleeps. Measured, np=2 bound to a core
// each, 8-byte allreduce from a tf.function: the 50 us of a wall-clock spin ran out while
// Python prepared the next call (~100 us), so the thread slept before nearly every call;
// counting its own time only, it stays awake and the call costs ~15 us less.
// A wall-clock cap still ends the spin (a core kept busy by other threads for long: the
// thread then sleeps until woken, as before).
//
// Pure arithmetic on the times the caller reads: unit-tested directly. Not thread-safe
// (one waiting thread's).
#pragma once

#include <algorithm>
#include <chrono>

namespace tfring {

class SpinBudget {
 public:
  using Clock = std::chrono::steady_clock;
  // The most a yield is charged: about what one costs when no other thread wants the CPU
  // (a syscall; it returns at once).
  static constexpr Clock::duration kYieldCharge = std::chrono::microseconds(2);

  // `spin`: the thread's own spinning; `cap`: the wall time after which it stops anyway.
  SpinBudget(Clock::time_point start, Clock::duration spin, Clock::duration cap)
      : last_(start), end_(start + cap), left_(spin) {}

  // One turn of the spin: looking for work from the previous turn's end (or the start)
  // to `yield_start`, then yielding until `now`. True while the spin may go on.
  bool Continue(Clock::time_point yield_start, Clock::time_point now) {
    left_ -= (yield_start - last_) + std::min<Clock::duration>(now - yield_start, kYieldCharge);
    last_ = now;
    return left_ > Clock::duration::zero() && now < end_;
  }

 private:
  Clock::time_point last_;
  Clock::time_point end_;
  Clock::duration left_;
};

}  // namespace tfring
