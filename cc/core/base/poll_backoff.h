// PollBackoff: how long a loop that polls for a completion it cannot block on (a CUDA event,
// NCCL's asynchronous state) waits between polls.
//
// It spins (the caller yields the CPU) for the first kSpin, where most GPU calls of a step
// finish; after that it sleeps a fixed fraction (1/kFraction) of the time already waited,
// clamped to [kMinSleep, kMaxSleep]. So a completion is seen at most about 1/32 of the wait
// late (at least kMinSleep, at most kMaxSleep), and a long wait costs about 32 wake-ups per
// e-fold of its length (~150 for 10 ms). A doubling ladder capped at 1 ms, its predecessor,
// sees a call that takes 1.4 ms at 2.36 ms (computed from its schedule).
//
// Pure functions: thread-safe.
#pragma once

#include <algorithm>
#include <chrono>

namespace tfring {

struct PollBackoff {
  static constexpr std::chrono::microseconds kSpin{100};
  static constexpr std::chrono::microseconds kMinSleep{10};
  static constexpr std::chrono::microseconds kMaxSleep{1000};
  static constexpr int kFraction = 32;

  // What to do after `waited` of waiting: zero = yield and poll again; otherwise sleep
  // that long before the next poll.
  static std::chrono::microseconds SleepAfter(std::chrono::microseconds waited) {
    if (waited < kSpin) return std::chrono::microseconds(0);
    return std::clamp(waited / kFraction, kMinSleep, kMaxSleep);
  }
};

}  // namespace tfring
