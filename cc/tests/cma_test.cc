// Single-copy (Cross Memory Attach) sends between local ranks: process_vm_readv errors,
// the size threshold (segments just below, at and above it, world sizes 2..5), mixed
// settings across ranks, and TFRING_SHM_CMA=1 refusing a pair that cannot use it.
// Ranks are threads of one process here, so the probe reads this very process; the
// collectives suites (collectives_test.cc) run every algorithm with single-copy on too.
#include "transport/cma.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "collectives/collectives.h"
#include "collective_args_util.h"
#include "test_util.h"

namespace tfring {
namespace {

using testing_util::AllreduceArgs;
using testing_util::ExpectAllOk;
using testing_util::HasError;
using testing_util::MakeMesh;
using testing_util::Mesh;
using testing_util::MeshOptions;
using testing_util::RunRanks;

uint64_t Addr(const void* p) { return reinterpret_cast<uint64_t>(p); }

TEST(CmaReadTest, CopiesFromAProcessAndNamesFailures) {
  std::vector<char> src(100000), dst(100000, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 7);
  ASSERT_EQ(CmaRead(getpid(), Addr(src.data()), dst.data(), src.size()), 0);
  EXPECT_EQ(src, dst);
  EXPECT_EQ(CmaRead(getpid(), 16, dst.data(), 8), EFAULT);  // nothing mapped there
  // A range whose second half is unmapped: a short copy is EFAULT, not success.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  char* two = static_cast<char*>(mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE,
                                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(two, MAP_FAILED);
  munmap(two + page, page);
  EXPECT_EQ(CmaRead(getpid(), Addr(two + page - 8), dst.data(), 16), EFAULT);
  munmap(two, page);
  // A process that is gone.
  pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(CmaRead(child, Addr(src.data()), dst.data(), 8), ESRCH);
  EXPECT_NE(CmaErrorText(ESRCH).find("errno"), std::string::npos);
}

// Allreduce of float32 sums whose ring segments sit just below, at and just above the
// threshold: every segment goes single-copy exactly when it is at least the threshold.
TEST(CmaThresholdTest, SegmentsAroundTheThresholdForWorldSizes2To5) {
  constexpr size_t kThreshold = 64 << 10;  // bytes
  constexpr size_t kElems = kThreshold / sizeof(float);
  for (int n = 2; n <= 5; ++n) {
    Mesh mesh;
    MeshOptions o;
    o.size = n;
    o.shm = true;
    o.shm_ring_bytes = 1 << 15;
    o.cma = CmaMode::kOn;
    o.cma_min_bytes = kThreshold;
    TFRING_ASSERT_OK(MakeMesh(o, &mesh));
    for (int r = 0; r < n; ++r) ASSERT_EQ(mesh[r].cma_peers(), n - 1);
    struct Case {
      size_t count;
      int cma_segments;  // of the n segments, how many are >= the threshold
    };
    const Case cases[] = {{n * kElems - n, 0}, {n * kElems - 1, n - 1}, {n * kElems, n},
                          {n * kElems + 1, n}, {3 * n * kElems + 5, n}, {0, 0}, {7, 0}};
    for (const auto& k : cases) {
      auto segments = EvenSegments(k.count, n);
      int at_least = 0;
      for (const auto& seg : segments) at_least += seg.count * sizeof(float) >= kThreshold ? 1 : 0;
      ASSERT_EQ(at_least, k.cma_segments) << "test layout, count " << k.count;
      auto statuses = RunRanks(n, 60, [&](int r) -> Status {
        Communicator& comm = mesh[r];
        Link& left = comm.data(comm.left());
        const uint64_t cma0 = left.cma_bytes_received(), all0 = left.bytes_received();
        std::vector<float> buf(k.count);
        for (size_t i = 0; i < k.count; ++i) buf[i] = static_cast<float>((i * 13 + r) % 31);
        Status st = RingAllreduce(AllreduceArgs(comm, buf.data(), buf.data(), k.count, DataType::kFloat32,
            ReduceOp::kSum, 4096));
        if (!st.ok()) {
          comm.Abort();
          return st;
        }
        for (size_t i = 0; i < k.count; ++i) {
          float want = 0;
          for (int p = 0; p < n; ++p) want += static_cast<float>((i * 13 + p) % 31);
          if (buf[i] != want) return Status::Internal("element " + std::to_string(i) + " is wrong");
        }
        // What this rank received single-copy: the segments of at least the threshold it
        // got from its left neighbour (n-1 reduce-scatter + n-1 allgather steps).
        uint64_t want_cma = 0;
        for (int s = 0; s < n - 1; ++s) {
          for (int idx : {((r - s - 1) % n + n) % n, ((r - s) % n + n) % n}) {
            size_t bytes = segments[idx].count * sizeof(float);
            if (bytes >= kThreshold) want_cma += bytes;
          }
        }
        const uint64_t got_cma = left.cma_bytes_received() - cma0;
        if (got_cma != want_cma) {
          return Status::Internal("read " + std::to_string(got_cma) + " bytes single-copy, want " +
                                  std::to_string(want_cma) + " of " +
                                  std::to_string(left.bytes_received() - all0));
        }
        return Status::OK();
      });
      ExpectAllOk(statuses, "n=" + std::to_string(n) + " count=" + std::to_string(k.count));
    }
  }
}

// A rank with single-copy off next to ranks with it on auto: pairs involving it use the
// rings in both directions, the others single-copy; results are right either way.
class CmaModesTest : public ::testing::TestWithParam<bool> {};  // lazy data connections

TEST_P(CmaModesTest, MixedSettingsFallBackPerPair) {
  Mesh mesh;
  MeshOptions o;
  o.lazy_data = GetParam();  // lazily, each pair's probe comes with its first use (shm_pairing.h)
  o.size = 3;
  o.shm = true;
  o.cma_min_bytes = 1024;
  o.cma_per_rank = {CmaMode::kOff, CmaMode::kAuto, CmaMode::kAuto};
  TFRING_ASSERT_OK(MakeMesh(o, &mesh));
  EXPECT_EQ(mesh[0].cma_peers(), 0);
  EXPECT_EQ(mesh[1].cma_peers(), GetParam() ? 0 : 1);
  EXPECT_EQ(mesh[1].data(0).cma_pid(), 0);
  EXPECT_GT(mesh[1].data(2).cma_pid(), 0);
  EXPECT_EQ(mesh[1].data(0).cma_min_bytes(), SIZE_MAX);  // rank 0 does not read: no posts to it
  EXPECT_EQ(mesh[1].data(2).cma_min_bytes(), 1024u);
  auto statuses = RunRanks(3, 60, [&](int r) -> Status {
    std::vector<int64_t> buf(300001, r + 1);
    Status st = RingAllreduce(AllreduceArgs(mesh[r], buf.data(), buf.data(), buf.size(), DataType::kInt64,
        ReduceOp::kSum, 1 << 16));
    if (!st.ok()) mesh[r].Abort();
    for (int64_t v : buf) {
      if (st.ok() && v != 6) return Status::Internal("wrong sum");
    }
    return st;
  });
  ExpectAllOk(statuses, "mixed settings");
  EXPECT_GT(mesh[2].data(1).cma_bytes_received(), 0u);  // 1 -> 2 went single-copy
  EXPECT_EQ(mesh[1].data(0).cma_bytes_received(), 0u);
  EXPECT_EQ(mesh[0].shm_peers(), 2);  // rings with everyone, single-copy with no one
  EXPECT_EQ(mesh[0].cma_peers(), 0);
}

INSTANTIATE_TEST_SUITE_P(Connections, CmaModesTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "lazy" : "all"; });

TEST(CmaRequiredTest, RequiredButRefusedByThePeerFailsNamingTheSetting) {
  Mesh mesh;
  MeshOptions o;
  o.size = 2;
  o.shm = true;
  o.cma_per_rank = {CmaMode::kOff, CmaMode::kOn};  // rank 0 never publishes its pid
  Status st = MakeMesh(o, &mesh);
  EXPECT_TRUE(HasError(st, ErrorCode::kUnimplemented, {"TFRING_SHM_CMA=1", "rank 0"})) << st.ToString();
}

// Lazily the same pair fails its first transfer instead, on both ranks, with the message.
TEST(CmaRequiredTest, LazilyRequiredButRefusedFailsTheFirstTransferNamingTheSetting) {
  Mesh mesh;
  MeshOptions o;
  o.size = 2;
  o.shm = true;
  o.lazy_data = true;
  o.timeout_s = 20;
  o.cma_per_rank = {CmaMode::kOff, CmaMode::kOn};
  TFRING_ASSERT_OK(MakeMesh(o, &mesh));
  auto statuses = RunRanks(2, 60, [&](int r) -> Status {
    std::vector<float> buf(1 << 16, 1.0f);
    return RingAllreduce(AllreduceArgs(mesh[r], buf.data(), buf.data(), buf.size(), DataType::kFloat32,
                                       ReduceOp::kSum, 1 << 16));
  });  // no abort on failure: each rank fails on its own, its peer's park still answering
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(statuses[r].ok()) << "rank " << r;
    EXPECT_NE(statuses[r].message().find("TFRING_SHM_CMA=1 on rank 1 but rank 0 runs with single-copy reads off"),
              std::string::npos) << "rank " << r << ": " << statuses[r].ToString();
  }
  EXPECT_EQ(mesh[0].shm_peers() + mesh[1].shm_peers(), 0);
}

}  // namespace
}  // namespace tfring
