// The slow-link rule (link_watch.h, FindSlowHost) on made-up link samples, and the per-peer
// link counters behind it (RuntimeStats::links) from a real job of ranks as threads.
#include "runtime/link_watch.h"

#include <gtest/gtest.h>

#include <sstream>
#include <tuple>

#include "rendezvous/memory_store.h"
#include "runtime_job.h"
#include "test_util.h"

namespace tfring {
namespace {

using testing_util::Allreduce;
using testing_util::Completion;
using testing_util::FilledInput;
using testing_util::kOpTimeoutS;
using testing_util::Submit;
using testing_util::ThreadedJob;

constexpr double kMiB = 1 << 20;

// 3 hosts x 2 ranks (h0: 0 1, h1: 2 3, h2: 4 5), the ring's links between hosts 1->2,
// 3->4, 5->0 at `rates` bytes/s (10 MiB each), the links within hosts far faster.
std::vector<LinkSample> Ring(double r12, double r34, double r50) {
  std::vector<LinkSample> s;
  const std::vector<std::tuple<int, int, double>> between = {{1, 2, r12}, {3, 4, r34}, {5, 0, r50}};
  for (auto [from, to, rate] : between) s.push_back({from, to, 10 * kMiB, 10 * kMiB / rate});
  for (int from : {0, 2, 4}) s.push_back({from, from + 1, 10 * kMiB, 0.001});
  return s;
}

const std::vector<std::string> kHosts = {"h0", "h0", "h1", "h1", "h2", "h2"};

TEST(FindSlowHost, NamesTheHostWhoseLinksAreATenthOfTheOthers) {
  // Host 2's link throttled to 1/10: both ring links touching it (3->4 in, 5->0 out) slow.
  SlowHost slow = FindSlowHost(Ring(100e6, 10e6, 11e6), kHosts, 4.0, kMiB);
  EXPECT_EQ(slow.host_id, "h2");
  EXPECT_EQ(slow.ranks, (std::vector<int>{4, 5}));
  EXPECT_NEAR(slow.rate, 10.5e6, 1e3);
  EXPECT_NEAR(slow.others_rate, 100e6, 1e3);
}

TEST(FindSlowHost, NamesNobodyWhenTheLinksAreAlikeOrTooFewOrTooSmall) {
  EXPECT_EQ(FindSlowHost(Ring(100e6, 90e6, 110e6), kHosts, 4.0, kMiB).host_id, "");
  EXPECT_EQ(FindSlowHost(Ring(100e6, 40e6, 40e6), kHosts, 4.0, kMiB).host_id, "") << "2.5x: within the factor";
  EXPECT_EQ(FindSlowHost(Ring(100e6, 10e6, 10e6), kHosts, 4.0, 11 * kMiB).host_id, "") << "below min_bytes";
  // Two hosts: every link between hosts touches both, there is nothing to compare with.
  std::vector<LinkSample> two = {{1, 2, 10 * kMiB, 1.0}, {3, 0, 10 * kMiB, 0.01}};
  EXPECT_EQ(FindSlowHost(two, {"a", "a", "b", "b"}, 4.0, kMiB).host_id, "");
  EXPECT_EQ(FindSlowHost({}, kHosts, 4.0, kMiB).host_id, "");
}

TEST(FindSlowHost, LinksWithinAHostAreNeverJudged) {
  // Shared memory within host 0 is 1000x the network: that does not make the others slow.
  std::vector<LinkSample> s = Ring(100e6, 100e6, 100e6);
  s.push_back({0, 1, 100 * kMiB, 0.001});
  EXPECT_EQ(FindSlowHost(s, kHosts, 4.0, kMiB).host_id, "");
}

TEST(FindSlowHost, NamesTheSlowestOfTwoSlowHosts) {
  const std::vector<std::string> hosts = {"a", "b", "c", "d"};
  // A ring a->b->c->d->a: c's links at 1/20, d's at 1/8 (c->d touches both).
  std::vector<LinkSample> s = {{0, 1, 10 * kMiB, 10 * kMiB / 100e6}, {1, 2, 10 * kMiB, 10 * kMiB / 5e6},
                               {2, 3, 10 * kMiB, 10 * kMiB / 5e6}, {3, 0, 10 * kMiB, 10 * kMiB / 12e6}};
  EXPECT_EQ(FindSlowHost(s, hosts, 4.0, kMiB).host_id, "c");
}

// Each rank counts, per peer, the bytes it sent and received and their flow time.
TEST(LinkStats, CountBytesPerPeerOfARing) {
  ThreadedJob job(3, {{"TFRING_SHM", "0"}, {"TFRING_RECURSIVE_DOUBLING_BYTES", "0"}});
  TFRING_ASSERT_OK(job.InitAll());
  constexpr int kCount = 3 << 20;  // 12 MiB: 3 segments of 4 MiB; 2 sent and 2 received per phase
  std::vector<Completion> done;
  for (int r = 0; r < 3; ++r) {
    done.push_back(Submit(job[r], Allreduce("big", FilledInput(job, r, kCount), job.Alloc<float>(kCount), kCount)));
  }
  for (auto& d : done) TFRING_ASSERT_OK(d.Wait(kOpTimeoutS));
  for (int r = 0; r < 3; ++r) {
    RuntimeStats s = job[r].stats();
    ASSERT_EQ(s.links.size(), 3u) << "rank " << r;
    const LinkStats& next = s.links[(r + 1) % 3];
    const LinkStats& prev = s.links[(r + 2) % 3];
    EXPECT_EQ(next.bytes_sent, 16 << 20) << "rank " << r;
    EXPECT_EQ(prev.bytes_received, 16 << 20) << "rank " << r;
    EXPECT_EQ(next.bytes_received + prev.bytes_sent, 0) << "rank " << r;
    EXPECT_GT(prev.recv_seconds, 0.0) << "4 MiB over TCP does not arrive in one read";
    EXPECT_LT(prev.recv_seconds, s.transfer_seconds + 1e-3) << "rank " << r;
    EXPECT_FALSE(prev.shared_memory);
    EXPECT_EQ(s.links[r].bytes_sent + s.links[r].bytes_received, 0);
    EXPECT_FALSE(prev.host.empty());
  }
}

// What a rank publishes grows with the peers on other hosts that sent it data (O(log n)
// with lazy connections), not with the job: 64 ranks on 8 hosts, none sent anything yet,
// so every value is the instance and the count alone (it was 2 numbers per rank of the job).
TEST(LinkWatchStore, APublishedReadingNamesOnlyPeersThatSentData) {
  auto store = std::make_shared<MemoryStore>();
  testing_util::MeshOptions o;
  o.size = 64;
  o.ranks_per_host = 8;
  o.lazy_data = true;
  o.store = store;
  testing_util::Mesh mesh;
  TFRING_ASSERT_OK(testing_util::MakeMesh(o, &mesh));
  StatsRecorder stats;
  MemoryStore watch_store;
  for (int r : {0, 9, 63}) {
    LinkWatch watch(r, 64, &watch_store, &mesh[r], &stats);
    watch.Tick(std::chrono::steady_clock::now() + std::chrono::seconds(10));
    std::string value;
    TFRING_ASSERT_OK(watch_store.Get("tfring_links/" + std::to_string(r), 0, &value));
    std::istringstream in(value);
    int fields = 0;
    for (std::string word; in >> word;) ++fields;
    EXPECT_EQ(fields, 2) << "rank " << r << ": '" << value << "'";
  }
  EXPECT_EQ(mesh[0].host_count(), 8);
}

}  // namespace
}  // namespace tfring
