// ParentPacer: when a rank other than 0 may send its parent its next kRequests message.
//
// Nagle's rule, applied to negotiation: a message goes up at once when nothing this rank sent
// is still unanswered (no kResponses message came down from the parent since), so a lone
// collective pays nothing. While a message is unanswered, what this rank and its children
// submit meanwhile is held (the relay keeps combining it) and goes up as one message when
// the parent's next responses arrive, or when the hold ends: a response may never come
// without the held requests (ranks that submit in different orders each wait for what the
// other holds), so a hold always ends. The hold starts at TFRING_CONTROL_HOLD_US and
// doubles each time it ends without an answer (the parent is waiting for slower ranks, not
// for this one's requests: sending more often would only cost messages), up to
// TFRING_CONTROL_HOLD_MAX_US; each answer halves it again, down to the first hold. The
// extra latency is thus one first hold for requests the others wait for, and at most the
// time already spent waiting for the parent's answer otherwise.
// A first hold of 0 turns pacing off: every batch goes up at once.
// Pure logic, no I/O: unit-tested directly. Not thread-safe (the background thread's).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace tfring {

class ParentPacer {
 public:
  using Clock = std::chrono::steady_clock;

  ParentPacer(double hold_s, double max_hold_s)
      : first_hold_s_(std::max(0.0, hold_s)),
        max_hold_s_(std::max(first_hold_s_, max_hold_s)),
        hold_s_(first_hold_s_) {}

  bool enabled() const { return first_hold_s_ > 0; }
  // The autotuner's first hold (TFRING_CONTROL_HOLD_US, autotuner.h); the longest hold stays
  // at least as long. The current hold restarts from it.
  void SetFirstHold(double hold_s) {
    first_hold_s_ = std::max(0.0, hold_s);
    max_hold_s_ = std::max(first_hold_s_, max_hold_s_);
    hold_s_ = first_hold_s_;
  }
  // A message may go up now.
  bool MaySend(Clock::time_point now) const { return !unanswered_ || !enabled() || now >= HoldEnd(); }
  // A message went up at `now`. One sent while the last was still unanswered ended a hold
  // without an answer: the next hold is twice as long.
  void Sent(Clock::time_point now) {
    if (unanswered_) hold_s_ = std::min(max_hold_s_, hold_s_ * 2);
    unanswered_ = true;
    last_sent_ = now;
  }
  // Responses came down from the parent.
  void Answered() {
    unanswered_ = false;
    hold_s_ = std::max(first_hold_s_, hold_s_ / 2);
  }
  // Microseconds until MaySend turns true (0: now), -1 when nothing is held back.
  int64_t MicrosUntilSend(Clock::time_point now) const {
    if (MaySend(now)) return 0;
    return std::chrono::duration_cast<std::chrono::microseconds>(HoldEnd() - now).count() + 1;
  }
  bool unanswered() const { return unanswered_; }
  double hold_s() const { return hold_s_; }

 private:
  Clock::time_point HoldEnd() const {
    return last_sent_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(hold_s_));
  }

  double first_hold_s_;
  double max_hold_s_;
  double hold_s_;
  bool unanswered_ = false;
  Clock::time_point last_sent_{};
};

}  // namespace tfring
