// PollBackoff (poll_backoff.h): a completion at any time T is seen at most ~T/32 late, and a
// long wait polls a bounded number of times.
#include "base/poll_backoff.h"

#include <gtest/gtest.h>

#include <chrono>

namespace tfring {
namespace {

using std::chrono::microseconds;

// When a loop that follows PollBackoff first polls at or after `done` (the loop polls at
// every microsecond of its spin phase), and how many sleeps it took.
struct Seen {
  microseconds at{0};
  int sleeps = 0;
};
Seen FirstPollAfter(microseconds done) {
  Seen s;
  while (s.at < done) {
    microseconds sleep = PollBackoff::SleepAfter(s.at);
    if (sleep == microseconds(0)) {
      s.at += microseconds(1);
    } else {
      s.at += sleep;
      ++s.sleeps;
    }
  }
  return s;
}

TEST(PollBackoff, SpinsFirstThenSleepsAFractionOfTheWaitWithinBounds) {
  EXPECT_EQ(PollBackoff::SleepAfter(microseconds(0)), microseconds(0));
  EXPECT_EQ(PollBackoff::SleepAfter(microseconds(99)), microseconds(0));
  EXPECT_EQ(PollBackoff::SleepAfter(microseconds(100)), PollBackoff::kMinSleep);
  EXPECT_EQ(PollBackoff::SleepAfter(microseconds(3200)), microseconds(100));
  EXPECT_EQ(PollBackoff::SleepAfter(std::chrono::seconds(60)), PollBackoff::kMaxSleep);
}

TEST(PollBackoff, ACompletionIsSeenAtMostAThirtySecondOfItsTimeLate) {
  for (int64_t us = 1; us <= 200000; us = us * 11 / 10 + 1) {
    const microseconds done(us);
    const Seen seen = FirstPollAfter(done);
    const microseconds late = seen.at - done;
    const microseconds bound = std::min(std::max(done / 32 + microseconds(1), PollBackoff::kMinSleep),
                                        PollBackoff::kMaxSleep);
    EXPECT_LE(late.count(), bound.count()) << "completion at " << us << " us";
  }
  // The doubling ladder this replaced (20 us doubling to 1 ms after the spin) saw a 1.4 ms
  // call at 2.36 ms.
  EXPECT_LE((FirstPollAfter(microseconds(1400)).at - microseconds(1400)).count(), 45);
}

TEST(PollBackoff, ALongWaitPollsABoundedNumberOfTimes) {
  EXPECT_LT(FirstPollAfter(microseconds(10000)).sleeps, 160);   // 10 ms
  EXPECT_LT(FirstPollAfter(std::chrono::seconds(30)).sleeps, 30300);  // the default op timeout: ~1 ms sleeps
}

}  // namespace
}  // namespace tfring
