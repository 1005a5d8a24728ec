// ControlChannel: the star around rank 0, over a real mesh of Communicators.
#include "control/control_channel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <optional>
#include <thread>

#include "test_util.h"

namespace tfring {
namespace {

using namespace testing_util;

ControlMessage Requests(const std::string& name) {
  ControlMessage m;
  m.kind = ControlKind::kRequests;
  Request r;
  r.name = name;
  r.shape = {2};
  m.requests.push_back(r);
  return m;
}

// Rank 0's and rank 1's channels over a 2-rank mesh with shared memory.
class ControlChannelShmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(MakeMesh(MeshOptions{.size = 2, .shm = true}, &mesh_).ok());
    root_.emplace(0, 2, &mesh_[0], 5, &stats_);
    worker_.emplace(1, 2, &mesh_[1], 5, &stats_);
  }
  ControlChannel& root() { return *root_; }
  ControlChannel& worker() { return *worker_; }

 private:
  Mesh mesh_;
  StatsRecorder stats_;
  std::optional<ControlChannel> root_, worker_;
};

TEST(ControlChannelTest, PeersAreTheControlTreeNeighbours) {
  Mesh mesh;
  ASSERT_TRUE(MakeMesh(MeshOptions{.size = 3}, &mesh).ok());
  StatsRecorder stats;
  EXPECT_EQ(ControlChannel(0, 3, &mesh[0], 5, &stats).peers(), (std::vector<int>{1, 2}));
  EXPECT_EQ(ControlChannel(2, 3, &mesh[2], 5, &stats).peers(), (std::vector<int>{0}));
  EXPECT_TRUE(ControlChannel(0, 1, nullptr, 5, &stats).peers().empty());
  Mesh chain;  // fanout 1: 0 - 1 - 2
  ASSERT_TRUE(MakeMesh(MeshOptions{.size = 3, .control_fanout = 1}, &chain).ok());
  EXPECT_EQ(ControlChannel(0, 3, &chain[0], 5, &stats).peers(), (std::vector<int>{1}));
  EXPECT_EQ(ControlChannel(1, 3, &chain[1], 5, &stats).peers(), (std::vector<int>{0, 2}));
  EXPECT_EQ(ControlChannel(2, 3, &chain[2], 5, &stats).peers(), (std::vector<int>{1}));
  EXPECT_FALSE(chain[0].control(2).valid()) << "no control connection between ranks that are not neighbours";
}

TEST(ControlChannelTest, RequestsGoUpAndResponsesReachEveryRankWithTheBytesCounted) {
  Mesh mesh;
  ASSERT_TRUE(MakeMesh(MeshOptions{.size = 3}, &mesh).ok());
  std::vector<StatsRecorder> stats(3);
  auto statuses = RunRanks(3, 20, [&](int r) -> Status {
    ControlChannel channel(r, 3, &mesh[r], 5, &stats[r]);
    if (r != 0) {
      TFRING_RETURN_IF_ERROR(channel.SendToParent(Requests("t" + std::to_string(r))));
      bool got = false;
      for (int i = 0; i < 200 && !got; ++i) {
        TFRING_RETURN_IF_ERROR(channel.Receive(50, [&](int from, ControlMessage& m) {
          if (from != 0 || m.kind != ControlKind::kResponses || m.responses.size() != 1) {
            return Status::Internal("unexpected message");
          }
          got = true;
          return Status::OK();
        }));
      }
      return got ? Status::OK() : Status::Timeout("no response");
    }
    std::set<std::string> seen;
    for (int i = 0; i < 200 && seen.size() < 2; ++i) {
      TFRING_RETURN_IF_ERROR(channel.Receive(50, [&](int from, ControlMessage& m) {
        if (m.requests.size() != 1 || m.requests[0].name != "t" + std::to_string(from)) {
          return Status::Internal("request from the wrong rank");
        }
        seen.insert(m.requests[0].name);
        return Status::OK();
      }));
    }
    if (seen.size() != 2) return Status::Timeout("requests missing");
    ControlMessage responses;
    responses.kind = ControlKind::kResponses;
    responses.responses.emplace_back();
    responses.responses[0].tensors = {{"t1"}};
    return channel.SendToChildren(responses);
  });
  ExpectAllOk(statuses, "control round");
  const RuntimeStats root = stats[0].Snapshot();
  EXPECT_EQ(root.control_messages_sent, 2);  // one message to each of two ranks
  EXPECT_EQ(root.control_bytes_sent % 2, 0);
  EXPECT_GT(root.control_bytes_sent, 0);
  EXPECT_EQ(stats[1].Snapshot().control_messages_sent, 1);
}

TEST(ControlChannelTest, AClosedConnectionIsPeerLostNamingTheRank) {
  Mesh mesh;
  ASSERT_TRUE(MakeMesh(MeshOptions{.size = 3}, &mesh).ok());
  StatsRecorder stats;
  ControlChannel root(0, 3, &mesh[0], 5, &stats);
  mesh[2].Abort();  // closes rank 2's connections
  Status st;
  for (int i = 0; i < 100 && st.ok(); ++i) {
    st = root.Receive(50, [](int, ControlMessage&) { return Status::OK(); });
  }
  EXPECT_TRUE(HasError(st, ErrorCode::kPeerLost, {"rank 2 is gone"})) << Show(st);
}

TEST(ControlChannelTest, ALostRankOnAnotherHostIsNamedWithTheHostAndItsOtherRanks) {
  // 2 emulated hosts x 2 ranks (host ids test-host-0, test-host-1; MakeMesh names rank r's
  // hostname "host<r>"): a host's failure takes all its ranks, so the error says which host
  // and which others (issue 32).
  Mesh mesh;
  ASSERT_TRUE(MakeMesh(MeshOptions{.size = 4, .ranks_per_host = 2}, &mesh).ok());
  EXPECT_EQ(mesh[0].DescribePeer(1), "rank 1");  // this host: nothing to tell apart
  EXPECT_EQ(mesh[0].DescribePeer(2), "rank 2 (host host2, with rank 3)");
  EXPECT_EQ(mesh[3].DescribePeer(0), "rank 0 (host host0, with rank 1)");
  StatsRecorder stats;
  ControlChannel root(0, 4, &mesh[0], 5, &stats);
  mesh[2].Abort();
  Status st;
  for (int i = 0; i < 100 && st.ok(); ++i) {
    st = root.Receive(50, [](int, ControlMessage&) { return Status::OK(); });
  }
  EXPECT_TRUE(HasError(st, ErrorCode::kPeerLost, {"rank 2 (host host2, with rank 3) is gone"})) << Show(st);
}

TEST(ControlChannelTest, AwaitAbortReturnsTheOriginAndWordsOfTheFailingRank) {
  Mesh mesh;
  ASSERT_TRUE(MakeMesh(MeshOptions{.size = 2}, &mesh).ok());
  StatsRecorder stats;
  ControlChannel root(0, 2, &mesh[0], 5, &stats);
  ControlChannel worker(1, 2, &mesh[1], 5, &stats);
  worker.Tell(AbortMessage(1, ErrorCode::kMismatch, "rank 1 failed: shapes differ"));
  ControlMessage got;
  int closed = -2;
  ASSERT_TRUE(root.AwaitAbort(2.0, &got, &closed));
  EXPECT_EQ(got.abort_origin, 1);
  EXPECT_EQ(got.abort_code, ErrorCode::kMismatch);
  EXPECT_EQ(got.abort_message, "rank 1 failed: shapes differ");
  EXPECT_EQ(closed, -1);
}

TEST(ControlChannelTest, AwaitAbortNamesAPeerThatClosedWithoutSayingWhy) {
  Mesh mesh;
  ASSERT_TRUE(MakeMesh(MeshOptions{.size = 2}, &mesh).ok());
  StatsRecorder stats;
  ControlChannel worker(1, 2, &mesh[1], 5, &stats);
  mesh[0].Abort();
  ControlMessage got;
  int closed = -2;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(worker.AwaitAbort(2.0, &got, &closed));
  EXPECT_EQ(closed, 0);
  EXPECT_LT(SecondsSince(start), 1.5);  // a closed peer ends the wait early
}

TEST(ControlChannelTest, GreetReturnsOnRankZeroOnceEveryRankSaidHello) {
  Mesh mesh;
  ASSERT_TRUE(MakeMesh(MeshOptions{.size = 3}, &mesh).ok());
  std::vector<StatsRecorder> stats(3);
  auto statuses = RunRanks(3, 20, [&](int r) -> Status {
    ControlChannel channel(r, 3, &mesh[r], 5, &stats[r]);
    if (r == 2) std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a late rank
    const auto start = std::chrono::steady_clock::now();
    TFRING_RETURN_IF_ERROR(channel.Greet(5));
    if (r == 0 && SecondsSince(start) < 0.15) return Status::Internal("rank 0 did not wait for rank 2");
    // The channel works normally afterwards: the hello was consumed.
    if (r == 1) return channel.SendToParent(Requests("after"));
    if (r == 0) {
      bool got = false;
      for (int i = 0; i < 100 && !got; ++i) {
        TFRING_RETURN_IF_ERROR(channel.Receive(50, [&](int from, ControlMessage& m) {
          got = from == 1 && m.kind == ControlKind::kRequests && m.requests.size() == 1;
          return got ? Status::OK() : Status::Internal("unexpected message");
        }));
      }
      if (!got) return Status::Timeout("no request after the greeting");
    }
    return Status::OK();
  });
  ExpectAllOk(statuses, "greet");
  EXPECT_EQ(stats[1].Snapshot().control_messages_sent, 1);  // the request; the hello is not counted
}

TEST(ControlChannelTest, GreetTimesOutNamingTheRanksThatNeverSaidHello) {
  Mesh mesh;
  ASSERT_TRUE(MakeMesh(MeshOptions{.size = 3}, &mesh).ok());
  StatsRecorder stats;
  ControlChannel root(0, 3, &mesh[0], 5, &stats);
  ControlChannel(1, 3, &mesh[1], 5, &stats).Greet(5);
  Status st = root.Greet(0.3);
  EXPECT_TRUE(HasError(st, ErrorCode::kTimeout, {"rank(s) 2 ", "TFRING_START_TIMEOUT_S"})) << Show(st);
}

// Between rank 0 and a rank on its host, messages that fit go through a shared-memory ring
// and larger ones through TCP; the receiver hands them out in send order either way. Rank 0
// starts reading only once everything was sent (no doorbells): it then finds a large
// message on TCP before the ring's earlier ones, and must hold it back.
TEST(ControlChannelTest, SharedMemoryAndTcpMessagesArriveInSendOrder) {
  Mesh mesh;
  ASSERT_TRUE(MakeMesh(MeshOptions{.size = 3, .shm = true}, &mesh).ok());
  ASSERT_NE(mesh[1].control_shm_tx(0), nullptr);
  EXPECT_EQ(mesh[1].control_shm_tx(2), nullptr) << "control rings join control-tree neighbours only";
  ControlMessage big = Requests("big");
  for (int i = 0; i < 4000; ++i) {  // ~400 KB encoded: more than a control ring holds
    big.requests.push_back(big.requests[0]);
    big.requests.back().name = "big." + std::to_string(i) + std::string(80, 'x');
  }
  std::vector<StatsRecorder> stats(3);
  std::vector<uint64_t> through_shm(3);
  std::atomic<int> senders_done{0};
  uint64_t reordered = 0;
  auto statuses = RunRanks(3, 30, [&](int r) -> Status {
    ControlChannel channel(r, 3, &mesh[r], 5, &stats[r]);
    if (r != 0) {
      for (const ControlMessage& m : {Requests("a"), big, Requests("b"), Requests("c"), big, Requests("d")}) {
        TFRING_RETURN_IF_ERROR(channel.SendToParent(m));
      }
      through_shm[r] = channel.shm_messages_sent();
      senders_done.fetch_add(1);
      return Status::OK();
    }
    while (senders_done.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::map<int, std::string> order;
    for (int i = 0; i < 400 && (order[1].size() < 6 || order[2].size() < 6); ++i) {
      TFRING_RETURN_IF_ERROR(channel.Receive(10, [&](int from, ControlMessage& m) {
        order[from] += m.requests.size() > 1 ? "B" : m.requests[0].name;
        return Status::OK();
      }));
    }
    reordered = channel.reordered();
    for (int from : {1, 2}) {
      if (order[from] != "aBbcBd") {
        return Status::Internal("rank " + std::to_string(from) + "'s messages arrived as " + order[from]);
      }
    }
    return Status::OK();
  });
  ExpectAllOk(statuses, "mixed paths");
  EXPECT_EQ(through_shm[1], 4u) << "the small messages took the ring";
  EXPECT_EQ(through_shm[2], 4u);
  EXPECT_GT(reordered, 0u) << "a large message arrived before the ring's earlier ones and was held back";
}

// An abort or shutdown notice (TCP, unordered) is handled at once, but after what its
// sender had already put in the ring: rank 0's last responses are not lost to its exit.
TEST_F(ControlChannelShmTest, AnAbortDoesNotOvertakeMessagesAlreadyInTheRing) {
  ControlChannel& root = this->root();
  ControlChannel& worker = this->worker();
  ASSERT_TRUE(worker.SendToParent(Requests("last")).ok());
  worker.Tell(AbortMessage(1, ErrorCode::kAborted, "rank 1 exited"));
  ASSERT_EQ(worker.shm_messages_sent(), 1u);
  std::string seen;
  for (int i = 0; i < 100 && seen.size() < 2; ++i) {
    ASSERT_TRUE(root.Receive(50, [&](int, ControlMessage& m) {
      seen += m.kind == ControlKind::kAbort ? "A" : "r";
      return Status::OK();
    }).ok());
  }
  EXPECT_EQ(seen, "rA");
}

// A reader asleep in poll() is woken by the doorbell a writer rings on TCP after it wrote
// the ring, so a message in shared memory never waits for the reader's timeout.
TEST_F(ControlChannelShmTest, AMessageInSharedMemoryWakesASleepingReader) {
  ControlChannel& root = this->root();
  ControlChannel& worker = this->worker();
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_TRUE(worker.SendToParent(Requests("late")).ok());
  });
  const auto start = std::chrono::steady_clock::now();
  int got = 0;
  Status st = root.Receive(10000, [&](int, ControlMessage& m) {
    got += m.requests.size() == 1 && m.requests[0].name == "late";
    return Status::OK();
  });
  late.join();
  EXPECT_TRUE(st.ok()) << Show(st);
  EXPECT_EQ(got, 1);
  EXPECT_LT(SecondsSince(start), 5.0) << "woken by the doorbell, not the 10 s timeout";
  EXPECT_EQ(worker.shm_messages_sent(), 1u);
}

TEST(ControlChannelTest, WithoutSharedMemoryControlEverythingTakesTcp) {
  Mesh mesh;
  ASSERT_TRUE(MakeMesh(MeshOptions{.size = 2, .shm = true, .shm_control = false}, &mesh).ok());
  EXPECT_EQ(mesh[1].control_shm_tx(0), nullptr);
  EXPECT_NE(mesh[1].data(0).tx(), nullptr) << "data still goes through shared memory";
  StatsRecorder stats;
  ControlChannel root(0, 2, &mesh[0], 5, &stats);
  ControlChannel worker(1, 2, &mesh[1], 5, &stats);
  ASSERT_TRUE(worker.SendToParent(Requests("tcp")).ok());
  int got = 0;
  for (int i = 0; i < 100 && got == 0; ++i) {
    ASSERT_TRUE(root.Receive(50, [&](int, ControlMessage&) { ++got; return Status::OK(); }).ok());
  }
  EXPECT_EQ(got, 1);
  EXPECT_EQ(worker.shm_messages_sent(), 0u);
}

}  // namespace
}  // namespace tfring
