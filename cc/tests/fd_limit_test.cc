#include "base/fd_limit.h"

#include <sys/resource.h>

#include "test_util.h"

namespace tfring {
namespace {

using testing_util::HasError;

// Restores the soft limit the test lowered (the hard limit is never touched).
class SoftLimitGuard {
 public:
  SoftLimitGuard() { getrlimit(RLIMIT_NOFILE, &saved_); }
  ~SoftLimitGuard() { setrlimit(RLIMIT_NOFILE, &saved_); }
  const rlimit& saved() const { return saved_; }

 private:
  rlimit saved_{};
};

TEST(FdLimitTest, CountsOpenDescriptors) {
  const long before = OpenDescriptorCount();
  ASSERT_GT(before, 2);  // at least stdin, stdout, stderr
  FILE* f = tmpfile();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(OpenDescriptorCount(), before + 1);
  fclose(f);
  EXPECT_EQ(OpenDescriptorCount(), before);
}

TEST(FdLimitTest, RaisesALowSoftLimitAsFarAsNeeded) {
  SoftLimitGuard guard;
  if (guard.saved().rlim_max != RLIM_INFINITY && guard.saved().rlim_max < 4096) {
    GTEST_SKIP() << "hard limit below 4096 here";
  }
  rlimit low = guard.saved();
  low.rlim_cur = static_cast<rlim_t>(OpenDescriptorCount() + 300);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  long raised = 0;
  TFRING_ASSERT_OK(EnsureDescriptorLimit(2000, "a test job", &raised));
  rlimit now{};
  getrlimit(RLIMIT_NOFILE, &now);
  EXPECT_GE(static_cast<long>(now.rlim_cur), OpenDescriptorCount() + 2000);
  EXPECT_EQ(static_cast<long>(now.rlim_cur), raised);
  EXPECT_EQ(now.rlim_max, guard.saved().rlim_max);
  // Enough already: nothing changes.
  TFRING_ASSERT_OK(EnsureDescriptorLimit(10, "a test job", &raised));
  EXPECT_EQ(raised, 0);
}

TEST(FdLimitTest, AHardLimitTooLowFailsAtOnceNamingUlimit) {
  SoftLimitGuard guard;
  if (guard.saved().rlim_max == RLIM_INFINITY) GTEST_SKIP() << "no hard limit here";
  const long more = static_cast<long>(guard.saved().rlim_max) + 1;
  Status st = EnsureDescriptorLimit(more, "rank 0 of a job of 9999");
  EXPECT_TRUE(HasError(st, ErrorCode::kUnimplemented, {"rank 0 of a job of 9999", "ulimit -Hn", "hard limit"}));
}

}  // namespace
}  // namespace tfring
