// StallInspector: warnings and the shutdown limit over a real Coordinator.
#include "control/stall_inspector.h"

#include <gtest/gtest.h>

#include <thread>

#include "test_util.h"

namespace tfring {
namespace {

using namespace testing_util;

Request NamedRequest(const std::string& name) {
  Request r;
  r.name = name;
  r.shape = {4};
  return r;
}

TEST(StallInspectorTest, PastTheShutdownLimitItFailsNamingTheTensorAndTheMissingRank) {
  Coordinator coordinator(3, 0);
  coordinator.Add(0, NamedRequest("grad/w"));
  coordinator.Add(2, NamedRequest("grad/w"));
  StatsRecorder stats;
  StallInspector inspector(/*warning_s=*/0, /*shutdown_s=*/0.01, &stats);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  Status st = inspector.Inspect(coordinator);
  EXPECT_TRUE(HasError(st, ErrorCode::kTimeout, {"TFRING_STALL_SHUTDOWN_S", "grad/w", "missing from rank(s) 1"})) << Show(st);
  EXPECT_EQ(stats.Snapshot().stall_warnings, 0);  // warnings were off
}

TEST(StallInspectorTest, WarnsOncePerStalledTensorAndLooksAtMostOnceASecond) {
  Coordinator coordinator(2, 0);
  coordinator.Add(1, NamedRequest("a"));
  coordinator.Add(1, NamedRequest("b"));
  StatsRecorder stats;
  StallInspector inspector(/*warning_s=*/0.01, /*shutdown_s=*/0, &stats);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_TRUE(inspector.Inspect(coordinator).ok());
  EXPECT_EQ(stats.Snapshot().stall_warnings, 2);
  EXPECT_TRUE(inspector.Inspect(coordinator).ok());  // within the period: not looked at again
  std::this_thread::sleep_for(std::chrono::milliseconds(1050));
  EXPECT_TRUE(inspector.Inspect(coordinator).ok());
  EXPECT_EQ(stats.Snapshot().stall_warnings, 2);  // still stalled: no second warning
}

TEST(StallInspectorTest, BothLimitsOffNeverLooks) {
  Coordinator coordinator(2, 0);
  coordinator.Add(1, NamedRequest("a"));
  StatsRecorder stats;
  StallInspector inspector(0, 0, &stats);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(inspector.Inspect(coordinator).ok());
  EXPECT_EQ(stats.Snapshot().stall_warnings, 0);
}

}  // namespace
}  // namespace tfring
