// ControlChannel: the star around rank 0, over a real mesh of Communicators.
#include "control_channel.h"

#include <gtest/gtest.h>

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

TEST(ControlChannelTest, PeersFormAStarAroundRankZero) {
  Mesh mesh;
  ASSERT_TRUE(MakeMesh(MeshOptions{.size = 3}, &mesh).ok());
  StatsRecorder stats;
  EXPECT_EQ(ControlChannel(0, 3, &mesh[0], 5, &stats).peers(), (std::vector<int>{1, 2}));
  EXPECT_EQ(ControlChannel(2, 3, &mesh[2], 5, &stats).peers(), (std::vector<int>{0}));
  EXPECT_TRUE(ControlChannel(0, 1, nullptr, 5, &stats).peers().empty());
}

TEST(ControlChannelTest, RequestsGoUpAndResponsesReachEveryRankWithTheBytesCounted) {
  Mesh mesh;
  ASSERT_TRUE(MakeMesh(MeshOptions{.size = 3}, &mesh).ok());
  std::vector<StatsRecorder> stats(3);
  auto statuses = RunRanks(3, 20, [&](int r) -> Status {
    ControlChannel channel(r, 3, &mesh[r], 5, &stats[r]);
    if (r != 0) {
      TFRING_RETURN_IF_ERROR(channel.Send(Requests("t" + std::to_string(r))));
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
    responses.responses[0].names = {"t1"};
    return channel.Send(responses);
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

TEST(ControlChannelTest, AwaitAbortReturnsTheOriginAndWordsOfTheFailingRank) {
  Mesh mesh;
  ASSERT_TRUE(MakeMesh(MeshOptions{.size = 2}, &mesh).ok());
  StatsRecorder stats;
  ControlChannel root(0, 2, &mesh[0], 5, &stats);
  ControlChannel worker(1, 2, &mesh[1], 5, &stats);
  ControlMessage abort;
  abort.kind = ControlKind::kAbort;
  abort.abort_origin = 1;
  abort.abort_code = ErrorCode::kMismatch;
  abort.abort_message = "rank 1 failed: shapes differ";
  worker.Tell(abort);
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
    if (r == 1) return channel.Send(Requests("after"));
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

}  // namespace
}  // namespace tfring
