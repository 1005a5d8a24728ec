// Log levels per subsystem (TFRING_LOG_LEVEL = LEVEL[,SUBSYSTEM=LEVEL...]) and the line
// prefix (level, host, rank, pid, subsystem).
#include "base/logging.h"

#include <gtest/gtest.h>

#include <unistd.h>

namespace tfring {
namespace {

// Restores the process-wide log levels after each test.
class LoggingTest : public ::testing::Test {
 protected:
  void TearDown() override { SetLogSpec(LogSpec{}); }
};

TEST_F(LoggingTest, ParsesLevelAndSubsystemOverrides) {
  LogSpec spec;
  std::string error;
  ASSERT_TRUE(ParseLogSpec("error,transport=debug,stall=info", &spec, &error)) << error;
  EXPECT_EQ(spec.level, LogLevel::kError);
  ASSERT_EQ(spec.subsystems.size(), 2u);
  EXPECT_EQ(spec.subsystems[0], (std::pair<std::string, LogLevel>{"transport", LogLevel::kDebug}));
  EXPECT_EQ(spec.subsystems[1], (std::pair<std::string, LogLevel>{"stall", LogLevel::kInfo}));
  ASSERT_TRUE(ParseLogSpec("store=trace", &spec, &error)) << error;
  EXPECT_EQ(spec.level, LogLevel::kWarning);  // the default stays
  EXPECT_FALSE(ParseLogSpec("", &spec, &error));
  EXPECT_FALSE(ParseLogSpec("warning,", &spec, &error));
  EXPECT_FALSE(ParseLogSpec("warning,nccl", &spec, &error));
}

TEST_F(LoggingTest, LevelsReadWithoutCaseAndFatalIsError) {
  // Horovod scripts and launch lines say HOROVOD_LOG_LEVEL=WARNING / FATAL.
  LogSpec spec;
  std::string error;
  ASSERT_TRUE(ParseLogSpec("WARNING,transport=Debug", &spec, &error)) << error;
  EXPECT_EQ(spec.level, LogLevel::kWarning);
  EXPECT_EQ(spec.subsystems[0].second, LogLevel::kDebug);
  ASSERT_TRUE(ParseLogSpec("FATAL", &spec, &error)) << error;
  EXPECT_EQ(spec.level, LogLevel::kError);
  EXPECT_FALSE(ParseLogSpec("loud", &spec, &error));
}

TEST_F(LoggingTest, OverridesApplyToTheirSubsystemOnly) {
  LogSpec spec;
  std::string error;
  ASSERT_TRUE(ParseLogSpec("error,transport=debug", &spec, &error)) << error;
  SetLogSpec(spec);
  EXPECT_TRUE(LogEnabled(LogLevel::kDebug, "transport"));
  EXPECT_FALSE(LogEnabled(LogLevel::kTrace, "transport"));
  EXPECT_FALSE(LogEnabled(LogLevel::kWarning, "runtime"));
  EXPECT_TRUE(LogEnabled(LogLevel::kError, "runtime"));
  EXPECT_FALSE(LogEnabled(LogLevel::kInfo, "unlisted"));  // unknown names follow the default
  SetLogLevel(LogLevel::kTrace);  // the default moves, the override stays
  EXPECT_TRUE(LogEnabled(LogLevel::kTrace, "runtime"));
  EXPECT_FALSE(LogEnabled(LogLevel::kTrace, "transport"));
}

TEST_F(LoggingTest, LineCarriesLevelHostRankPidAndSubsystem) {
  SetLogSpec(LogSpec{});
  SetLogRank(3);
  ::testing::internal::CaptureStderr();
  TFRING_LOG(LogLevel::kWarning, "stall", "tensor 'x' waited " << 61 << " s");
  TFRING_LOG(LogLevel::kDebug, "stall", "hidden");
  std::string err = ::testing::internal::GetCapturedStderr();
  char host[64] = {0};
  gethostname(host, sizeof(host) - 1);
  EXPECT_EQ(err, std::string("[tfring WARNING ") + host + ":rank 3:pid " + std::to_string(getpid()) +
                     "] stall: tensor 'x' waited 61 s\n");
  SetLogRank(-1);
}

}  // namespace
}  // namespace tfring
