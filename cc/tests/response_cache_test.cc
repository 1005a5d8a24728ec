// The response cache (response_cache.h): id assignment on rank 0, every rank's own
// requests, the Coordinator naming tensors by id and taking requests by id, and whole jobs
// of ranks as threads whose repeated steps negotiate by id while results, fusion and
// mismatch errors stay exactly as without the cache.
#include "control/response_cache.h"

#include <gtest/gtest.h>

#include "control/coordinator.h"
#include "runtime_job.h"

namespace tfring {
namespace {

using testing_util::CacheIdsOf;
using testing_util::Completion;
using testing_util::FilledInput;
using testing_util::kOpTimeoutS;
using testing_util::NamesOf;
using testing_util::NewCacheIdsOf;
using testing_util::SumOfInputs;
using testing_util::ThreadedJob;

Request Gradient(const std::string& name, int64_t n = 4) {
  Request r;
  r.name = name;
  r.attrs.op = OpType::kAllreduce;
  r.attrs.dtype = DataType::kFloat32;
  r.attrs.reduce_op = ReduceOp::kAverage;
  r.shape = {n};
  return r;
}

// ---- CacheAssigner / RequestCache --------------------------------------------------

TEST(CacheAssignerTest, SameRequestsKeepTheirIdChangedOnesGetANewOne) {
  CacheAssigner c(10);
  bool is_new = false;
  std::vector<Request> step(3, Gradient("w"));
  EXPECT_EQ(c.Assign("w", step, &is_new), 0);
  EXPECT_TRUE(is_new);
  EXPECT_EQ(c.Assign("w", step, &is_new), 0);
  EXPECT_FALSE(is_new);
  EXPECT_EQ(c.Assign("b", std::vector<Request>(3, Gradient("b")), &is_new), 1);
  std::vector<Request> reshaped(3, Gradient("w", 8));
  EXPECT_EQ(c.Assign("w", reshaped, &is_new), 2) << "new shape, new id; id 0 keeps its meaning";
  EXPECT_TRUE(is_new);
  ASSERT_NE(c.Expand(0, 2), nullptr);
  EXPECT_EQ(c.Expand(0, 2)->shape, std::vector<int64_t>{4});
  EXPECT_EQ(c.Expand(2, 2)->shape, std::vector<int64_t>{8});
  EXPECT_EQ(c.Expand(3, 0), nullptr);
  EXPECT_EQ(c.Expand(-1, 0), nullptr);
  EXPECT_EQ(c.Expand(0, 3), nullptr) << "rank out of range";
}

TEST(CacheAssignerTest, KeepsEachRanksOwnRequest) {
  // Broadcast ignores reduce_op, so ranks may legitimately differ on it: rank 0 must hand
  // each rank's id back as that rank's request, not its own.
  CacheAssigner c(10);
  std::vector<Request> by_rank(2, Gradient("bcast"));
  by_rank[1].attrs.reduce_op = ReduceOp::kMax;
  bool is_new;
  ASSERT_EQ(c.Assign("bcast", by_rank, &is_new), 0);
  EXPECT_EQ(c.Expand(0, 0)->attrs.reduce_op, ReduceOp::kAverage);
  EXPECT_EQ(c.Expand(0, 1)->attrs.reduce_op, ReduceOp::kMax);
}

TEST(CacheAssignerTest, FullCacheAssignsNothingNewButKeepsOldIds) {
  CacheAssigner c(2);
  bool is_new;
  EXPECT_EQ(c.Assign("a", {Gradient("a")}, &is_new), 0);
  EXPECT_EQ(c.Assign("b", {Gradient("b")}, &is_new), 1);
  EXPECT_EQ(c.Assign("c", {Gradient("c")}, &is_new), -1);
  EXPECT_FALSE(is_new);
  EXPECT_EQ(c.Assign("a", {Gradient("a")}, &is_new), 0);
  CacheAssigner off(0);
  EXPECT_EQ(off.Assign("a", {Gradient("a")}, &is_new), -1);
}

TEST(RequestCacheTest, LookupNeedsEveryFieldEqual) {
  RequestCache c;
  EXPECT_EQ(c.Lookup(Gradient("w")), -1);
  TFRING_ASSERT_OK(c.Remember(5, Gradient("w")));
  EXPECT_EQ(c.Lookup(Gradient("w")), 5);
  EXPECT_EQ(*c.NameOf(5), "w");
  EXPECT_EQ(c.NameOf(4), nullptr) << "a gap: id 4 was never announced to this rank";
  EXPECT_EQ(c.NameOf(6), nullptr);
  Request other = Gradient("w");
  other.attrs.prescale = 0.5;
  EXPECT_EQ(c.Lookup(other), -1);
  other = Gradient("w");
  other.attrs.device = 0;
  EXPECT_EQ(c.Lookup(other), -1);
  other = Gradient("w", 5);
  EXPECT_EQ(c.Lookup(other), -1);
  TFRING_ASSERT_OK(c.Remember(9, other));
  EXPECT_EQ(c.Lookup(other), 9) << "the newest id of a name wins";
  EXPECT_EQ(c.Lookup(Gradient("w")), -1);
  EXPECT_EQ(*c.NameOf(5), "w") << "old ids keep their meaning";
}

TEST(RequestCacheTest, AnIdAnnouncedForAnotherTensorIsAProtocolError) {
  RequestCache c;
  TFRING_ASSERT_OK(c.Remember(0, Gradient("a")));
  TFRING_EXPECT_OK(c.Remember(0, Gradient("a")));
  EXPECT_TRUE(testing_util::HasError(c.Remember(0, Gradient("b")), ErrorCode::kInternal, {"cache id 0", "'a'"}));
}

// ---- Coordinator with a cache -----------------------------------------------------

TEST(CoordinatorCacheTest, ResponsesAnnounceThenReuseIds) {
  Coordinator c(2, 1 << 20, 16);
  for (int rank = 0; rank < 2; ++rank) c.Add(rank, Gradient("w"));
  auto out = c.TakeReady();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(CacheIdsOf(out[0]), std::vector<int32_t>{0});
  EXPECT_EQ(NewCacheIdsOf(out[0]), std::vector<bool>{true});

  c.Add(0, Gradient("w"));
  TFRING_ASSERT_OK(c.AddCached(1, 0));
  out = c.TakeReady();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Response::Kind::kCollective);
  EXPECT_EQ(NamesOf(out[0]), std::vector<std::string>{"w"});
  EXPECT_EQ(CacheIdsOf(out[0]), std::vector<int32_t>{0});
  EXPECT_EQ(NewCacheIdsOf(out[0]), std::vector<bool>{false});
}

TEST(CoordinatorCacheTest, MismatchIsStillDetectedAgainstACachedRequest) {
  Coordinator c(2, 1 << 20, 16);
  for (int rank = 0; rank < 2; ++rank) c.Add(rank, Gradient("w"));
  c.TakeReady();
  TFRING_ASSERT_OK(c.AddCached(1, 0));  // rank 1: same as before
  c.Add(0, Gradient("w", 6));            // rank 0 changed the shape
  auto out = c.TakeReady();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Response::Kind::kError);
  EXPECT_NE(out[0].error_message.find("rank 0 has [6], rank 1 has [4]"), std::string::npos) << out[0].error_message;
  EXPECT_EQ(CacheIdsOf(out[0]), std::vector<int32_t>{-1}) << "errors get no id";
}

TEST(CoordinatorCacheTest, UnknownIdIsAnInternalError) {
  Coordinator c(2, 0, 16);
  EXPECT_TRUE(testing_util::HasError(c.AddCached(1, 3), ErrorCode::kInternal, {"rank 1", "cache id 3"}));
}

TEST(CoordinatorCacheTest, FusionCarriesEveryTensorsId) {
  Coordinator c(2, 1 << 20, 16);
  for (const char* name : {"a", "b", "c"}) {
    for (int rank = 0; rank < 2; ++rank) c.Add(rank, Gradient(name));
  }
  auto out = c.TakeReady();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(NamesOf(out[0]), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(CacheIdsOf(out[0]), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(NewCacheIdsOf(out[0]), (std::vector<bool>{true, true, true}));
}

// ---- whole jobs ------------------------------------------------------------------------

// Runs `steps` steps of `tensors` float32 allreduces on every rank and checks every result.
void RunSteps(ThreadedJob& job, int steps, int tensors, int64_t n = 16) {
  for (int step = 0; step < steps; ++step) {
    std::vector<Completion> done;
    std::vector<std::pair<float*, int>> outs;
    for (int r = 0; r < job.size(); ++r) {
      for (int t = 0; t < tensors; ++t) {
        float* out = job.Alloc<float>(n);
        // Ranks submit in different orders, as backprop on different ranks may.
        const int k = r % 2 ? tensors - 1 - t : t;
        done.push_back(testing_util::Submit(
            job[r], testing_util::Allreduce("grad_" + std::to_string(k), FilledInput(job, r, n), out, n)));
        outs.push_back({out, r});
      }
    }
    for (auto& d : done) TFRING_ASSERT_OK(d.Wait(kOpTimeoutS));
    for (auto& [out, r] : outs) {
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], SumOfInputs(job.size(), i)) << "rank " << r << " step " << step;
    }
  }
}

// A world size, and the control tree's fanout (0: the star; 1: a chain; 2 at 5 ranks: rank
// 1 combines the ids of two children).
struct CachedSetup {
  int size;
  int fanout;
};
class CachedJobTest : public ::testing::TestWithParam<CachedSetup> {
 protected:
  int Size() const { return GetParam().size; }
  std::map<std::string, std::string> Settings(std::map<std::string, std::string> extra = {}) const {
    extra["TFRING_CONTROL_FANOUT"] = std::to_string(GetParam().fanout);
    return extra;
  }
};

TEST_P(CachedJobTest, SteadyStepsNegotiateByIdWithCorrectResults) {
  constexpr int kTensors = 20, kSteps = 6;
  ThreadedJob job(Size(), Settings());
  TFRING_ASSERT_OK(job.InitAll());
  RunSteps(job, 1, kTensors);
  std::vector<RuntimeStats> first;
  for (int r = 0; r < job.size(); ++r) first.push_back(job[r].stats());
  for (int r = 0; r < job.size(); ++r) EXPECT_EQ(first[r].cached_tensors, 0) << "the first step announces the ids";
  RunSteps(job, kSteps - 1, kTensors);
  for (int r = 0; r < job.size(); ++r) {
    RuntimeStats s = job[r].stats();
    EXPECT_EQ(s.cached_tensors, (kSteps - 1) * kTensors) << "rank " << r;
    if (r > 0) {
      // Request bytes per tensor to rank 0, without the envelope of each message: how many
      // messages a step takes depends on how the background thread's cycles split the
      // submissions, which timing decides (CI once saw 20 one-id messages in one step).
      const double envelope = static_cast<double>(EncodeControl(ControlMessage{ControlKind::kRequests}).size());
      auto per_tensor = [&](int64_t bytes, int64_t messages, int tensors) {
        return (static_cast<double>(bytes) - envelope * static_cast<double>(messages)) / tensors;
      };
      const double full = per_tensor(first[r].control_bytes_sent, first[r].control_messages_sent, kTensors);
      const double cached = per_tensor(s.control_bytes_sent - first[r].control_bytes_sent,
                                       s.control_messages_sent - first[r].control_messages_sent,
                                       (kSteps - 1) * kTensors);
      EXPECT_LT(cached, full / 4) << "rank " << r << ": " << full << " B per request in full, " << cached
                                  << " B per cached request";
    }
  }
}

TEST_P(CachedJobTest, CapacityZeroTurnsTheCacheOff) {
  ThreadedJob job(Size(), Settings({{"TFRING_CACHE_CAPACITY", "0"}}));
  TFRING_ASSERT_OK(job.InitAll());
  RunSteps(job, 3, 5);
  for (int r = 0; r < job.size(); ++r) EXPECT_EQ(job[r].stats().cached_tensors, 0) << "rank " << r;
}

TEST_P(CachedJobTest, SmallCapacityCachesTheFirstTensorsOnly) {
  ThreadedJob job(Size(), Settings({{"TFRING_CACHE_CAPACITY", "3"}}));
  TFRING_ASSERT_OK(job.InitAll());
  RunSteps(job, 4, 8);
  // Which 3 of the 8 get ids depends on readiness order; 3 per later step are cached.
  for (int r = 0; r < job.size(); ++r) EXPECT_EQ(job[r].stats().cached_tensors, 3 * 3) << "rank " << r;
}

TEST_P(CachedJobTest, AShapeChangeAfterCachingIsAMismatchNamingTheRanks) {
  if (Size() < 2) GTEST_SKIP() << "needs two ranks to disagree";
  ThreadedJob job(Size(), Settings());
  TFRING_ASSERT_OK(job.InitAll());
  RunSteps(job, 2, 1);  // "grad_0" with 16 elements, cached
  std::vector<Completion> done;
  for (int r = 0; r < job.size(); ++r) {
    const int64_t n = r == 1 ? 12 : 16;  // rank 1 changes its shape
    done.push_back(testing_util::Submit(
        job[r], testing_util::Allreduce("grad_0", FilledInput(job, r, n), job.Alloc<float>(n), n)));
  }
  for (int r = 0; r < job.size(); ++r) {
    Status st = done[r].Wait(kOpTimeoutS);
    EXPECT_TRUE(testing_util::HasError(st, ErrorCode::kMismatch, {"'grad_0'", "rank 0 has [16]", "rank 1 has [12]"}))
        << "rank " << r << ": " << st.ToString();
  }
  // The job goes on: the cached id still stands for the old shape (1 cached step before,
  // 2 now), and a new shape on every rank negotiates in full once and then gets its own id.
  RunSteps(job, 2, 1);
  for (int r = 0; r < job.size(); ++r) EXPECT_EQ(job[r].stats().cached_tensors, 3) << "rank " << r;
  RunSteps(job, 2, 1, 12);
  for (int r = 0; r < job.size(); ++r) EXPECT_EQ(job[r].stats().cached_tensors, 4) << "rank " << r;
}

// A cached tensor that one rank never submits: the relays above it hold the others' ids
// combined, then report them rank by rank (a quarter of the stall limit later), so that
// the stall names exactly the missing rank, wherever it sits in the tree.
TEST_P(CachedJobTest, AStalledCachedTensorNamesExactlyTheMissingRank) {
  if (Size() < 3) GTEST_SKIP() << "needs a rank between rank 0 and the missing one, or beside it";
  const int missing = Size() - 2;  // in a chain: a relay, with a rank below it that did submit
  ThreadedJob job(Size(), Settings({{"TFRING_STALL_SHUTDOWN_S", "1"}}));
  TFRING_ASSERT_OK(job.InitAll());
  RunSteps(job, 2, 1);  // "grad_0", cached
  std::vector<Completion> done(static_cast<size_t>(Size()));
  std::string submitted;
  for (int r = 0; r < Size(); ++r) {
    if (r == missing) continue;
    submitted += (submitted.empty() ? "" : ", ") + std::to_string(r);
    done[r] = testing_util::Submit(
        job[r], testing_util::Allreduce("grad_0", FilledInput(job, r, 16), job.Alloc<float>(16), 16));
  }
  for (int r = 0; r < Size(); ++r) {
    if (r == missing) continue;
    Status st = done[r].Wait(kOpTimeoutS);
    EXPECT_TRUE(testing_util::HasError(st, ErrorCode::kTimeout,
                                       {"'grad_0'", "submitted by rank(s) " + submitted,
                                        "missing from rank(s) " + std::to_string(missing)}))
        << "rank " << r << ": " << st.ToString();
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CachedJobTest,
                         ::testing::Values(CachedSetup{1, 0}, CachedSetup{2, 0}, CachedSetup{3, 0}, CachedSetup{4, 1},
                                           CachedSetup{5, 2}),
                         [](const ::testing::TestParamInfo<CachedSetup>& info) {
                           return "np" + std::to_string(info.param.size) +
                                  (info.param.fanout ? "_fanout" + std::to_string(info.param.fanout) : "");
                         });

}  // namespace
}  // namespace tfring
