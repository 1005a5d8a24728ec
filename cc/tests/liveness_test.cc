// PeerLiveness over a real Communicator mesh (the job's heartbeat ring, and stars: any set of
// peers works; hostnames from the roster),
// and a Runtime job whose slow rank must not be taken for a lost one.
#include "transport/liveness.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "runtime_job.h"
#include "test_util.h"

namespace tfring {
namespace {

using testing_util::HasError;
using testing_util::MakeMesh;
using testing_util::Mesh;
using testing_util::MeshOptions;

// Records every on_lost call, per watching rank.
class Verdicts {
 public:
  PeerLiveness::LostCallback For(int watcher) {
    return [this, watcher](int rank, const Status& status) {
      std::lock_guard<std::mutex> lock(mu_);
      lost_[watcher].push_back({rank, status, std::chrono::steady_clock::now()});
      cv_.notify_all();
    };
  }
  // Waits up to `timeout_s` for `watcher` to declare a loss; false if it did not.
  bool Wait(int watcher, double timeout_s) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return !lost_[watcher].empty(); });
  }
  size_t Count(int watcher) {
    std::lock_guard<std::mutex> lock(mu_);
    return lost_[watcher].size();
  }
  int Rank(int watcher) {
    std::lock_guard<std::mutex> lock(mu_);
    return lost_[watcher].at(0).rank;
  }
  Status StatusOf(int watcher) {
    std::lock_guard<std::mutex> lock(mu_);
    return lost_[watcher].at(0).status;
  }
  std::chrono::steady_clock::time_point When(int watcher) {
    std::lock_guard<std::mutex> lock(mu_);
    return lost_[watcher].at(0).when;
  }

 private:
  struct Loss {
    int rank;
    Status status;
    std::chrono::steady_clock::time_point when;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int, std::vector<Loss>> lost_;
};

// The liveness of `rank` in `mesh` as a star: rank 0 watches everyone, the others rank 0.
std::unique_ptr<PeerLiveness> LivenessOf(Mesh& mesh, int rank, double timeout_s, Verdicts& verdicts) {
  std::vector<LivenessPeer> peers;
  for (int p = 0; p < mesh.size(); ++p) {
    if (p != rank && (rank == 0 || p == 0)) {
      peers.push_back(LivenessPeer{p, mesh[rank].hostname_of(p), &mesh[rank].heartbeat(p)});
    }
  }
  return std::make_unique<PeerLiveness>(rank, std::move(peers), timeout_s, verdicts.For(rank));
}

// The liveness of `rank` as a job runs it: watching its ring neighbours.
std::unique_ptr<PeerLiveness> RingLivenessOf(Mesh& mesh, int rank, double timeout_s, Verdicts& verdicts) {
  std::vector<LivenessPeer> peers;
  for (int p : Communicator::HeartbeatPeers(rank, mesh.size())) {
    peers.push_back(LivenessPeer{p, mesh[rank].hostname_of(p), &mesh[rank].heartbeat(p)});
  }
  return std::make_unique<PeerLiveness>(rank, std::move(peers), timeout_s, verdicts.For(rank));
}

Mesh MeshOf(int size) {
  Mesh mesh;
  MeshOptions o;
  o.size = size;
  Status st = MakeMesh(o, &mesh);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return mesh;
}

TEST(PeerLiveness, IntervalIsATenthOfTheTimeoutWithinBounds) {
  EXPECT_DOUBLE_EQ(PeerLiveness::IntervalFor(30), 1.0);
  EXPECT_DOUBLE_EQ(PeerLiveness::IntervalFor(3), 0.3);
  EXPECT_DOUBLE_EQ(PeerLiveness::IntervalFor(0.1), 0.05);
  EXPECT_DOUBLE_EQ(PeerLiveness::IntervalFor(0), 1.0);  // off: beats still answer peers
}

TEST(PeerLiveness, ASilentPeerIsLostNamingRankHostAndSilence) {
  Mesh mesh = MeshOf(2);
  Verdicts verdicts;
  auto start = std::chrono::steady_clock::now();
  auto watcher = LivenessOf(mesh, 0, 0.4, verdicts);  // rank 1 never beats: frozen
  watcher->Start();
  ASSERT_TRUE(verdicts.Wait(0, 5.0));
  const double after = std::chrono::duration<double>(verdicts.When(0) - start).count();
  EXPECT_GE(after, 0.4);
  EXPECT_LT(after, 2.0);
  EXPECT_EQ(verdicts.Rank(0), 1);
  EXPECT_TRUE(HasError(verdicts.StatusOf(0), ErrorCode::kPeerLost,
                       {"rank 1 (host host1) has not answered for", "TFRING_PEER_TIMEOUT_S=0.4", "frozen"}));
  watcher->Stop();
  EXPECT_EQ(verdicts.Count(0), 1u) << "a loss is declared once";
}

TEST(PeerLiveness, PeersThatBeatAreNeverLostWhateverTheirCodeDoes) {
  Mesh mesh = MeshOf(3);
  Verdicts verdicts;
  std::vector<std::unique_ptr<PeerLiveness>> all;
  for (int r = 0; r < 3; ++r) all.push_back(LivenessOf(mesh, r, 0.2, verdicts));
  for (auto& l : all) l->Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // 6x the timeout
  for (int r = 0; r < 3; ++r) EXPECT_EQ(verdicts.Count(r), 0u) << "rank " << r;
  for (auto& l : all) l->Stop();
}

TEST(PeerLiveness, AGoodbyeOrAClosedConnectionIsADepartureNotALoss) {
  Mesh mesh = MeshOf(3);
  Verdicts verdicts;
  auto root = LivenessOf(mesh, 0, 0.3, verdicts);
  auto leaver = LivenessOf(mesh, 1, 0.3, verdicts);
  root->Start();
  leaver->Start();
  mesh[2].heartbeat(0).Shutdown();  // rank 2 exits
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  leaver->Stop();                   // rank 1 ends in order: says goodbye
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_EQ(verdicts.Count(0), 0u);
  EXPECT_EQ(verdicts.Count(1), 0u);
  root->Stop();
}

TEST(PeerLiveness, RankZeroTellsTheOtherWorkersWhichRankItLost) {
  Mesh mesh = MeshOf(3);
  Verdicts verdicts;
  auto root = LivenessOf(mesh, 0, 0.4, verdicts);
  auto worker = LivenessOf(mesh, 1, 0.4, verdicts);  // rank 2 is frozen
  root->Start();
  worker->Start();
  ASSERT_TRUE(verdicts.Wait(0, 5.0));
  ASSERT_TRUE(verdicts.Wait(1, 5.0)) << "rank 1 watches only rank 0: it must be told";
  EXPECT_EQ(verdicts.Rank(0), 2);
  EXPECT_EQ(verdicts.Rank(1), 2);
  EXPECT_TRUE(HasError(verdicts.StatusOf(1), ErrorCode::kPeerLost,
                       {"rank 2 (host host2) was silent to rank 0 for", "TFRING_PEER_TIMEOUT_S=0.4"}));
  root->Stop();
  worker->Stop();
}

TEST(PeerLiveness, HeartbeatsFormARingOfTwoNeighboursPerRank) {
  EXPECT_EQ(Communicator::HeartbeatPeers(0, 1), std::vector<int>{});
  EXPECT_EQ(Communicator::HeartbeatPeers(0, 2), std::vector<int>{1});
  EXPECT_EQ(Communicator::HeartbeatPeers(1, 2), std::vector<int>{0});
  EXPECT_EQ(Communicator::HeartbeatPeers(0, 5), (std::vector<int>{1, 4}));
  EXPECT_EQ(Communicator::HeartbeatPeers(2, 5), (std::vector<int>{1, 3}));
  EXPECT_EQ(Communicator::HeartbeatPeers(999, 1000), (std::vector<int>{0, 998}));
}

// A frozen rank in a ring of 5 is named by every survivor, the two that do not watch it
// (0 and 4) through the verdict passed around the ring, within a beat of its watchers.
TEST(PeerLiveness, ARingPassesAVerdictToTheRanksThatDoNotWatchTheLostOne) {
  Mesh mesh = MeshOf(5);
  Verdicts verdicts;
  std::vector<std::unique_ptr<PeerLiveness>> alive;
  for (int r : {0, 1, 3, 4}) alive.push_back(RingLivenessOf(mesh, r, 0.4, verdicts));  // rank 2 is frozen
  for (auto& l : alive) l->Start();
  for (int r : {0, 1, 3, 4}) {
    ASSERT_TRUE(verdicts.Wait(r, 5.0)) << "rank " << r;
    EXPECT_EQ(verdicts.Rank(r), 2) << "rank " << r;
  }
  for (int r : {1, 3}) {  // its watchers: judged it, or heard the other watcher's verdict first
    const Status st = verdicts.StatusOf(r);
    EXPECT_TRUE(HasError(st, ErrorCode::kPeerLost, {"rank 2 (host host2) has not answered for"}) ||
                HasError(st, ErrorCode::kPeerLost, {"rank 2 (host host2) was silent to rank " + std::to_string(4 - r)}))
        << st.ToString();
  }
  for (int r : {0, 4}) {
    EXPECT_TRUE(HasError(verdicts.StatusOf(r), ErrorCode::kPeerLost, {"rank 2 (host host2) was silent to rank "}))
        << verdicts.StatusOf(r).ToString();
    const double after = std::chrono::duration<double>(verdicts.When(r) - std::min(verdicts.When(1), verdicts.When(3))).count();
    EXPECT_LT(after, 0.4) << "rank " << r << " heard of it " << after << " s after the first watcher";
  }
  for (auto& l : alive) l->Stop();
}

TEST(PeerLiveness, MatesOfNamesTheOtherRanksOnThePeersHost) {
  const std::vector<std::string> ids = {"a", "a", "b", "b", "b", "c"};
  EXPECT_EQ(PeerLiveness::MatesOf(2, ids), ", with rank 3, 4");
  EXPECT_EQ(PeerLiveness::MatesOf(5, ids), "");
  EXPECT_EQ(PeerLiveness::MatesOf(9, ids), "");
  std::vector<std::string> many(12, "h");
  EXPECT_EQ(PeerLiveness::MatesOf(0, many), ", with rank 1, 2, 3, 4, 5, 6, 7, 8 and 3 more");
}

// A lost host takes every rank on it: the verdict, judged or passed on, names the lost
// rank's host-mates (as the job fills LivenessPeer::mates from the host ids).
TEST(PeerLiveness, AVerdictNamesTheLostRanksHostMates) {
  Mesh mesh = MeshOf(5);
  const std::vector<std::string> ids = {"h0", "h1", "h2", "h2", "h4"};  // ranks 2 and 3 share a host
  Verdicts verdicts;
  std::vector<std::unique_ptr<PeerLiveness>> alive;
  for (int r : {0, 1, 3, 4}) {  // rank 2 is frozen
    std::vector<LivenessPeer> peers;
    for (int p : Communicator::HeartbeatPeers(r, mesh.size())) {
      peers.push_back(LivenessPeer{p, mesh[r].hostname_of(p), &mesh[r].heartbeat(p), PeerLiveness::MatesOf(p, ids)});
    }
    alive.push_back(std::make_unique<PeerLiveness>(r, std::move(peers), 0.4, verdicts.For(r)));
  }
  for (auto& l : alive) l->Start();
  for (int r : {0, 1, 3, 4}) {
    ASSERT_TRUE(verdicts.Wait(r, 5.0)) << "rank " << r;
    EXPECT_EQ(verdicts.Rank(r), 2) << "rank " << r;
    EXPECT_TRUE(HasError(verdicts.StatusOf(r), ErrorCode::kPeerLost, {"rank 2 (host host2, with rank 3) "}))
        << verdicts.StatusOf(r).ToString();
  }
  for (auto& l : alive) l->Stop();
}

TEST(PeerLiveness, WorkersNoticeAFrozenRankZero) {
  Mesh mesh = MeshOf(3);
  Verdicts verdicts;
  auto w1 = LivenessOf(mesh, 1, 0.3, verdicts);
  auto w2 = LivenessOf(mesh, 2, 0.3, verdicts);
  w1->Start();
  w2->Start();
  for (int r : {1, 2}) {
    ASSERT_TRUE(verdicts.Wait(r, 5.0)) << "rank " << r;
    EXPECT_EQ(verdicts.Rank(r), 0);
    EXPECT_TRUE(HasError(verdicts.StatusOf(r), ErrorCode::kPeerLost, {"rank 0 (host host0)"}));
  }
  w1->Stop();
  w2->Stop();
}

TEST(PeerLiveness, OffJudgesNobodyButStillBeats) {
  Mesh mesh = MeshOf(2);
  Verdicts verdicts;
  auto off = LivenessOf(mesh, 0, 0, verdicts);   // rank 0: TFRING_PEER_TIMEOUT_S=0
  auto on = LivenessOf(mesh, 1, 0.3, verdicts);  // rank 1 set differently: must not blame 0
  off->Start();
  on->Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(verdicts.Count(0), 0u);
  EXPECT_EQ(verdicts.Count(1), 0u);
  off->Stop();
  on->Stop();
}

// A rank whose user code is slow (3x the peer timeout) is not lost: its runtime answers.
TEST(RuntimeLiveness, ASlowRankIsNotALostRank) {
  testing_util::ThreadedJob job(2, {{"TFRING_PEER_TIMEOUT_S", "0.4"}});
  TFRING_ASSERT_OK(job.InitAll());
  auto early = testing_util::Submit(job[0], testing_util::Allreduce("slow", testing_util::FilledInput(job, 0, 4),
                                                                    job.Alloc<float>(4), 4));
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  auto late = testing_util::Submit(job[1], testing_util::Allreduce("slow", testing_util::FilledInput(job, 1, 4),
                                                                   job.Alloc<float>(4), 4));
  TFRING_EXPECT_OK(early.Wait(testing_util::kOpTimeoutS));
  TFRING_EXPECT_OK(late.Wait(testing_util::kOpTimeoutS));
  testing_util::ExpectAllreduceWorks(job, "after");
}

}  // namespace
}  // namespace tfring
