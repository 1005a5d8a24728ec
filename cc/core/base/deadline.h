// Deadline: an absolute point in time on the monotonic clock. Every blocking call in the
// core takes one, so no wait is ever unbounded.
#pragma once

#include <chrono>
#include <limits>

namespace tfring {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  static Deadline After(double seconds) {
    Deadline d;
    d.when_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(seconds));
    return d;
  }
  static Deadline Never() {
    Deadline d;
    d.when_ = Clock::time_point::max();
    return d;
  }

  bool expired() const { return Clock::now() >= when_; }
  bool never() const { return when_ == Clock::time_point::max(); }

  // Milliseconds left, clamped to [0, cap_ms]; suitable for poll().
  int MillisLeft(int cap_ms) const {
    if (never()) return cap_ms;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(when_ - Clock::now()).count();
    if (left < 0) return 0;
    return left > cap_ms ? cap_ms : static_cast<int>(left);
  }
  double SecondsLeft() const {
    if (never()) return std::numeric_limits<double>::infinity();
    return std::chrono::duration<double>(when_ - Clock::now()).count();
  }
  Clock::time_point when() const { return when_; }

 private:
  Clock::time_point when_ = Clock::time_point::max();
};

}  // namespace tfring
