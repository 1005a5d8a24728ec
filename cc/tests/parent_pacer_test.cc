#include "control/parent_pacer.h"

#include <gtest/gtest.h>

namespace tfring {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;

TEST(ParentPacerTest, SendsAtOnceWhileNothingIsUnanswered) {
  ParentPacer p(200e-6, 3200e-6);
  const auto t0 = Clock::now();
  EXPECT_TRUE(p.MaySend(t0));
  p.Sent(t0);
  EXPECT_FALSE(p.MaySend(t0 + microseconds(10))) << "the last message is unanswered: hold";
  p.Answered();
  EXPECT_TRUE(p.MaySend(t0 + microseconds(10))) << "answered: the next goes at once (a lone collective)";
  EXPECT_EQ(p.MicrosUntilSend(t0 + microseconds(10)), 0);
}

TEST(ParentPacerTest, AHoldEndsAndDoublesWhileUnansweredUpToTheMaximum) {
  ParentPacer p(200e-6, 700e-6);
  auto t = Clock::now();
  p.Sent(t);
  EXPECT_NEAR(p.MicrosUntilSend(t), 200, 2);
  EXPECT_FALSE(p.MaySend(t + microseconds(199)));
  t += microseconds(200);
  ASSERT_TRUE(p.MaySend(t)) << "a hold always ends: no deadlock when ranks wait for what the other holds";
  p.Sent(t);
  EXPECT_DOUBLE_EQ(p.hold_s(), 400e-6);
  t += microseconds(400);
  p.Sent(t);
  EXPECT_DOUBLE_EQ(p.hold_s(), 700e-6) << "capped";
  p.Answered();
  EXPECT_DOUBLE_EQ(p.hold_s(), 350e-6) << "an answer halves it";
  p.Answered();
  EXPECT_DOUBLE_EQ(p.hold_s(), 200e-6) << "not below the first hold";
  EXPECT_EQ(p.MicrosUntilSend(t), 0);
}

TEST(ParentPacerTest, AFirstHoldOfZeroTurnsPacingOff) {
  ParentPacer p(0, 3200e-6);
  const auto t0 = Clock::now();
  p.Sent(t0);
  EXPECT_FALSE(p.enabled());
  EXPECT_TRUE(p.MaySend(t0));
  p.Sent(t0);
  EXPECT_TRUE(p.MaySend(t0));
}

}  // namespace
}  // namespace tfring
