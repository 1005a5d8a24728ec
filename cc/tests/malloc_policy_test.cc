#include "base/malloc_policy.h"

#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "test_util.h"

namespace tfring {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizerAllocator = true;  // malloc is the sanitizer's: mallopt means nothing
#else
constexpr bool kSanitizerAllocator = false;
#endif

long MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_minflt;
}

// A training step's pattern on a thread of its own (a thread arena, as TF's compute
// threads have): a 16 MiB output allocated and written while the previous one is still
// held, then the previous one freed. Returns the minor faults of the steps after warm-up.
long FaultsOfSteps(int steps) {
  constexpr size_t kBytes = 16 << 20;
  long faults = 0;
  std::thread step_thread([&] {
    void* held = nullptr;
    long start = 0;
    for (int step = 0; step < steps + 2; ++step) {
      if (step == 2) start = MinorFaults();  // the first two buffers' pages are new
      void* out = std::malloc(kBytes);
      std::memset(out, step, kBytes);
      std::free(held);
      held = out;
    }
    faults = MinorFaults() - start;
    std::free(held);
  });
  step_thread.join();
  return faults;
}

TEST(MallocPolicyTest, FreedBuffersAreReusedWithoutFaultingTheirPagesIn) {
  if (kSanitizerAllocator) GTEST_SKIP() << "a sanitizer's allocator";
  if (std::getenv("GLIBC_TUNABLES") != nullptr) GTEST_SKIP() << "GLIBC_TUNABLES is set here";
  const MallocPolicyResult result = KeepFreedMemory(kKeepFreedTrimBytes, kKeepFreedMmapBytes);
  ASSERT_TRUE(result.applied) << result.reason;
  // glibc's defaults fault ~10% of each buffer's 4096 pages in again per step (the freed
  // top of the arena is trimmed); kept, none.
  EXPECT_LT(FaultsOfSteps(20), 4096 / 4);
}

TEST(MallocPolicyTest, AUsersOwnMallocSettingIsLeftAlone) {
  ASSERT_EQ(setenv("MALLOC_TRIM_THRESHOLD_", "131072", 1), 0);
  const MallocPolicyResult result = KeepFreedMemory(kKeepFreedTrimBytes, kKeepFreedMmapBytes);
  unsetenv("MALLOC_TRIM_THRESHOLD_");
  EXPECT_FALSE(result.applied);
  EXPECT_NE(result.reason.find("MALLOC_TRIM_THRESHOLD_"), std::string::npos) << result.reason;
}

}  // namespace
}  // namespace tfring
