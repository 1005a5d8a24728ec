// tfring::Runtime end to end, with several Runtime objects in one process as ranks in
// threads, rendezvousing through a TcpStoreServer: negotiation in any order, fusion,
// every collective, per-tensor errors, local argument errors, life cycle, and failures of
// one rank reaching every other rank within seconds.
#include "runtime/runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <numeric>
#include <random>

#include "runtime_job.h"
#include "rendezvous/tcp_store.h"
#include "test_util.h"

namespace tfring {
namespace {

using testing_util::JobSetup;
using testing_util::JobSetups;
using testing_util::SetupName;
using testing_util::SetupOverrides;
using testing_util::Allreduce;
using testing_util::Completion;
using testing_util::ExpectAllOk;
using testing_util::ExpectAllreduceWorks;
using testing_util::FilledInput;
using testing_util::HasError;
using testing_util::ThreadedJob;
using testing_util::kOpTimeoutS;
using testing_util::RunRanks;
using testing_util::SecondsSince;
using testing_util::Submit;
using testing_util::SumOfInputs;

// ---- life cycle -------------------------------------------------------------------

TEST(RuntimeLifecycleTest, UseBeforeInitIsAPreconditionError) {
  Runtime rt;
  EXPECT_FALSE(rt.initialized());
  EXPECT_EQ(rt.rank(), -1);
  EXPECT_EQ(rt.size(), -1);
  EXPECT_TRUE(rt.config_values().empty());
  float x = 1, y = 0;
  Completion c;
  Submission s = Allreduce("early", &x, &y, 1);
  s.done = c.Callback();
  EXPECT_TRUE(HasError(rt.Enqueue(std::move(s)), ErrorCode::kPrecondition, {"not initialized"}));
  EXPECT_EQ(c.calls(), 0);  // refused at once, done never runs
  EXPECT_TRUE(HasError(rt.StartTimeline("/tmp/never.json"), ErrorCode::kPrecondition, {"not initialized"}));
  TFRING_EXPECT_OK(rt.Shutdown());  // idempotent, also before Init
}

TEST(RuntimeLifecycleTest, BadSettingNamesTheVariableAndLeavesItUninitialized) {
  Runtime rt;
  EXPECT_TRUE(HasError(rt.Init({{"TFRING_FUSION_THRESHOLD", "lots"}}, false),
                       ErrorCode::kInvalidArgument, {"TFRING_FUSION_THRESHOLD", "'lots'"}));
  EXPECT_FALSE(rt.initialized());
  TFRING_ASSERT_OK(rt.Init({{"TFRING_LOG_LEVEL", "error"}}, false));
  EXPECT_TRUE(rt.initialized());
  EXPECT_EQ(rt.config_values().at("TFRING_LOG_LEVEL").source, "argument");
  EXPECT_TRUE(HasError(rt.Init({}, false), ErrorCode::kPrecondition, {"already initialized"}));
  TFRING_EXPECT_OK(rt.Shutdown());
}

TEST(RuntimeLifecycleTest, SingleRankRunsEveryCollectiveLocally) {
  Runtime rt;
  TFRING_ASSERT_OK(rt.Init({{"TFRING_LOG_LEVEL", "error"}}, false));
  EXPECT_EQ(rt.rank(), 0);
  EXPECT_EQ(rt.size(), 1);
  std::vector<float> in = {1, 2, 3, 4}, out(4, 0);
  Submission avg = Allreduce("avg", in.data(), out.data(), 4, ReduceOp::kAverage);
  avg.request.attrs.postscale = 2;
  TFRING_EXPECT_OK(Submit(rt, std::move(avg)).Wait(kOpTimeoutS));
  EXPECT_EQ(out, (std::vector<float>{2, 4, 6, 8}));

  std::vector<float> gathered;
  std::vector<int64_t> gathered_shape;
  Submission g;
  g.request.name = "gather";
  g.request.attrs.op = OpType::kAllgather;
  g.request.shape = {2, 2};
  g.input = in.data();
  g.allocate_output = [&](const std::vector<int64_t>& shape, void** data) {
    gathered_shape = shape;
    gathered.resize(4);
    *data = gathered.data();
    return Status::OK();
  };
  TFRING_EXPECT_OK(Submit(rt, std::move(g)).Wait(kOpTimeoutS));
  EXPECT_EQ(gathered_shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(gathered, in);

  Submission b;
  b.request.name = "barrier";
  b.request.attrs.op = OpType::kBarrier;
  TFRING_EXPECT_OK(Submit(rt, std::move(b)).Wait(kOpTimeoutS));
  RuntimeStats stats = rt.stats();
  EXPECT_EQ(stats.tensors, 3);
  EXPECT_EQ(stats.bytes_reduced, 16);
  TFRING_EXPECT_OK(rt.Shutdown());
  EXPECT_FALSE(rt.initialized());
  EXPECT_EQ(rt.stats().tensors, 0);
}

TEST(RuntimeLifecycleTest, InitShutdownInitAgain) {
  ThreadedJob job(2);
  for (int round = 0; round < 2; ++round) {
    TFRING_ASSERT_OK(job.InitAll());
    EXPECT_EQ(job[1].rank(), 1);
    EXPECT_EQ(job[1].size(), 2);
    ExpectAllreduceWorks(job, "round" + std::to_string(round));
    job.ShutdownAll();
    EXPECT_FALSE(job[0].initialized());
  }
}

// ---- negotiation and fusion --------------------------------------------------------

class RuntimeJobTest : public ::testing::TestWithParam<JobSetup> {
 protected:
  std::map<std::string, std::string> Transport() const { return SetupOverrides(GetParam()); }
};

TEST_P(RuntimeJobTest, RanksEnqueueInDifferentOrders) {
  ThreadedJob job(3, Transport());
  TFRING_ASSERT_OK(job.InitAll());
  const int kTensors = 16;
  std::vector<std::vector<float*>> outs(3, std::vector<float*>(kTensors));
  std::vector<std::vector<Completion>> done(3, std::vector<Completion>(kTensors));
  auto length = [](int t) { return static_cast<int64_t>(t * 37 % 200); };  // includes 0
  auto statuses = RunRanks(3, 30, [&](int r) {
    std::vector<int> order(kTensors);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937 rng(r);
    std::shuffle(order.begin(), order.end(), rng);
    if (r == 1) std::reverse(order.begin(), order.end());
    for (int t : order) {
      outs[r][t] = job.Alloc<float>(length(t));
      done[r][t] = Submit(job[r], Allreduce("grad/" + std::to_string(t), FilledInput(job, r, length(t)),
                                            outs[r][t], length(t)));
      if (t % 5 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return Status::OK();
  });
  ExpectAllOk(statuses, "enqueue");
  for (int r = 0; r < 3; ++r) {
    for (int t = 0; t < kTensors; ++t) {
      Status st = done[r][t].Wait(kOpTimeoutS);
      ASSERT_TRUE(st.ok()) << "rank " << r << " tensor " << t << ": " << st.ToString();
      for (int64_t i = 0; i < length(t); ++i) ASSERT_EQ(outs[r][t][i], SumOfInputs(3, i));
      EXPECT_EQ(done[r][t].calls(), 1);
    }
    EXPECT_EQ(job[r].stats().tensors, kTensors);
  }
}

// While the background thread spins it watches the queue instead of the eventfd, and a
// submission skips the eventfd write. Submissions timed to race the end of a short spin
// must still never wait for the idle wake-up (1 s): each completes well before that.
TEST_P(RuntimeJobTest, SubmissionsRacingTheEndOfASpinAreNeverLeftAsleep) {
  auto extra = Transport();
  extra["TFRING_SPIN_US"] = "20";
  ThreadedJob job(2, extra);
  TFRING_ASSERT_OK(job.InitAll());
  const int kCalls = 300;
  std::vector<double> slowest(2, 0.0);
  auto statuses = RunRanks(2, 60, [&](int r) -> Status {
    std::mt19937 rng(r + 7);
    std::uniform_int_distribution<int> pause_us(0, 60);  // around the 20 us spin's end
    const float* in = FilledInput(job, r, 2);
    for (int i = 0; i < kCalls; ++i) {
      float* out = job.Alloc<float>(2);
      const auto start = std::chrono::steady_clock::now();
      Completion c = Submit(job[r], Allreduce("racing", in, out, 2));
      TFRING_RETURN_IF_ERROR(c.Wait(kOpTimeoutS));
      slowest[r] = std::max(slowest[r], SecondsSince(start));
      if (out[0] != SumOfInputs(2, 0) || out[1] != SumOfInputs(2, 1)) return Status::Internal("wrong sum");
      std::this_thread::sleep_for(std::chrono::microseconds(pause_us(rng)));
    }
    return Status::OK();
  });
  ExpectAllOk(statuses, "racing submissions");
  for (int r = 0; r < 2; ++r) EXPECT_LT(slowest[r], 0.5) << "rank " << r << " waited for the idle wake-up";
}

TEST_P(RuntimeJobTest, GroupIsFusedAndNeverAcrossDtypes) {
  auto extra = Transport();
  extra["TFRING_FUSION_THRESHOLD"] = "1048576";
  ThreadedJob job(3, extra);
  TFRING_ASSERT_OK(job.InitAll());
  const int kFloats = 6, kInts = 3;
  std::vector<std::vector<float*>> fout(3);
  std::vector<std::vector<int32_t*>> iout(3);
  std::vector<std::vector<Completion>> done(3);
  for (int r = 0; r < 3; ++r) {
    std::vector<Submission> group;
    for (int t = 0; t < kFloats; ++t) {
      fout[r].push_back(job.Alloc<float>(t + 1));
      group.push_back(Allreduce("f" + std::to_string(t), FilledInput(job, r, t + 1), fout[r][t], t + 1,
                                ReduceOp::kAverage));
    }
    for (int t = 0; t < kInts; ++t) {
      int32_t* in = job.Alloc<int32_t>(4);
      for (int i = 0; i < 4; ++i) in[i] = (r + 1) * 10 + i;
      iout[r].push_back(job.Alloc<int32_t>(4));
      Submission s;
      s.request.name = "i" + std::to_string(t);
      s.request.attrs.dtype = DataType::kInt32;
      s.request.attrs.reduce_op = ReduceOp::kMax;
      s.request.shape = {4};
      s.input = in;
      s.output = iout[r][t];
      group.push_back(std::move(s));
    }
    TFRING_ASSERT_OK(SubmitGroup(job[r], std::move(group), &done[r]));
  }
  for (int r = 0; r < 3; ++r) {
    for (auto& d : done[r]) TFRING_ASSERT_OK(d.Wait(kOpTimeoutS));
    for (int t = 0; t < kFloats; ++t)
      for (int i = 0; i <= t; ++i) EXPECT_EQ(fout[r][t][i], SumOfInputs(3, i) / 3) << t << " " << i;
    for (int t = 0; t < kInts; ++t)
      for (int i = 0; i < 4; ++i) EXPECT_EQ(iout[r][t][i], 30 + i);
    RuntimeStats st = job[r].stats();
    EXPECT_EQ(st.tensors, kFloats + kInts);
    EXPECT_EQ(st.fused_tensors, kFloats + kInts) << "rank " << r;
    EXPECT_EQ(st.collectives, 2) << "one fused float32 group and one int32 group, rank " << r;
    EXPECT_EQ(st.fusion_copied_bytes, (1 + 2 + 3 + 4 + 5 + 6) * 4 + kInts * 4 * 4) << "small tensors are packed, rank " << r;
  }
}

// A fused group whose larger tensors are reduced where they are (their own ring, no
// fusion-buffer copies) and whose small ones are packed: every result exact, in place
// (input == output, as when TF forwards a buffer) and out of place, with Average's
// postscale and a prescale, still one negotiated collective.
TEST_P(RuntimeJobTest, GroupReducesLargeTensorsInPlaceAndPacksTheRest) {
  auto extra = Transport();
  extra["TFRING_FUSION_IN_PLACE_BYTES"] = "64";  // 16 floats and more: their own ring
  ThreadedJob job(3, extra);
  TFRING_ASSERT_OK(job.InitAll());
  const std::vector<int64_t> sizes = {1, 40, 3, 0, 100, 16, 15, 1001};
  std::vector<std::vector<float*>> out(3);
  std::vector<std::vector<Completion>> done(3);
  for (int r = 0; r < 3; ++r) {
    std::vector<Submission> group;
    for (size_t t = 0; t < sizes.size(); ++t) {
      float* in = FilledInput(job, r, sizes[t]);
      const bool forwarded = t % 2 == 1;  // input and output are one buffer
      out[r].push_back(forwarded ? in : job.Alloc<float>(sizes[t]));
      group.push_back(Allreduce("t" + std::to_string(t), in, out[r][t], sizes[t], ReduceOp::kAverage));
      group.back().request.attrs.prescale = 2.0;
      group.back().request.attrs.postscale = 3.0;
    }
    TFRING_ASSERT_OK(SubmitGroup(job[r], std::move(group), &done[r]));
  }
  for (int r = 0; r < 3; ++r) {
    for (auto& d : done[r]) TFRING_ASSERT_OK(d.Wait(kOpTimeoutS));
    for (size_t t = 0; t < sizes.size(); ++t) {
      for (int64_t i = 0; i < sizes[t]; ++i) {
        ASSERT_FLOAT_EQ(out[r][t][i], SumOfInputs(3, i) * 2 / 3 * 3) << "rank " << r << " tensor " << t << " [" << i << "]";
      }
    }
    RuntimeStats st = job[r].stats();
    EXPECT_EQ(st.collectives, 1) << "one negotiated group, rank " << r;
    EXPECT_EQ(st.tensors, static_cast<int64_t>(sizes.size()));
    EXPECT_EQ(st.fusion_copied_bytes, (1 + 3 + 0 + 15) * 4) << "only the tensors below 64 bytes were packed, rank " << r;
  }
}

// Settings every rank must share fail init on every rank, naming the odd rank and both
// values: TFRING_FUSION_IN_PLACE_BYTES decides which tensors of a group travel alone (ranks
// that disagree would run different rings); with shared memory on, a rank with
// TFRING_SHM_CONTROL on would wait at init for control rings its peer never opens. Without
// shared memory TFRING_SHM_CONTROL changes nothing, and a rank may differ in it.
TEST_P(RuntimeJobTest, SettingsThatDifferBetweenRanksFailInit) {
  const bool shm = GetParam().shm;
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"TFRING_FUSION_IN_PLACE_BYTES", "1024"}, {"TFRING_SHM_CONTROL", "0"}}) {
    ThreadedJob job(3, Transport(), [&](int r, std::map<std::string, std::string>& o) {
      if (r == 2) o[name] = value;
    });
    auto statuses = RunRanks(3, 30, [&](int r) { return job[r].Init(job.Overrides(r), false); });
    if (name == "TFRING_SHM_CONTROL" && !shm) {
      ExpectAllOk(statuses, "TFRING_SHM_CONTROL differing with TFRING_SHM=0");
      continue;
    }
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(statuses[r].code(), ErrorCode::kInvalidArgument) << name << ", rank " << r << ": " << statuses[r].ToString();
      EXPECT_NE(statuses[r].message().find("rank 2 has '"), std::string::npos) << statuses[r].ToString();
      EXPECT_NE(statuses[r].message().find(name + "=" + value), std::string::npos) << statuses[r].ToString();
    }
  }
}

TEST_P(RuntimeJobTest, EveryCollective) {
  ThreadedJob job(3, Transport());
  TFRING_ASSERT_OK(job.InitAll());
  const int n = 3;
  struct RankResult {
    std::vector<int64_t> gather_shape, a2a_shape, a2a_splits;
    int64_t* gathered = nullptr;
    int64_t* a2a = nullptr;
    double* bcast = nullptr;
    float* rs = nullptr;
  };
  std::vector<RankResult> res(n);
  std::vector<std::vector<Completion>> done(n);
  for (int r = 0; r < n; ++r) {
    RankResult& out = res[r];
    // allgather: rank r contributes r + 1 rows of 2 int64.
    Submission g;
    g.request.name = "gather";
    g.request.attrs.op = OpType::kAllgather;
    g.request.attrs.dtype = DataType::kInt64;
    g.request.shape = {r + 1, 2};
    int64_t* gin = job.Alloc<int64_t>(2 * (r + 1));
    for (int i = 0; i < 2 * (r + 1); ++i) gin[i] = 100 * r + i;
    g.input = gin;
    g.allocate_output = [&job, &out](const std::vector<int64_t>& shape, void** data) {
      out.gather_shape = shape;
      out.gathered = job.Alloc<int64_t>(shape[0] * shape[1]);
      *data = out.gathered;
      return Status::OK();
    };
    done[r].push_back(Submit(job[r], std::move(g)));
    // broadcast from rank 2.
    Submission b;
    b.request.name = "bcast";
    b.request.attrs.op = OpType::kBroadcast;
    b.request.attrs.dtype = DataType::kFloat64;
    b.request.attrs.root = 2;
    b.request.shape = {5};
    double* bin = job.Alloc<double>(5);
    for (int i = 0; i < 5; ++i) bin[i] = r * 1000 + i;
    out.bcast = job.Alloc<double>(5);
    b.input = bin;
    b.output = out.bcast;
    done[r].push_back(Submit(job[r], std::move(b)));
    // alltoall: rank r sends (p + r) % 3 rows of 1 int64 to rank p.
    Submission a;
    a.request.name = "a2a";
    a.request.attrs.op = OpType::kAlltoall;
    a.request.attrs.dtype = DataType::kInt64;
    int64_t rows = 0;
    for (int p = 0; p < n; ++p) {
      a.request.splits.push_back((p + r) % 3);
      rows += (p + r) % 3;
    }
    a.request.shape = {rows, 1};
    int64_t* ain = job.Alloc<int64_t>(rows);
    int64_t k = 0;
    for (int p = 0; p < n; ++p)
      for (int i = 0; i < (p + r) % 3; ++i) ain[k++] = 10 * r + p;
    a.input = ain;
    a.allocate_output = [&job, &out](const std::vector<int64_t>& shape, void** data) {
      out.a2a_shape = shape;
      out.a2a = job.Alloc<int64_t>(shape[0]);
      *data = out.a2a;
      return Status::OK();
    };
    a.on_received_splits = [&out](const std::vector<int64_t>& s) { out.a2a_splits = s; };
    done[r].push_back(Submit(job[r], std::move(a)));
    // reducescatter of 7 rows of 2 floats: ranks keep 3, 2, 2 rows.
    Submission s;
    s.request.name = "rs";
    s.request.attrs.op = OpType::kReducescatter;
    s.request.shape = {7, 2};
    s.input = FilledInput(job, r, 14);
    out.rs = job.Alloc<float>(ReducescatterRows(7, n, r) * 2);
    s.output = out.rs;
    done[r].push_back(Submit(job[r], std::move(s)));
    Submission bar;
    bar.request.name = "barrier";
    bar.request.attrs.op = OpType::kBarrier;
    done[r].push_back(Submit(job[r], std::move(bar)));
  }
  for (int r = 0; r < n; ++r) {
    for (auto& d : done[r]) TFRING_ASSERT_OK(d.Wait(kOpTimeoutS));
    const RankResult& out = res[r];
    EXPECT_EQ(out.gather_shape, (std::vector<int64_t>{6, 2}));
    std::vector<int64_t> want_gather;
    for (int p = 0; p < n; ++p)
      for (int i = 0; i < 2 * (p + 1); ++i) want_gather.push_back(100 * p + i);
    EXPECT_EQ(std::vector<int64_t>(out.gathered, out.gathered + 12), want_gather);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(out.bcast[i], 2000 + i);
    std::vector<int64_t> want_splits, want_a2a;
    for (int p = 0; p < n; ++p) {
      want_splits.push_back((r + p) % 3);
      for (int i = 0; i < (r + p) % 3; ++i) want_a2a.push_back(10 * p + r);
    }
    EXPECT_EQ(out.a2a_splits, want_splits);
    ASSERT_EQ(out.a2a_shape, (std::vector<int64_t>{static_cast<int64_t>(want_a2a.size()), 1}));
    EXPECT_EQ(std::vector<int64_t>(out.a2a, out.a2a + want_a2a.size()), want_a2a);
    int64_t first_row = 0;
    for (int p = 0; p < r; ++p) first_row += ReducescatterRows(7, n, p);
    for (int64_t i = 0; i < ReducescatterRows(7, n, r) * 2; ++i) {
      EXPECT_EQ(out.rs[i], SumOfInputs(n, first_row * 2 + i)) << "rank " << r << " element " << i;
    }
  }
}

// ---- per-tensor errors ----------------------------------------------------------------

TEST_P(RuntimeJobTest, MismatchFailsOnEveryRankThenNextOpWorks) {
  ThreadedJob job(3, Transport());
  TFRING_ASSERT_OK(job.InitAll());
  std::vector<Completion> done;
  for (int r = 0; r < 3; ++r) {
    int64_t n = r == 1 ? 3 : 4;
    done.push_back(Submit(job[r], Allreduce("dense/kernel", FilledInput(job, r, n), job.Alloc<float>(n), n)));
  }
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(HasError(done[r].Wait(kOpTimeoutS), ErrorCode::kMismatch,
                         {"'dense/kernel'", "shape", "rank 0 has [4]", "rank 1 has [3]"}))
        << "rank " << r;
  }
  // dtype mismatch on another rank, another tensor.
  std::vector<Completion> done2;
  for (int r = 0; r < 3; ++r) {
    Submission s = Allreduce("bias", FilledInput(job, r, 2), job.Alloc<float>(2), 2);
    if (r == 2) s.request.attrs.dtype = DataType::kInt32;
    done2.push_back(Submit(job[r], std::move(s)));
  }
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(HasError(done2[r].Wait(kOpTimeoutS), ErrorCode::kMismatch,
                         {"'bias'", "dtype", "rank 0 has float32", "rank 2 has int32"}));
  }
  ExpectAllreduceWorks(job, "after-mismatch");
  ExpectAllreduceWorks(job, "dense/kernel");  // the failed name is free again
}

TEST_P(RuntimeJobTest, DuplicateInFlightNameIsRefusedOnEnqueue) {
  ThreadedJob job(3, Transport());
  TFRING_ASSERT_OK(job.InitAll());
  float* out0 = job.Alloc<float>(4);
  Completion first = Submit(job[0], Allreduce("dup", FilledInput(job, 0, 4), out0, 4));
  Completion second;
  Submission again = Allreduce("dup", FilledInput(job, 0, 4), job.Alloc<float>(4), 4);
  again.done = second.Callback();
  EXPECT_TRUE(HasError(job[0].Enqueue(std::move(again)), ErrorCode::kInvalidArgument,
                       {"'dup'", "already in flight", "rank 0"}));
  std::vector<Submission> group;
  group.push_back(Allreduce("twin", FilledInput(job, 0, 1), job.Alloc<float>(1), 1));
  group.push_back(Allreduce("twin", FilledInput(job, 0, 1), job.Alloc<float>(1), 1));
  for (auto& s : group) s.done = second.Callback();
  EXPECT_TRUE(HasError(job[0].EnqueueGroup(std::move(group)), ErrorCode::kInvalidArgument, {"'twin'"}));
  // The first "dup" is unaffected and completes once the other ranks submit it.
  std::vector<Completion> others;
  for (int r = 1; r < 3; ++r) {
    others.push_back(Submit(job[r], Allreduce("dup", FilledInput(job, r, 4), job.Alloc<float>(4), 4)));
  }
  TFRING_ASSERT_OK(first.Wait(kOpTimeoutS));
  for (auto& c : others) TFRING_ASSERT_OK(c.Wait(kOpTimeoutS));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out0[i], SumOfInputs(3, i));
  EXPECT_EQ(second.calls(), 0);  // refused submissions never call done
  ExpectAllreduceWorks(job, "dup");
}

TEST_P(RuntimeJobTest, LocalArgumentErrorsAreImmediate) {
  ThreadedJob job(2, Transport());
  TFRING_ASSERT_OK(job.InitAll());
  Runtime& rt = job[1];
  float* in = FilledInput(job, 1, 6);
  float* out = job.Alloc<float>(6);
  Completion never;
  auto try_enqueue = [&](Submission s) {
    s.done = never.Callback();
    return rt.Enqueue(std::move(s));
  };
  Submission b = Allreduce("w", in, out, 6);
  b.request.attrs.op = OpType::kBroadcast;
  b.request.attrs.root = 2;
  EXPECT_TRUE(HasError(try_enqueue(b), ErrorCode::kInvalidArgument, {"'w'", "root_rank=2", "rank 1"}));
  Submission a = Allreduce("split", in, out, 6);
  a.request.attrs.op = OpType::kAlltoall;
  a.allocate_output = [](const std::vector<int64_t>&, void**) { return Status::OK(); };
  a.request.splits = {1, 2};
  EXPECT_TRUE(HasError(try_enqueue(a), ErrorCode::kInvalidArgument, {"'split'", "sum to 3", "6"}));
  a.request.splits = {1, 2, 3};
  EXPECT_TRUE(HasError(try_enqueue(a), ErrorCode::kInvalidArgument, {"'split'", "3 entries"}));
  Submission g = Allreduce("gpu", in, out, 6);
  g.request.attrs.device = 0;
  EXPECT_TRUE(HasError(try_enqueue(g), ErrorCode::kUnimplemented, {"'gpu'", "GPU:0"}));
  Submission gada = Allreduce("gpu-adasum", in, out, 6, ReduceOp::kAdasum);
  gada.request.attrs.device = 0;  // refused for Adasum before any GPU library is looked for
  EXPECT_TRUE(HasError(try_enqueue(gada), ErrorCode::kUnimplemented, {"'gpu-adasum'", "rank 1", "CPU"}));
  Submission iada = Allreduce("int-adasum", in, out, 6, ReduceOp::kAdasum);
  iada.request.attrs.dtype = DataType::kInt32;
  EXPECT_TRUE(HasError(try_enqueue(iada), ErrorCode::kUnimplemented, {"'int-adasum'", "int32"}));
  Submission bavg = Allreduce("flags", in, out, 6, ReduceOp::kAverage);
  bavg.request.attrs.dtype = DataType::kBool;
  EXPECT_TRUE(HasError(try_enqueue(bavg), ErrorCode::kUnimplemented, {"'flags'", "Average"}));
  Submission nameless = Allreduce("", in, out, 6);
  EXPECT_TRUE(HasError(try_enqueue(nameless), ErrorCode::kInvalidArgument, {"name"}));
  Submission scalar = Allreduce("scalar", in, out, 1);
  scalar.request.attrs.op = OpType::kReducescatter;
  scalar.request.shape = {};
  EXPECT_TRUE(HasError(try_enqueue(scalar), ErrorCode::kInvalidArgument, {"'scalar'", "scalar"}));
  Submission no_done = Allreduce("no_done", in, out, 6);
  EXPECT_TRUE(HasError(rt.Enqueue(std::move(no_done)), ErrorCode::kInvalidArgument, {"callback"}));
  EXPECT_EQ(never.calls(), 0);
  ExpectAllreduceWorks(job, "after-local-errors");  // nothing was left half-submitted
}

// ---- one rank leaving / failing ------------------------------------------------------

// `leaver` shuts down while the others wait in an op it will never submit; they must fail
// within seconds with an error naming it, and the leaver's own pending op must fail too.
void CheckShutdownOfOneRank(const JobSetup& setup, int leaver) {
  ThreadedJob job(3, SetupOverrides(setup));
  TFRING_ASSERT_OK(job.InitAll());
  std::vector<Completion> waiting(3);
  for (int r = 0; r < 3; ++r) {
    std::string name = r == leaver ? "only-on-the-leaver" : "waits-for-the-leaver";
    waiting[r] = Submit(job[r], Allreduce(name, FilledInput(job, r, 4), job.Alloc<float>(4), 4));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto t0 = std::chrono::steady_clock::now();
  TFRING_EXPECT_OK(job[leaver].Shutdown());
  EXPECT_TRUE(HasError(waiting[leaver].Wait(kOpTimeoutS), ErrorCode::kPrecondition,
                       {"shut down", "rank " + std::to_string(leaver)}));
  const std::string who = "rank " + std::to_string(leaver);
  for (int r = 0; r < 3; ++r) {
    if (r == leaver) continue;
    Status st = waiting[r].Wait(kOpTimeoutS);
    EXPECT_FALSE(st.ok()) << "rank " << r;
    EXPECT_NE(st.message().find(who), std::string::npos) << "rank " << r << ": " << st.ToString();
    // Later ops fail at once with the same cause instead of hanging.
    float x = 1, y;
    Completion later;
    Submission s = Allreduce("later", &x, &y, 1);
    s.done = later.Callback();
    Status enq = job[r].Enqueue(std::move(s));
    Status late = enq.ok() ? later.Wait(kOpTimeoutS) : enq;
    EXPECT_FALSE(late.ok());
    EXPECT_NE(late.message().find(who), std::string::npos) << late.ToString();
  }
  EXPECT_LT(SecondsSince(t0), 5.0) << "failures must reach every rank within seconds";
  float x = 1, y;
  Completion c;
  Submission s = Allreduce("after-shutdown", &x, &y, 1);
  s.done = c.Callback();
  EXPECT_TRUE(HasError(job[leaver].Enqueue(std::move(s)), ErrorCode::kPrecondition, {"not initialized"}));
}

TEST_P(RuntimeJobTest, ShutdownOfANonRootRankFailsEveryPendingOp) { CheckShutdownOfOneRank(GetParam(), 2); }

TEST_P(RuntimeJobTest, ShutdownOfRankZeroFailsEveryPendingOp) { CheckShutdownOfOneRank(GetParam(), 0); }

// Enqueues `held` and `then` on `rt` as one group. Completing `held` holds the rank's
// background thread (it reads no control message) until `*release` is set; a hold that
// instead ends after 10 s sets `*held_too_long`. The flags must outlive the rank.
Status EnqueueHeldThen(Runtime& rt, Submission held, Completion* held_done, Submission then,
                       Completion* then_done, const std::atomic<bool>* release,
                       std::atomic<bool>* held_too_long) {
  auto notify = held_done->Callback();
  held.done = [release, held_too_long, notify](const Status& st) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!release->load()) {
      if (std::chrono::steady_clock::now() > give_up) {
        held_too_long->store(true);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    notify(st);
  };
  then.done = then_done->Callback();
  std::vector<Submission> both;
  both.push_back(std::move(held));
  both.push_back(std::move(then));
  return rt.EnqueueGroup(std::move(both));
}

// A rank can read a response and, right behind it, the notice that a peer shut down (its
// background thread was busy: here, held in a completion callback). The peer shut down
// after doing its part of that response, so the response must still run here, not fail.
TEST_P(RuntimeJobTest, ResponsesAgreedBeforeAPeersShutdownStillRun) {
  std::atomic<bool> release{false};      // declared before the job: outlives rank 2's thread
  std::atomic<bool> held_too_long{false};  // the hold gave up: the order was not forced
  ThreadedJob job(3, Transport());
  TFRING_ASSERT_OK(job.InitAll());
  auto broadcast = [&](int r) {
    Submission b = Allreduce("second", nullptr, nullptr, 4);
    b.request.attrs.op = OpType::kBroadcast;
    b.request.attrs.root = 0;
    float* data = job.Alloc<float>(4);
    for (int i = 0; i < 4; ++i) data[i] = r == 0 ? 10.0f + i : -1.0f;
    b.input = data;
    b.output = data;
    return std::make_pair(b, data);
  };
  // Rank 2 asks for both tensors at once, before the others ask for any; completing the
  // first holds its background thread.
  Completion first2, second2;
  auto [second_on_2, result_on_2] = broadcast(2);
  TFRING_ASSERT_OK(EnqueueHeldThen(job[2], Allreduce("first", FilledInput(job, 2, 4), job.Alloc<float>(4), 4),
                                   &first2, second_on_2, &second2, &release, &held_too_long));
  Completion first0 = Submit(job[0], Allreduce("first", FilledInput(job, 0, 4), job.Alloc<float>(4), 4));
  Completion first1 = Submit(job[1], Allreduce("first", FilledInput(job, 1, 4), job.Alloc<float>(4), 4));
  TFRING_ASSERT_OK(first0.Wait(kOpTimeoutS));
  TFRING_ASSERT_OK(first1.Wait(kOpTimeoutS));
  Completion second0 = Submit(job[0], broadcast(0).first);
  Completion second1 = Submit(job[1], broadcast(1).first);
  TFRING_ASSERT_OK(second0.Wait(kOpTimeoutS));
  TFRING_ASSERT_OK(second1.Wait(kOpTimeoutS));
  TFRING_ASSERT_OK(job[1].Shutdown());
  // Once rank 0 fails this probe it has told rank 2 that rank 1 left.
  float x = 1, y;
  Completion probe = Submit(job[0], Allreduce("probe", &x, &y, 1));
  EXPECT_TRUE(HasError(probe.Wait(kOpTimeoutS), ErrorCode::kPrecondition, {"rank 1", "shut down"}));
  release.store(true);
  TFRING_EXPECT_OK(first2.Wait(kOpTimeoutS));
  EXPECT_FALSE(held_too_long.load()) << "rank 2 was released by its own timeout: the order was not forced";
  TFRING_ASSERT_OK(second2.Wait(kOpTimeoutS));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(result_on_2[i], 10.0f + i) << i;
  // What comes after the shutdown fails, naming the rank that left.
  Completion later = Submit(job[2], Allreduce("later", &x, &y, 1));
  EXPECT_TRUE(HasError(later.Wait(kOpTimeoutS), ErrorCode::kPrecondition, {"rank 1", "shut down"}));
}

// Rank 0 waits in a transfer for a rank that shut down without doing its part (its
// background thread was held until after shutdown() was called). The error says the rank
// shut down, as the notice it sent says, not that it crashed.
TEST_P(RuntimeJobTest, APeerThatShutsDownBeforeDoingItsPartIsNamedAsShutDownNotCrashed) {
  std::atomic<bool> release{false}, held_too_long{false};  // declared before the job: outlive its threads
  ThreadedJob job(2, Transport());
  TFRING_ASSERT_OK(job.InitAll());
  Completion first1, second1;
  TFRING_ASSERT_OK(EnqueueHeldThen(job[1], Allreduce("first", FilledInput(job, 1, 4), job.Alloc<float>(4), 4),
                                   &first1, Allreduce("second", FilledInput(job, 1, 4), job.Alloc<float>(4), 4),
                                   &second1, &release, &held_too_long));
  Completion first0 = Submit(job[0], Allreduce("first", FilledInput(job, 0, 4), job.Alloc<float>(4), 4));
  TFRING_ASSERT_OK(first0.Wait(kOpTimeoutS));
  Completion second0 = Submit(job[0], Allreduce("second", FilledInput(job, 0, 4), job.Alloc<float>(4), 4));
  std::thread leaver([&] { (void)job[1].Shutdown(); });  // returns once rank 1's loop has ended
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  release.store(true);
  leaver.join();
  EXPECT_FALSE(held_too_long.load());
  EXPECT_TRUE(HasError(second1.Wait(kOpTimeoutS), ErrorCode::kPrecondition, {"shut down"}));
  Status st = second0.Wait(kOpTimeoutS);
  EXPECT_TRUE(HasError(st, ErrorCode::kPrecondition, {"rank 1 has shut down"})) << st.ToString();
}

TEST_P(RuntimeJobTest, DestroyingARuntimeShutsItDown) {
  ThreadedJob job(2, Transport());
  TFRING_ASSERT_OK(job.InitAll());
  Completion mine = Submit(job[0], Allreduce("orphan", FilledInput(job, 0, 3), job.Alloc<float>(3), 3));
  Completion peer = Submit(job[1], Allreduce("other", FilledInput(job, 1, 3), job.Alloc<float>(3), 3));
  job.Destroy(0);  // ~Runtime: the pending op is failed, never leaked
  EXPECT_TRUE(HasError(mine.Wait(kOpTimeoutS), ErrorCode::kPrecondition, {"shut down", "rank 0"}));
  EXPECT_TRUE(HasError(peer.Wait(kOpTimeoutS), ErrorCode::kPrecondition, {"rank 0"}));
}

TEST_P(RuntimeJobTest, StallShutdownFailsTheStalledOpOnEveryRank) {
  auto extra = Transport();
  extra["TFRING_STALL_SHUTDOWN_S"] = "1";  // below the (default 60 s) warning threshold
  ThreadedJob job(3, extra);
  TFRING_ASSERT_OK(job.InitAll());
  auto t0 = std::chrono::steady_clock::now();
  Completion stuck = Submit(job[1], Allreduce("stuck", FilledInput(job, 1, 2), job.Alloc<float>(2), 2));
  EXPECT_TRUE(HasError(stuck.Wait(kOpTimeoutS), ErrorCode::kTimeout,
                       {"'stuck'", "TFRING_STALL_SHUTDOWN_S", "submitted by rank(s) 1",
                        "missing from rank(s) 0, 2"}));
  EXPECT_LT(SecondsSince(t0), 5.0);
  // Every rank is now broken with that cause.
  for (int r : {0, 2}) {
    float x = 1, y;
    Completion later;
    Submission s = Allreduce("later", &x, &y, 1);
    s.done = later.Callback();
    Status enq = job[r].Enqueue(std::move(s));
    Status st = enq.ok() ? later.Wait(kOpTimeoutS) : enq;
    EXPECT_TRUE(HasError(st, ErrorCode::kTimeout, {"'stuck'"})) << "rank " << r;
  }
}

TEST_P(RuntimeJobTest, StallWarningNamesTheMissingRanks) {
  auto extra = Transport();
  extra["TFRING_STALL_WARNING_S"] = "1";
  extra["TFRING_LOG_LEVEL"] = "warning";
  ThreadedJob job(3, extra);
  TFRING_ASSERT_OK(job.InitAll());
  ::testing::internal::CaptureStderr();
  std::vector<Completion> done;
  done.push_back(Submit(job[0], Allreduce("late", FilledInput(job, 0, 2), job.Alloc<float>(2), 2)));
  std::this_thread::sleep_for(std::chrono::milliseconds(2600));
  for (int r = 1; r < 3; ++r) {
    done.push_back(Submit(job[r], Allreduce("late", FilledInput(job, r, 2), job.Alloc<float>(2), 2)));
  }
  for (auto& d : done) TFRING_EXPECT_OK(d.Wait(kOpTimeoutS));  // a warning, not an error
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("'late' waited"), std::string::npos) << err;
  EXPECT_NE(err.find("submitted by rank(s) 0, missing from rank(s) 1, 2"), std::string::npos) << err;
  EXPECT_NE(err.find("TFRING_STALL_WARNING_S"), std::string::npos) << err;
}

INSTANTIATE_TEST_SUITE_P(Transports, RuntimeJobTest, JobSetups(), SetupName);

}  // namespace
}  // namespace tfring
