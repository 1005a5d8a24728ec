// Coordinator (rank 0's negotiation table): readiness, validation, fusion, stalls.
#include "control/coordinator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "test_util.h"

namespace tfring {
namespace {

using testing_util::NamesOf;

using Clock = Coordinator::Clock;

Request AllreduceRequest(const std::string& name, std::vector<int64_t> shape,
                  DataType dtype = DataType::kFloat32, ReduceOp op = ReduceOp::kSum) {
  Request r;
  r.name = name;
  r.attrs.op = OpType::kAllreduce;
  r.attrs.dtype = dtype;
  r.attrs.reduce_op = op;
  r.shape = std::move(shape);
  return r;
}

// Submits `r` from every rank (optionally altered per rank) and returns the ready list.
std::vector<Response> SubmitAll(Coordinator& c, int size, const Request& r,
                                const std::function<void(int, Request&)>& alter = nullptr) {
  for (int rank = 0; rank < size; ++rank) {
    Request mine = r;
    if (alter) alter(rank, mine);
    c.Add(rank, mine);
  }
  return c.TakeReady();
}

// The one error response for a request on which `rank` disagrees with the others.
Response MismatchOn(int size, int odd_rank, const Request& base,
                    const std::function<void(Request&)>& alter) {
  Coordinator c(size, 1 << 20);
  auto out = SubmitAll(c, size, base, [&](int rank, Request& r) {
    if (rank == odd_rank) alter(r);
  });
  EXPECT_EQ(out.size(), 1u);
  return out.empty() ? Response{} : out[0];
}

void ExpectMismatch(const Response& r, const std::vector<std::string>& parts) {
  EXPECT_EQ(r.kind, Response::Kind::kError);
  EXPECT_EQ(r.error_code, ErrorCode::kMismatch);
  for (const auto& p : parts) {
    EXPECT_NE(r.error_message.find(p), std::string::npos)
        << "message lacks '" << p << "': " << r.error_message;
  }
}

TEST(CoordinatorTest, ReadyOnlyWhenEveryRankSubmitted) {
  Coordinator c(3, 0);
  c.Add(2, AllreduceRequest("a", {4}));
  c.Add(0, AllreduceRequest("a", {4}));
  EXPECT_FALSE(c.HasReady());
  EXPECT_TRUE(c.HasPartial());
  EXPECT_TRUE(c.TakeReady().empty());
  c.Add(1, AllreduceRequest("a", {4}));
  EXPECT_TRUE(c.HasReady());
  EXPECT_FALSE(c.HasPartial());
  auto out = c.TakeReady();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Response::Kind::kCollective);
  EXPECT_EQ(NamesOf(out[0]), std::vector<std::string>{"a"});
  EXPECT_EQ(out[0].sizes, std::vector<int64_t>{16});  // bytes
  EXPECT_FALSE(c.HasReady());
  EXPECT_TRUE(c.TakeReady().empty());
}

TEST(CoordinatorTest, AnySubmissionOrderYieldsReadinessOrder) {
  std::mt19937 rng(5);
  for (int size : {1, 2, 3, 5, 8}) {
    for (int trial = 0; trial < 20; ++trial) {
      const int tensors = 12;
      std::vector<std::pair<int, int>> order;  // (rank, tensor)
      for (int r = 0; r < size; ++r)
        for (int t = 0; t < tensors; ++t) order.push_back({r, t});
      std::shuffle(order.begin(), order.end(), rng);
      Coordinator c(size, 0);
      std::vector<int> count(tensors, 0);
      std::vector<std::string> completed, taken;
      for (auto [rank, t] : order) {
        c.Add(rank, AllreduceRequest("t" + std::to_string(t), {t + 1}));
        if (++count[t] == size) completed.push_back("t" + std::to_string(t));
        if (rng() % 3 == 0) {  // rank 0 answers at arbitrary moments
          for (auto& r : c.TakeReady()) taken.push_back(r.tensors.at(0).name);
        }
      }
      for (auto& r : c.TakeReady()) taken.push_back(r.tensors.at(0).name);
      EXPECT_EQ(taken, completed) << "size " << size << " trial " << trial;
      EXPECT_FALSE(c.HasPartial());
    }
  }
}

TEST(CoordinatorTest, ResponseCarriesTheAgreedAttributes) {
  Coordinator c(2, 0);
  Request r = AllreduceRequest("g", {3, 5}, DataType::kBFloat16, ReduceOp::kAverage);
  r.attrs.prescale = 0.5;
  r.attrs.postscale = 4;
  auto out = SubmitAll(c, 2, r);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].attrs.op, OpType::kAllreduce);
  EXPECT_EQ(out[0].attrs.dtype, DataType::kBFloat16);
  EXPECT_EQ(out[0].attrs.reduce_op, ReduceOp::kAverage);
  EXPECT_EQ(out[0].attrs.prescale, 0.5);
  EXPECT_EQ(out[0].attrs.postscale, 4);
  EXPECT_EQ(out[0].sizes, std::vector<int64_t>{30});
}

// ---- validation -----------------------------------------------------------------

TEST(CoordinatorValidationTest, DtypeMismatchNamesTensorRanksAndValues) {
  Response r = MismatchOn(3, 2, AllreduceRequest("dense/bias", {4}),
                          [](Request& q) { q.attrs.dtype = DataType::kInt32; });
  ExpectMismatch(r, {"'dense/bias'", "dtype", "rank 0 has float32", "rank 2 has int32"});
  EXPECT_EQ(NamesOf(r), std::vector<std::string>{"dense/bias"});
}

TEST(CoordinatorValidationTest, ShapeMismatch) {
  ExpectMismatch(MismatchOn(4, 1, AllreduceRequest("w", {2, 3}), [](Request& q) { q.shape = {3, 2}; }),
                 {"'w'", "shape", "rank 0 has [2,3]", "rank 1 has [3,2]"});
  ExpectMismatch(MismatchOn(2, 1, AllreduceRequest("s", {}), [](Request& q) { q.shape = {1}; }),
                 {"'s'", "rank 0 has []", "rank 1 has [1]"});
}

TEST(CoordinatorValidationTest, OpMismatch) {
  ExpectMismatch(MismatchOn(3, 1, AllreduceRequest("x", {4}), [](Request& q) { q.attrs.op = OpType::kBroadcast; }),
                 {"'x'", "operation", "rank 0 has allreduce", "rank 1 has broadcast"});
}

TEST(CoordinatorValidationTest, RootMismatch) {
  Request b = AllreduceRequest("init/w", {8});
  b.attrs.op = OpType::kBroadcast;
  b.attrs.root = 0;
  ExpectMismatch(MismatchOn(3, 2, b, [](Request& q) { q.attrs.root = 1; }),
                 {"'init/w'", "root rank", "rank 0 has 0", "rank 2 has 1"});
}

TEST(CoordinatorValidationTest, ReduceOpScaleAndDeviceMismatch) {
  ExpectMismatch(MismatchOn(2, 1, AllreduceRequest("r", {4}), [](Request& q) { q.attrs.reduce_op = ReduceOp::kMax; }),
                 {"'r'", "reduce op", "rank 0 has Sum", "rank 1 has Max"});
  ExpectMismatch(MismatchOn(2, 1, AllreduceRequest("p", {4}), [](Request& q) { q.attrs.prescale = 2; }),
                 {"'p'", "prescale_factor", "rank 0 has 1", "rank 1 has 2"});
  ExpectMismatch(MismatchOn(2, 1, AllreduceRequest("q", {4}), [](Request& q) { q.attrs.postscale = 0.5; }),
                 {"'q'", "postscale_factor", "rank 1 has 0.5"});
  ExpectMismatch(MismatchOn(2, 1, AllreduceRequest("d", {4}), [](Request& q) { q.attrs.device = 0; }),
                 {"'d'", "device", "rank 0 has CPU", "rank 1 has GPU:0"});
  Request on_gpu = AllreduceRequest("e", {4});
  on_gpu.attrs.device = 1;
  ExpectMismatch(MismatchOn(3, 2, on_gpu, [](Request& q) { q.attrs.device = -1; }),
                 {"'e'", "device", "rank 0 has GPU:1", "rank 2 has CPU"});
}

TEST(CoordinatorValidationTest, RanksOnDifferentGpusAgreeWithRankZerosOrdinalAsTheLabel) {
  Coordinator c(3, 0);
  auto out = SubmitAll(c, 3, AllreduceRequest("g", {4}), [](int rank, Request& q) { q.attrs.device = rank; });
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Response::Kind::kCollective) << out[0].error_message;
  EXPECT_EQ(out[0].attrs.device, 0);
}

TEST(CoordinatorValidationTest, ReduceOpIgnoredWhereItDoesNotApply) {
  Request b = AllreduceRequest("b", {4});
  b.attrs.op = OpType::kBroadcast;
  Coordinator c(2, 0);
  auto out = SubmitAll(c, 2, b, [](int rank, Request& q) {
    q.attrs.reduce_op = rank ? ReduceOp::kMax : ReduceOp::kSum;
    q.attrs.prescale = rank ? 3 : 1;
  });
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Response::Kind::kCollective);
}

TEST(CoordinatorValidationTest, AllgatherFirstDimensionMayDiffer) {
  Request g = AllreduceRequest("ag", {2, 3});
  g.attrs.op = OpType::kAllgather;
  Coordinator c(3, 0);
  auto out = SubmitAll(c, 3, g, [](int rank, Request& q) { q.shape[0] = rank * 2; });
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Response::Kind::kCollective);
  EXPECT_EQ(out[0].sizes, (std::vector<int64_t>{0, 2, 4}));

  ExpectMismatch(MismatchOn(3, 1, g, [](Request& q) { q.shape = {2, 4}; }),
                 {"'ag'", "shape after the first dimension", "rank 0 has [3]", "rank 1 has [4]"});
  Request scalar = g;
  scalar.shape = {};
  Coordinator c2(2, 0);
  auto err = SubmitAll(c2, 2, scalar);
  ASSERT_EQ(err.size(), 1u);
  EXPECT_EQ(err[0].error_code, ErrorCode::kInvalidArgument);
  EXPECT_NE(err[0].error_message.find("'ag'"), std::string::npos) << err[0].error_message;
}

TEST(CoordinatorValidationTest, AlltoallSizesAreTheSplitMatrix) {
  Request a = AllreduceRequest("a2a", {0, 2});
  a.attrs.op = OpType::kAlltoall;
  Coordinator c(3, 0);
  auto out = SubmitAll(c, 3, a, [](int rank, Request& q) {
    q.splits = {rank, rank + 1, 0};
    q.shape[0] = 2 * rank + 1;
  });
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Response::Kind::kCollective);
  EXPECT_EQ(out[0].sizes, (std::vector<int64_t>{0, 1, 0, 1, 2, 0, 2, 3, 0}));
}

TEST(CoordinatorValidationTest, BarrierIgnoresShape) {
  Request b;
  b.name = "barrier";
  b.attrs.op = OpType::kBarrier;
  Coordinator c(2, 0);
  auto out = SubmitAll(c, 2, b, [](int rank, Request& q) { q.shape = {rank}; });
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Response::Kind::kCollective);
}

TEST(CoordinatorValidationTest, DuplicateInFlightNameIsAnInvalidArgument) {
  Coordinator c(3, 0);
  c.Add(1, AllreduceRequest("dup", {2}));
  c.Add(1, AllreduceRequest("dup", {2}));
  EXPECT_FALSE(c.HasReady());
  c.Add(0, AllreduceRequest("dup", {2}));
  c.Add(2, AllreduceRequest("dup", {2}));
  auto out = c.TakeReady();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Response::Kind::kError);
  EXPECT_EQ(out[0].error_code, ErrorCode::kInvalidArgument);
  for (const char* part : {"'dup'", "rank 1", "twice"}) {
    EXPECT_NE(out[0].error_message.find(part), std::string::npos) << out[0].error_message;
  }
  // Once answered, the name is free again.
  auto again = SubmitAll(c, 3, AllreduceRequest("dup", {2}));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].kind, Response::Kind::kCollective);
}

// ---- fusion ----------------------------------------------------------------------

std::vector<Response> ReadyAll(Coordinator& c, int size, const std::vector<Request>& reqs) {
  for (int rank = 0; rank < size; ++rank)
    for (const auto& r : reqs) c.Add(rank, r);
  return c.TakeReady();
}

TEST(CoordinatorTest, ReadyWaitIsPerRankAndSummedOverFusedTensors) {
  Coordinator c(3, 1 << 20);
  const auto t0 = Clock::now();
  auto at = [&](double s) { return t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); };
  c.Add(0, AllreduceRequest("a", {2}), at(0));
  c.Add(1, AllreduceRequest("a", {2}), at(1));
  c.Add(2, AllreduceRequest("a", {2}), at(3));  // rank 2 is the slowest: ready at 3 s
  c.Add(2, AllreduceRequest("b", {2}), at(3));
  c.Add(0, AllreduceRequest("b", {2}), at(4));
  c.Add(1, AllreduceRequest("b", {2}), at(4));  // rank 1 is the slowest for b: ready at 4 s
  auto out = c.TakeReady();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(NamesOf(out[0]), (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(out[0].ready_wait_s.size(), 3u);
  EXPECT_NEAR(out[0].ready_wait_s[0], 3.0 + 0.0, 1e-6);
  EXPECT_NEAR(out[0].ready_wait_s[1], 2.0 + 0.0, 1e-6);
  EXPECT_NEAR(out[0].ready_wait_s[2], 0.0 + 1.0, 1e-6);
}

TEST(CoordinatorFusionTest, FusesUpToTheThresholdExactly) {
  Coordinator c(2, 100);
  auto out = ReadyAll(c, 2, {AllreduceRequest("a", {10}), AllreduceRequest("b", {10}), AllreduceRequest("c", {5}),
                             AllreduceRequest("d", {1}), AllreduceRequest("e", {30})});
  // 40 + 40 + 20 = 100 bytes fit exactly; d (4 bytes) would exceed: it opens a new group,
  // which e (120 bytes) cannot join either.
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(NamesOf(out[0]), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(out[0].sizes, (std::vector<int64_t>{40, 40, 20}));
  EXPECT_EQ(NamesOf(out[1]), (std::vector<std::string>{"d"}));
  EXPECT_EQ(out[1].sizes, (std::vector<int64_t>{4}));
  EXPECT_EQ(NamesOf(out[2]), (std::vector<std::string>{"e"}));
  Coordinator c2(2, 100);
  auto big = ReadyAll(c2, 2, {AllreduceRequest("huge", {1000}), AllreduceRequest("small", {1})});
  ASSERT_EQ(big.size(), 2u);  // a tensor above the threshold travels alone
  EXPECT_EQ(NamesOf(big[0]), std::vector<std::string>{"huge"});
  EXPECT_EQ(NamesOf(big[1]), std::vector<std::string>{"small"});
}

TEST(CoordinatorFusionTest, NeverAcrossDtypeOpOrScale) {
  Request f1 = AllreduceRequest("f1", {2}), f2 = AllreduceRequest("f2", {2});
  Request i1 = AllreduceRequest("i1", {2}, DataType::kInt32), i2 = AllreduceRequest("i2", {2}, DataType::kInt32);
  Request m1 = AllreduceRequest("m1", {2}, DataType::kFloat32, ReduceOp::kMax);
  Request a1 = AllreduceRequest("a1", {2}, DataType::kFloat32, ReduceOp::kAverage);
  Request s1 = AllreduceRequest("s1", {2});
  s1.attrs.prescale = 2;
  Request s2 = AllreduceRequest("s2", {2});
  s2.attrs.postscale = 2;
  Request s3 = AllreduceRequest("s3", {2});
  s3.attrs.postscale = 2;
  Coordinator c(3, 1 << 20);
  auto out = ReadyAll(c, 3, {f1, i1, m1, a1, s1, s2, f2, i2, s3});
  std::vector<std::vector<std::string>> groups;
  for (const auto& r : out) groups.push_back(NamesOf(r));
  EXPECT_EQ(groups, (std::vector<std::vector<std::string>>{
                        {"f1", "f2"}, {"i1", "i2"}, {"m1"}, {"a1"}, {"s1"}, {"s2", "s3"}}));
  for (const auto& r : out) {
    for (const auto& n : NamesOf(r)) {
      Request want = n[0] == 'i' ? i1 : n[0] == 'm' ? m1 : n[0] == 'a' ? a1 : n == "s1" ? s1
                     : n[0] == 's' ? s2 : f1;
      EXPECT_EQ(r.attrs.dtype, want.attrs.dtype) << n;
      EXPECT_EQ(r.attrs.reduce_op, want.attrs.reduce_op) << n;
      EXPECT_EQ(r.attrs.prescale, want.attrs.prescale) << n;
      EXPECT_EQ(r.attrs.postscale, want.attrs.postscale) << n;
    }
  }
}

TEST(CoordinatorFusionTest, ScaleFactorsMustMatchExactlyNotAsPrinted) {
  // Both print as "0.1" at six digits; fused, one tensor would be scaled by the other's factor.
  Request a = AllreduceRequest("a", {2}), b = AllreduceRequest("b", {2}), c = AllreduceRequest("c", {2});
  a.attrs.prescale = 0.1;
  b.attrs.prescale = 0.1000000001;
  c.attrs.postscale = 1.0 + 1e-12;
  Coordinator coord(2, 1 << 20);
  auto out = ReadyAll(coord, 2, {a, b, c, AllreduceRequest("d", {2})});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].attrs.prescale, 0.1);
  EXPECT_EQ(out[1].attrs.prescale, 0.1000000001);
  EXPECT_EQ(out[2].attrs.postscale, 1.0 + 1e-12);
  EXPECT_EQ(NamesOf(out[3]), std::vector<std::string>{"d"});
}

TEST(CoordinatorFusionTest, AFullResponseLeavesLaterTensorsToANewOne) {
  // a and b fill 80 of 100 bytes; c (40) opens a new response; d (40) joins c's, not a's.
  Coordinator c(2, 100);
  auto out = ReadyAll(c, 2, {AllreduceRequest("a", {10}), AllreduceRequest("b", {10}), AllreduceRequest("c", {10}),
                             AllreduceRequest("d", {5})});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(NamesOf(out[0]), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(NamesOf(out[1]), (std::vector<std::string>{"c", "d"}));
}

TEST(CoordinatorFusionTest, OnlyCollectiveAllreducesFuse) {
  Request b1 = AllreduceRequest("b1", {2}), b2 = AllreduceRequest("b2", {2});
  b1.attrs.op = b2.attrs.op = OpType::kBroadcast;
  Request g1 = AllreduceRequest("g1", {2}), g2 = AllreduceRequest("g2", {2});
  g1.attrs.op = g2.attrs.op = OpType::kAllgather;
  Coordinator c(2, 1 << 20);
  auto out = ReadyAll(c, 2, {b1, b2, g1, g2, AllreduceRequest("x", {2}), AllreduceRequest("y", {2})});
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(NamesOf(out[4]), (std::vector<std::string>{"x", "y"}));

  // An error response is never a fusion target, and travels on its own.
  Coordinator c2(2, 1 << 20);
  c2.Add(0, AllreduceRequest("bad", {2}));
  c2.Add(1, AllreduceRequest("bad", {3}));
  for (int rank = 0; rank < 2; ++rank) c2.Add(rank, AllreduceRequest("ok", {2}));
  auto mixed = c2.TakeReady();
  ASSERT_EQ(mixed.size(), 2u);
  EXPECT_EQ(mixed[0].kind, Response::Kind::kError);
  EXPECT_EQ(NamesOf(mixed[0]), std::vector<std::string>{"bad"});
  EXPECT_EQ(NamesOf(mixed[1]), std::vector<std::string>{"ok"});
}

TEST(CoordinatorFusionTest, ThresholdZeroDisablesFusion) {
  Coordinator c(2, 0);
  auto out = ReadyAll(c, 2, {AllreduceRequest("a", {1}), AllreduceRequest("b", {1}), AllreduceRequest("c", {1})});
  ASSERT_EQ(out.size(), 3u);
  for (const auto& r : out) EXPECT_EQ(r.tensors.size(), 1u);
}

TEST(CoordinatorFusionTest, OnlyWithinOneTakeReadyBatch) {
  Coordinator c(2, 1 << 20);
  auto first = ReadyAll(c, 2, {AllreduceRequest("a", {1})});
  auto second = ReadyAll(c, 2, {AllreduceRequest("b", {1})});
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(NamesOf(second[0]), std::vector<std::string>{"b"});
}

// ---- stalls ----------------------------------------------------------------------

TEST(CoordinatorStallTest, ReportsWaitSubmittersAndMissingRanks) {
  Coordinator c(4, 0);
  auto t0 = Clock::now();
  c.Add(0, AllreduceRequest("slow", {1}), t0);
  c.Add(2, AllreduceRequest("slow", {1}), t0 + std::chrono::seconds(3));
  c.Add(3, AllreduceRequest("fresh", {1}), t0 + std::chrono::seconds(9));
  auto stalled = c.Stalled(5, t0 + std::chrono::seconds(10));
  ASSERT_EQ(stalled.size(), 1u);
  EXPECT_EQ(stalled[0].name, "slow");
  EXPECT_NEAR(stalled[0].waited_s, 10, 1e-6);  // since the first submission
  EXPECT_EQ(stalled[0].submitted_ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ(stalled[0].missing_ranks, (std::vector<int>{1, 3}));
  EXPECT_EQ(DescribeStall(stalled[0]),
            "'slow' waited 10 s: submitted by rank(s) 0, 2, missing from rank(s) 1, 3");
  EXPECT_EQ(c.Stalled(0.5, t0 + std::chrono::seconds(10)).size(), 2u);
  EXPECT_TRUE(c.Stalled(11, t0 + std::chrono::seconds(10)).empty());
  // Once the missing ranks arrive, nothing is stalled.
  c.Add(1, AllreduceRequest("slow", {1}));
  c.Add(3, AllreduceRequest("slow", {1}));
  auto left = c.Stalled(0, t0 + std::chrono::seconds(20));
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].name, "fresh");
  EXPECT_EQ(left[0].missing_ranks, (std::vector<int>{0, 1, 2}));
}

}  // namespace
}  // namespace tfring
