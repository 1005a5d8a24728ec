// SpinBudget (spin_budget.h): the thread's own spinning is charged, time handed to other
// threads by a yield is not (beyond kYieldCharge), and the wall-clock cap ends it anyway.
#include "base/spin_budget.h"

#include <gtest/gtest.h>

namespace tfring {
namespace {

using Clock = SpinBudget::Clock;
using std::chrono::microseconds;

// Turns of `look` looking then a yield that returns after `away`, until the budget ends;
// the wall time it took.
microseconds SpinFor(microseconds spin, microseconds cap, microseconds look, microseconds away, int* turns) {
  const Clock::time_point start{};
  SpinBudget budget(start, spin, cap);
  Clock::time_point now = start;
  *turns = 0;
  bool more = true;
  while (more) {
    const Clock::time_point yield_start = now + look;
    now = yield_start + away;
    ++*turns;
    more = budget.Continue(yield_start, now);
  }
  return std::chrono::duration_cast<microseconds>(now - start);
}

TEST(SpinBudgetTest, AnIdleCpuSpendsTheWholeBudgetInWallTime) {
  int turns = 0;
  // 1 us looking, a yield that returns at once after 1 us: 2 us of its own per turn.
  EXPECT_EQ(SpinFor(microseconds(50), microseconds(1000), microseconds(1), microseconds(1), &turns).count(), 50);
  EXPECT_EQ(turns, 25);
}

TEST(SpinBudgetTest, YieldsThatRanOtherThreadsAreNotCharged) {
  int turns = 0;
  // Each yield ran another thread for 40 us: charged 2 us, so the spin lasts 17 turns
  // (3 us each) and ~700 us of wall time, where a wall-clock spin of 50 us ends after 2.
  const microseconds wall = SpinFor(microseconds(50), microseconds(1000), microseconds(1), microseconds(40), &turns);
  EXPECT_EQ(turns, 17);
  EXPECT_EQ(wall.count(), 17 * 41);
}

TEST(SpinBudgetTest, TheWallClockCapEndsASpinThatNeverRuns) {
  int turns = 0;
  // A core busy with other threads: the budget barely moves, the cap ends it.
  const microseconds wall = SpinFor(microseconds(50), microseconds(300), microseconds(0), microseconds(100), &turns);
  EXPECT_EQ(wall.count(), 300);
  EXPECT_EQ(turns, 3);
}

TEST(SpinBudgetTest, NoBudgetEndsAfterOneTurn) {
  int turns = 0;
  SpinFor(microseconds(0), microseconds(1000), microseconds(1), microseconds(1), &turns);
  EXPECT_EQ(turns, 1);
  SpinFor(microseconds(50), microseconds(0), microseconds(0), microseconds(0), &turns);
  EXPECT_EQ(turns, 1);
}

}  // namespace
}  // namespace tfring
