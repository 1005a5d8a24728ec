// Join (hvd.join): the coordinator's rules and a job in which ranks run out of data at
// different times.
#include <gtest/gtest.h>

#include <thread>

#include "control/coordinator.h"
#include "runtime_job.h"
#include "test_util.h"

namespace tfring {
namespace {

using namespace testing_util;

Request Tensor(const std::string& name, OpType op = OpType::kAllreduce) {
  Request r;
  r.name = name;
  r.attrs.op = op;
  r.shape = {4};
  return r;
}

Request JoinRequest(const std::string& name = "join.0") {
  Request r;
  r.name = name;
  r.attrs.op = OpType::kJoin;
  r.attrs.dtype = DataType::kInt32;
  return r;
}

TEST(JoinCoordinatorTest, AJoinedRankNoLongerHoldsBackAllreduces) {
  Coordinator c(3, 1 << 20, /*cache_capacity=*/16);
  c.Add(0, Tensor("g"));
  c.Add(1, Tensor("g"));
  EXPECT_FALSE(c.HasReady());
  c.Add(2, JoinRequest());  // rank 2 is out of data: "g" is complete without it
  auto ready = c.TakeReady();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].kind, Response::Kind::kCollective) << ready[0].error_message;
  EXPECT_EQ(ready[0].tensors[0].name, "g");
  EXPECT_EQ(ready[0].sizes, (std::vector<int64_t>{16}));  // what the joined rank adds zeros for
  EXPECT_EQ(CacheIdsOf(ready[0]), std::vector<int32_t>{-1});  // names travel in full while a rank has joined
  EXPECT_EQ(ready[0].ready_wait_s[2], 0.0);
  c.Add(0, Tensor("h"));  // submitted after the join: complete with ranks 0 and 1
  EXPECT_FALSE(c.HasReady());
  c.Add(1, Tensor("h"));
  ASSERT_EQ(c.TakeReady().size(), 1u);
}

TEST(JoinCoordinatorTest, TheJoinCompletesWithTheLastRankToJoinAndTheJobIsWholeAgain) {
  Coordinator c(3, 0, 16);
  c.Add(1, JoinRequest());
  c.Add(0, JoinRequest());
  EXPECT_FALSE(c.HasReady());
  EXPECT_TRUE(c.Stalled(0).empty());  // waiting in a join is not a stall
  c.Add(2, JoinRequest());
  auto ready = c.TakeReady();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].attrs.op, OpType::kJoin);
  EXPECT_EQ(ready[0].attrs.root, 2);
  c.Add(0, Tensor("after"));
  c.Add(1, Tensor("after"));
  EXPECT_FALSE(c.HasReady());  // nobody has joined any more: rank 2 is needed again
  c.Add(2, Tensor("after"));
  EXPECT_EQ(c.TakeReady().size(), 1u);
}

TEST(JoinCoordinatorTest, OnlyAllreduceAndBarrierRunWhileRanksHaveJoined) {
  for (OpType op : {OpType::kAllgather, OpType::kBroadcast, OpType::kAlltoall, OpType::kReducescatter}) {
    Coordinator c(3, 0);
    c.Add(0, JoinRequest());
    Request r = Tensor("t", op);
    r.splits = {2, 1, 1};
    c.Add(1, r);
    c.Add(2, r);
    auto ready = c.TakeReady();
    ASSERT_EQ(ready.size(), 1u);
    EXPECT_EQ(ready[0].kind, Response::Kind::kError) << OpTypeName(op);
    EXPECT_EQ(ready[0].error_code, ErrorCode::kPrecondition);
    EXPECT_NE(ready[0].error_message.find("rank(s) 0 have joined"), std::string::npos) << ready[0].error_message;
  }
  Coordinator c(2, 0);
  c.Add(1, JoinRequest());
  c.Add(0, Tensor("b", OpType::kBarrier));
  auto ready = c.TakeReady();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].kind, Response::Kind::kCollective);
}

TEST(JoinCoordinatorTest, MismatchesAreReportedBetweenTheRanksThatSubmitted) {
  Coordinator c(3, 0);
  c.Add(0, JoinRequest());
  c.Add(1, Tensor("m"));
  Request other = Tensor("m");
  other.shape = {5};
  c.Add(2, other);
  auto ready = c.TakeReady();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].error_code, ErrorCode::kMismatch);
  EXPECT_NE(ready[0].error_message.find("rank 1 has [4], rank 2 has [5]"), std::string::npos)
      << ready[0].error_message;
}

Submission Join(const std::string& name, int32_t* out) {
  Submission s;
  s.request.name = name;
  s.request.attrs.op = OpType::kJoin;
  s.request.attrs.dtype = DataType::kInt32;
  s.output = out;
  return s;
}

class JoinJobTest : public ::testing::TestWithParam<JobSetup> {};

// Rank r has 3 - r batches: after its last one it joins, and the others go on with its
// zeros; every join returns the last rank to join (rank 0, which has the most data).
TEST_P(JoinJobTest, RanksWithFewerBatchesJoinAndTheOthersReduceWithoutThem) {
  ThreadedJob job(3, SetupOverrides(GetParam()));
  TFRING_ASSERT_OK(job.InitAll());
  const int64_t n = 6;
  std::vector<int32_t*> last(3);
  std::vector<std::vector<float*>> outs(3);
  auto statuses = RunRanks(3, 60, [&](int r) -> Status {
    for (int step = 0; step < 3 - r; ++step) {
      float* out = job.Alloc<float>(n);
      outs[r].push_back(out);
      Completion c = Submit(job[r], Allreduce("grad." + std::to_string(step), FilledInput(job, r, n), out, n));
      TFRING_RETURN_IF_ERROR(c.Wait(kOpTimeoutS));
      if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the slowest rank
    }
    last[r] = job.Alloc<int32_t>(1);
    *last[r] = -7;
    Completion joined = Submit(job[r], Join("join.0", last[r]));
    TFRING_RETURN_IF_ERROR(joined.Wait(kOpTimeoutS));
    // Whole again: everybody's data counts.
    float* after = job.Alloc<float>(n);
    outs[r].push_back(after);
    return Submit(job[r], Allreduce("after", FilledInput(job, r, n), after, n)).Wait(kOpTimeoutS);
  });
  ExpectAllOk(statuses, "uneven steps with join");
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(*last[r], 0) << "rank " << r;
    for (int step = 0; step < 3 - r; ++step) {
      for (int64_t i = 0; i < n; ++i) {
        float expected = 0;  // ranks still with data at this step: 0..(2 - step)
        for (int p = 0; p < 3 - step; ++p) expected += Input(p, i);
        ASSERT_EQ(outs[r][step][i], expected) << "rank " << r << " step " << step << " element " << i;
      }
    }
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(outs[r].back()[i], SumOfInputs(3, i));
  }
}

TEST_P(JoinJobTest, ABroadcastWhileARankHasJoinedFailsOnTheOthersAndTheJobGoesOn) {
  ThreadedJob job(2, SetupOverrides(GetParam()));
  TFRING_ASSERT_OK(job.InitAll());
  int32_t* last = job.Alloc<int32_t>(1);
  Completion joined = Submit(job[1], Join("join.0", last));
  float* data = job.Alloc<float>(4);
  Submission b;
  b.request.name = "weights";
  b.request.attrs.op = OpType::kBroadcast;
  b.request.attrs.dtype = DataType::kFloat32;
  b.request.shape = {4};
  b.input = data;
  b.output = data;
  Status st = Submit(job[0], std::move(b)).Wait(kOpTimeoutS);
  EXPECT_TRUE(HasError(st, ErrorCode::kPrecondition, {"'weights'", "broadcast", "rank(s) 1 have joined"}))
      << Show(st);
  int32_t* last0 = job.Alloc<int32_t>(1);
  TFRING_EXPECT_OK(Submit(job[0], Join("join.0", last0)).Wait(kOpTimeoutS));
  TFRING_EXPECT_OK(joined.Wait(kOpTimeoutS));
  EXPECT_EQ(*last, 0);
  EXPECT_EQ(*last0, 0);
  ExpectAllreduceWorks(job, "after");
}

INSTANTIATE_TEST_SUITE_P(Transports, JoinJobTest, JobSetups(), SetupName);

}  // namespace
}  // namespace tfring
