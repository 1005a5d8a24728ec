#include "control/request_relay.h"

#include <gtest/gtest.h>

namespace tfring {
namespace {

using Clock = std::chrono::steady_clock;

// Rank 1 of 7 with fanout 2: its children are 3 and 4 (leaves); its subtree {1, 3, 4}.
class RequestRelayTest : public ::testing::Test {
 protected:
  RequestRelayTest()
      : relay_(ControlTree(1, 7, 2), /*detail_after_s=*/1.0, [this](int32_t id) -> const std::string* {
          auto it = names_.find(id);
          return it == names_.end() ? nullptr : &it->second;
        }) {}

  static ControlMessage Bits(std::vector<int32_t> ids) {
    ControlMessage m;
    m.kind = ControlKind::kRequests;
    m.subtree_cached = std::move(ids);
    return m;
  }
  static Request Named(const std::string& name, OpType op = OpType::kAllreduce) {
    Request r;
    r.name = name;
    r.attrs.op = op;
    r.shape = {3};
    return r;
  }
  static std::vector<int32_t> RelayedCached(const ControlMessage& m, int rank) {
    for (const auto& from : m.relayed) {
      if (from.rank == rank) return from.cached;
    }
    return {};
  }

  std::map<int32_t, std::string> names_ = {{5, "t5"}, {6, "t6"}, {7, "t7"}};  // what the cache knows
  const Clock::time_point t0_ = Clock::now();
  RequestRelay relay_;
};

// A leaf's message held back by the pacer (parent_pacer.h) gathers several batches: an id
// submitted twice must not merge into one bit (rank 0 names the duplicate).
TEST(RequestRelayLeafTest, AnIdReportedTwiceInOneMessageGoesUpTwice) {
  RequestRelay leaf(ControlTree(3, 7, 2), 1.0, nullptr);
  const auto t0 = Clock::now();
  leaf.AddOwnCached(5, t0);
  leaf.AddOwnCached(6, t0);
  leaf.AddOwnCached(5, t0);
  ControlMessage m = leaf.TakeMessage();
  EXPECT_EQ(m.subtree_cached, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(m.cached_requests, (std::vector<int32_t>{5})) << "the second report, as this rank's own";
}

TEST_F(RequestRelayTest, ACacheIdGoesUpAsOneBitOnceTheWholeSubtreeHasIt) {
  relay_.AddOwnCached(5, t0_);
  relay_.AddOwnCached(6, t0_);
  ASSERT_TRUE(relay_.AddFromChild(3, Bits({5, 6}), t0_).ok());
  EXPECT_FALSE(relay_.HasMessage()) << "rank 4 has not submitted them yet";
  ASSERT_TRUE(relay_.AddFromChild(4, Bits({6}), t0_).ok());
  ASSERT_TRUE(relay_.HasMessage());
  ControlMessage m = relay_.TakeMessage();
  EXPECT_EQ(m.subtree_cached, (std::vector<int32_t>{6}));
  EXPECT_TRUE(m.cached_requests.empty());
  EXPECT_TRUE(m.relayed.empty()) << "nothing rank by rank";
  EXPECT_EQ(relay_.incomplete(), 1u);
  ASSERT_TRUE(relay_.AddFromChild(4, Bits({5}), t0_).ok());
  EXPECT_EQ(relay_.TakeMessage().subtree_cached, (std::vector<int32_t>{5}));
  EXPECT_EQ(relay_.incomplete(), 0u);
}

TEST_F(RequestRelayTest, RequestsInFullGoUpWithTheRankTheyCameFrom) {
  relay_.AddOwn(Named("own"));
  ControlMessage from3;
  from3.kind = ControlKind::kRequests;
  from3.requests.push_back(Named("new_on_3"));
  ASSERT_TRUE(relay_.AddFromChild(3, from3, t0_).ok());
  ControlMessage m = relay_.TakeMessage();
  ASSERT_EQ(m.requests.size(), 1u);
  EXPECT_EQ(m.requests[0].name, "own");
  ASSERT_EQ(m.relayed.size(), 1u);
  EXPECT_EQ(m.relayed[0].rank, 3);
  ASSERT_EQ(m.relayed[0].requests.size(), 1u);
  EXPECT_EQ(m.relayed[0].requests[0].name, "new_on_3");
  EXPECT_FALSE(relay_.HasMessage());
}

// A late rank: after detail_after_s rank 0 must learn who has submitted (the stall
// inspector names the missing ranks), and every later report goes rank by rank too.
TEST_F(RequestRelayTest, AnIdIncompleteTooLongIsReportedRankByRank) {
  relay_.AddOwnCached(5, t0_);
  ASSERT_TRUE(relay_.AddFromChild(3, Bits({5}), t0_).ok());
  EXPECT_EQ(relay_.MillisUntilAging(t0_), 1001);
  relay_.Age(t0_ + std::chrono::milliseconds(500));
  EXPECT_FALSE(relay_.HasMessage());
  relay_.Age(t0_ + std::chrono::milliseconds(1100));
  ControlMessage m = relay_.TakeMessage();
  EXPECT_EQ(m.cached_requests, (std::vector<int32_t>{5}));
  EXPECT_EQ(RelayedCached(m, 3), (std::vector<int32_t>{5}));
  EXPECT_TRUE(m.subtree_cached.empty());
  EXPECT_EQ(relay_.MillisUntilAging(t0_), -1) << "already rank by rank";
  ASSERT_TRUE(relay_.AddFromChild(4, Bits({5}), t0_).ok());
  m = relay_.TakeMessage();
  EXPECT_EQ(RelayedCached(m, 4), (std::vector<int32_t>{5}));
  EXPECT_TRUE(m.subtree_cached.empty()) << "ranks 1 and 3 were reported already";
  EXPECT_EQ(relay_.incomplete(), 0u);
}

// While a rank below has joined, tensors complete without it, which only rank 0 knows.
TEST_F(RequestRelayTest, AfterAJoinIdsGoRankByRankUntilTheJoinEnds) {
  relay_.AddOwnCached(5, t0_);
  ControlMessage join;
  join.kind = ControlKind::kRequests;
  join.requests.push_back(Named("join", OpType::kJoin));
  ASSERT_TRUE(relay_.AddFromChild(4, join, t0_).ok());
  ControlMessage m = relay_.TakeMessage();
  EXPECT_EQ(m.cached_requests, (std::vector<int32_t>{5})) << "the pending id is now reported as it stands";
  ASSERT_EQ(m.relayed.size(), 1u);
  EXPECT_EQ(m.relayed[0].requests[0].attrs.op, OpType::kJoin);
  ASSERT_TRUE(relay_.AddFromChild(3, Bits({5}), t0_).ok());
  EXPECT_EQ(RelayedCached(relay_.TakeMessage(), 3), (std::vector<int32_t>{5}));
  relay_.JoinEnded();
  relay_.AddOwnCached(7, t0_);
  ASSERT_TRUE(relay_.AddFromChild(3, Bits({7}), t0_).ok());
  ASSERT_TRUE(relay_.AddFromChild(4, Bits({7}), t0_).ok());
  m = relay_.TakeMessage();
  EXPECT_EQ(m.subtree_cached, (std::vector<int32_t>{7}));
  EXPECT_TRUE(m.cached_requests.empty());
}

// A rank whose request changed (another shape) sends it in full; the others' ids for that
// tensor can never complete here, and rank 0 must see who sent which to name the mismatch.
TEST_F(RequestRelayTest, AnIdWhoseTensorCameInFullGoesRankByRankAtOnce) {
  relay_.AddOwnCached(5, t0_);
  ControlMessage changed;
  changed.kind = ControlKind::kRequests;
  changed.requests.push_back(Named("t5"));
  ASSERT_TRUE(relay_.AddFromChild(3, changed, t0_).ok());
  ControlMessage m = relay_.TakeMessage();
  EXPECT_EQ(m.cached_requests, (std::vector<int32_t>{5})) << "no waiting for the stall limit";
  ASSERT_TRUE(relay_.AddFromChild(4, Bits({5}), t0_).ok());
  EXPECT_EQ(RelayedCached(relay_.TakeMessage(), 4), (std::vector<int32_t>{5}));
  relay_.Answered("t5");  // the mismatch's response passed down
  relay_.AddOwnCached(5, t0_);
  ASSERT_TRUE(relay_.AddFromChild(3, Bits({5}), t0_).ok());
  ASSERT_TRUE(relay_.AddFromChild(4, Bits({5}), t0_).ok());
  EXPECT_EQ(relay_.TakeMessage().subtree_cached, (std::vector<int32_t>{5})) << "combined again";
}

TEST_F(RequestRelayTest, ASecondReportWhileTheFirstIsPendingGoesUpForRankZeroToRefuse) {
  relay_.AddOwnCached(5, t0_);
  relay_.AddOwnCached(5, t0_);
  EXPECT_EQ(relay_.TakeMessage().cached_requests, (std::vector<int32_t>{5}));
  EXPECT_EQ(relay_.incomplete(), 1u);
}

TEST_F(RequestRelayTest, RanksOutsideTheSubtreeAreAProtocolError) {
  EXPECT_EQ(relay_.AddFromChild(2, Bits({1}), t0_).code(), ErrorCode::kInternal) << "not a child";
  ControlMessage m;
  m.kind = ControlKind::kRequests;
  m.relayed.resize(1);
  m.relayed[0].rank = 4;  // a sibling of 3, not below it
  m.relayed[0].cached = {1};
  EXPECT_EQ(relay_.AddFromChild(3, m, t0_).code(), ErrorCode::kInternal);
}

}  // namespace
}  // namespace tfring
