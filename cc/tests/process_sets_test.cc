// Process sets (process_sets.h): the table, rank 0's coordinator per set (completion,
// validation, fusion, join, stalls), the wire format of the set fields, and jobs of 3 and
// 4 ranks (threads) running every collective on disjoint and overlapping sets at once,
// checked against a reference computed here; plus the enqueue-time errors.
#include "control/process_sets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "control/coordinator.h"
#include "control/messages.h"
#include "control/response_cache.h"
#include "runtime/runtime.h"
#include "runtime_job.h"
#include "test_util.h"

namespace tfring {
namespace {

using testing_util::CacheIdsOf;
using testing_util::Completion;
using testing_util::FilledInput;
using testing_util::HasError;
using testing_util::Input;
using testing_util::kOpTimeoutS;
using testing_util::NamesOf;
using testing_util::Submit;
using testing_util::ThreadedJob;

// ---- the table -----------------------------------------------------------------------

TEST(ProcessSetTableTest, AddSortsLooksUpAndRemoves) {
  ProcessSetTable t;
  TFRING_ASSERT_OK(t.Add(1, {2, 0}, 3));
  std::vector<int32_t> m;
  ASSERT_TRUE(t.Members(1, &m));
  EXPECT_EQ(m, (std::vector<int32_t>{0, 2}));
  EXPECT_FALSE(t.Members(2, &m));
  EXPECT_EQ(t.Ids(), (std::vector<int32_t>{1}));
  TFRING_ASSERT_OK(t.Remove(1));
  EXPECT_FALSE(t.Members(1, &m));
  EXPECT_TRUE(HasError(t.Remove(1), ErrorCode::kInvalidArgument, {"id 1", "not registered"}));
}

TEST(ProcessSetTableTest, BadSetsAreRefusedWithTheReason) {
  ProcessSetTable t;
  EXPECT_TRUE(HasError(t.Add(0, {0}, 2), ErrorCode::kInvalidArgument, {"id 0", "global"}));
  EXPECT_TRUE(HasError(t.Add(1, {}, 2), ErrorCode::kInvalidArgument, {"at least one rank"}));
  EXPECT_TRUE(HasError(t.Add(1, {0, 2}, 2), ErrorCode::kInvalidArgument, {"[0, 2]", "rank 2", "0..1"}));
  EXPECT_TRUE(HasError(t.Add(1, {1, 1}, 2), ErrorCode::kInvalidArgument, {"rank 1 twice"}));
  TFRING_ASSERT_OK(t.Add(1, {1}, 2));
  EXPECT_TRUE(HasError(t.Add(1, {0}, 2), ErrorCode::kInvalidArgument, {"already registered", "[1]"}));
  EXPECT_TRUE(HasError(t.Remove(0), ErrorCode::kInvalidArgument, {"global", "cannot be removed"}));
}

// ---- the coordinator -----------------------------------------------------------------

Request OnSet(const std::string& name, int32_t set, std::vector<int64_t> shape = {4},
              OpType op = OpType::kAllreduce) {
  Request r;
  r.name = name;
  r.attrs.op = op;
  r.attrs.dtype = DataType::kFloat32;
  r.shape = std::move(shape);
  r.attrs.process_set_id = set;
  return r;
}

class SetCoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TFRING_ASSERT_OK(sets_.Add(1, {0, 2}, 3));
    TFRING_ASSERT_OK(sets_.Add(2, {1}, 3));
  }
  ProcessSetTable sets_;
};

TEST_F(SetCoordinatorTest, ReadyWhenEveryMemberSubmittedAndCarriesTheMembers) {
  Coordinator c(3, 1 << 20, /*cache_capacity=*/16, &sets_);
  c.Add(0, OnSet("a", 1));
  EXPECT_FALSE(c.HasReady());
  c.Add(2, OnSet("a", 1));
  ASSERT_TRUE(c.HasReady());  // rank 1 is not in the set: not waited for
  auto out = c.TakeReady();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Response::Kind::kCollective);
  EXPECT_EQ(out[0].attrs.process_set_id, 1);
  EXPECT_EQ(out[0].members, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(CacheIdsOf(out[0]), std::vector<int32_t>{-1});  // no cache ids outside the global set
  EXPECT_TRUE(out[0].Includes(2));
  EXPECT_FALSE(out[0].Includes(1));
  // A one-rank set is ready at once.
  c.Add(1, OnSet("b", 2));
  out = c.TakeReady();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].members, (std::vector<int32_t>{1}));
  EXPECT_FALSE(c.HasPartial());
}

TEST_F(SetCoordinatorTest, DisjointSetsMayUseTheSameNameAtOnce) {
  Coordinator c(3, 1 << 20, 0, &sets_);
  c.Add(0, OnSet("grad", 1));
  c.Add(1, OnSet("grad", 2, {7}));  // another set, another shape: no mismatch
  c.Add(2, OnSet("grad", 1));
  auto out = c.TakeReady();
  ASSERT_EQ(out.size(), 2u);
  for (const auto& r : out) {
    EXPECT_EQ(r.kind, Response::Kind::kCollective) << r.error_message;
    EXPECT_EQ(NamesOf(r), (std::vector<std::string>{"grad"}));
  }
  EXPECT_EQ(out[0].attrs.process_set_id, 2);  // ready first: its one member submitted
  EXPECT_EQ(out[1].attrs.process_set_id, 1);
  EXPECT_EQ(out[1].members, (std::vector<int32_t>{0, 2}));
}

TEST_F(SetCoordinatorTest, MembersOnlyAreComparedAndNamedAsGlobalRanks) {
  Coordinator c(3, 1 << 20, 0, &sets_);
  c.Add(0, OnSet("a", 1, {4}));
  c.Add(2, OnSet("a", 1, {5}));
  auto out = c.TakeReady();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Response::Kind::kError);
  EXPECT_EQ(out[0].error_code, ErrorCode::kMismatch);
  EXPECT_NE(out[0].error_message.find("rank 0 has [4], rank 2 has [5]"), std::string::npos) << out[0].error_message;
}

TEST_F(SetCoordinatorTest, AllgatherAndAlltoallSizesAreIndexedByMember) {
  Coordinator c(3, 1 << 20, 0, &sets_);
  c.Add(2, OnSet("g", 1, {3, 2}, OpType::kAllgather));
  c.Add(0, OnSet("g", 1, {1, 2}, OpType::kAllgather));
  Request a0 = OnSet("x", 1, {3}, OpType::kAlltoall), a2 = a0;
  a0.splits = {1, 2};
  a2.splits = {3, 0};
  c.Add(0, a0);
  c.Add(2, a2);
  auto out = c.TakeReady();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].sizes, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(out[1].sizes, (std::vector<int64_t>{1, 2, 3, 0}));
}

TEST_F(SetCoordinatorTest, FusionStaysWithinOneSet) {
  ASSERT_TRUE(sets_.Add(3, {0, 1, 2}, 3).ok());
  Coordinator c(3, 1 << 20, 0, &sets_);
  for (int r : {0, 2}) c.Add(r, OnSet("s1", 1));
  for (int r : {0, 1, 2}) c.Add(r, OnSet("s3", 3));  // same ranks as the global set
  for (int r : {0, 1, 2}) c.Add(r, OnSet("g", 0));
  for (int r : {0, 2}) c.Add(r, OnSet("s1b", 1));
  auto out = c.TakeReady();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(NamesOf(out[0]), (std::vector<std::string>{"s1", "s1b"}));
  EXPECT_EQ(out[0].attrs.process_set_id, 1);
  EXPECT_EQ(NamesOf(out[1]), (std::vector<std::string>{"s3"}));
  EXPECT_EQ(NamesOf(out[2]), (std::vector<std::string>{"g"}));
  EXPECT_EQ(out[2].attrs.process_set_id, 0);
  EXPECT_TRUE(out[2].members.empty());
}

TEST_F(SetCoordinatorTest, UnknownSetOrOutsiderIsAnErrorResponse) {
  Coordinator c(3, 1 << 20, 0, &sets_);
  c.Add(1, OnSet("u", 9));
  auto out = c.TakeReady();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].error_code, ErrorCode::kInvalidArgument);
  EXPECT_NE(out[0].error_message.find("process set id 9"), std::string::npos) << out[0].error_message;
  c.Add(1, OnSet("o", 1));
  out = c.TakeReady();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].error_code, ErrorCode::kInvalidArgument);
  EXPECT_NE(out[0].error_message.find("rank 1 is not a member of process set 1 [0, 2]"), std::string::npos)
      << out[0].error_message;
}

TEST_F(SetCoordinatorTest, ASetsTensorFailsWhenAMemberJoins) {
  Coordinator c(3, 1 << 20, 0, &sets_);
  c.Add(0, OnSet("a", 1));
  Request join;
  join.name = "join";
  join.attrs.op = OpType::kJoin;
  join.attrs.dtype = DataType::kInt32;
  c.Add(2, join);  // rank 2 will never submit "a"
  auto out = c.TakeReady();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tensors[0].name, "a");
  EXPECT_EQ(out[0].error_code, ErrorCode::kPrecondition);
  EXPECT_NE(out[0].error_message.find("global process set only"), std::string::npos) << out[0].error_message;
  // Requested after the join: fails at once too.
  c.Add(0, OnSet("b", 1));
  out = c.TakeReady();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].error_code, ErrorCode::kPrecondition);
}

TEST_F(SetCoordinatorTest, StallNamesMissingMembersOnly) {
  Coordinator c(3, 1 << 20, 0, &sets_);
  auto t0 = Coordinator::Clock::now();
  c.Add(0, OnSet("slow", 1), t0);
  auto stalled = c.Stalled(1, t0 + std::chrono::seconds(5));
  ASSERT_EQ(stalled.size(), 1u);
  EXPECT_EQ(stalled[0].submitted_ranks, (std::vector<int>{0}));
  EXPECT_EQ(stalled[0].missing_ranks, (std::vector<int>{2}));
}

TEST(ProcessSetCacheTest, ASetsRequestIsNeverSentAsACachedGlobalOne) {
  RequestCache cache;
  Request global = OnSet("grad", 0);
  TFRING_ASSERT_OK(cache.Remember(5, global));
  EXPECT_EQ(cache.Lookup(global), 5);
  EXPECT_EQ(cache.Lookup(OnSet("grad", 1)), -1);  // same name and shape, another set
}

TEST(ProcessSetMessagesTest, SetFieldsRoundTripAndBadMembersAreRefused) {
  ControlMessage m;
  m.kind = ControlKind::kResponses;
  Response r;
  r.tensors = {{"t"}};
  r.attrs.process_set_id = 4;
  r.members = {1, 3};
  m.responses.push_back(r);
  ControlMessage back;
  TFRING_ASSERT_OK(DecodeControl(EncodeControl(m), 4, &back));
  ASSERT_EQ(back.responses.size(), 1u);
  EXPECT_EQ(back.responses[0].attrs.process_set_id, 4);
  EXPECT_EQ(back.responses[0].members, (std::vector<int32_t>{1, 3}));
  m.responses[0].members = {3, 1};  // unsorted
  EXPECT_FALSE(DecodeControl(EncodeControl(m), 4, &back).ok());
  m.responses[0].members = {1, 4};  // outside the job
  EXPECT_FALSE(DecodeControl(EncodeControl(m), 4, &back).ok());
  m.responses[0].members = {};  // a set id without members
  EXPECT_FALSE(DecodeControl(EncodeControl(m), 4, &back).ok());
  ControlMessage q;
  Request req = OnSet("q", 2);
  q.requests.push_back(req);
  TFRING_ASSERT_OK(DecodeControl(EncodeControl(q), 4, &back));
  ASSERT_EQ(back.requests.size(), 1u);
  EXPECT_EQ(back.requests[0].attrs.process_set_id, 2);
}

// ---- jobs ------------------------------------------------------------------------------

// One rank's submissions of every collective on one set, and their expected results.
struct SetOps {
  int32_t id = 0;
  std::vector<int32_t> members;
  std::vector<Completion> done;
  float* sum = nullptr;
  float* avg = nullptr;
  std::vector<int64_t> gather_shape, a2a_shape, a2a_splits;
  int64_t* gathered = nullptr;
  int64_t* a2a = nullptr;
  double* bcast = nullptr;
  float* rs = nullptr;
};

constexpr int64_t kN = 9;       // allreduce elements
constexpr int64_t kRsRows = 5;  // reducescatter rows of 2 floats

Submission Make(const std::string& name, OpType op, DataType dtype, std::vector<int64_t> shape, int32_t set) {
  Submission s;
  s.request.name = name;
  s.request.attrs.op = op;
  s.request.attrs.dtype = dtype;
  s.request.shape = std::move(shape);
  s.request.attrs.process_set_id = set;
  return s;
}

// Member `me` (index i in `ops.members`) submits, under names prefixed by the set id:
// Sum and Average allreduces, an allgather of i+1 rows, a broadcast from the last member,
// an alltoall of (p+i)%2+1 rows to member p, a reducescatter of kRsRows rows.
void SubmitAllOps(ThreadedJob& job, int me, SetOps& ops, const std::string& p) {
  const int n = static_cast<int>(ops.members.size());
  const int i = static_cast<int>(std::find(ops.members.begin(), ops.members.end(), me) - ops.members.begin());
  Runtime& rt = job[me];
  ops.sum = job.Alloc<float>(kN);
  Submission s = Make(p + "sum", OpType::kAllreduce, DataType::kFloat32, {kN}, ops.id);
  s.input = FilledInput(job, me, kN);
  s.output = ops.sum;
  ops.done.push_back(Submit(rt, std::move(s)));
  ops.avg = job.Alloc<float>(kN);
  Submission a = Make(p + "avg", OpType::kAllreduce, DataType::kFloat32, {kN}, ops.id);
  a.request.attrs.reduce_op = ReduceOp::kAverage;
  a.input = FilledInput(job, me, kN);
  a.output = ops.avg;
  ops.done.push_back(Submit(rt, std::move(a)));
  Submission g = Make(p + "gather", OpType::kAllgather, DataType::kInt64, {i + 1, 2}, ops.id);
  int64_t* gin = job.Alloc<int64_t>(2 * (i + 1));
  for (int k = 0; k < 2 * (i + 1); ++k) gin[k] = 100 * me + k;
  g.input = gin;
  g.allocate_output = [&job, &ops](const std::vector<int64_t>& shape, void** data) {
    ops.gather_shape = shape;
    ops.gathered = job.Alloc<int64_t>(shape[0] * shape[1]);
    *data = ops.gathered;
    return Status::OK();
  };
  ops.done.push_back(Submit(rt, std::move(g)));
  Submission b = Make(p + "bcast", OpType::kBroadcast, DataType::kFloat64, {5}, ops.id);
  b.request.attrs.root = ops.members.back();  // a global rank
  double* bin = job.Alloc<double>(5);
  for (int k = 0; k < 5; ++k) bin[k] = me * 1000 + k;
  ops.bcast = job.Alloc<double>(5);
  b.input = bin;
  b.output = ops.bcast;
  ops.done.push_back(Submit(rt, std::move(b)));
  Submission x = Make(p + "a2a", OpType::kAlltoall, DataType::kInt64, {}, ops.id);
  int64_t rows = 0;
  for (int q = 0; q < n; ++q) {
    x.request.splits.push_back((q + i) % 2 + 1);
    rows += (q + i) % 2 + 1;
  }
  x.request.shape = {rows, 1};
  int64_t* xin = job.Alloc<int64_t>(rows);
  int64_t k = 0;
  for (int q = 0; q < n; ++q)
    for (int c = 0; c < (q + i) % 2 + 1; ++c) xin[k++] = 10 * me + q;
  x.input = xin;
  x.allocate_output = [&job, &ops](const std::vector<int64_t>& shape, void** data) {
    ops.a2a_shape = shape;
    ops.a2a = job.Alloc<int64_t>(shape[0]);
    *data = ops.a2a;
    return Status::OK();
  };
  x.on_received_splits = [&ops](const std::vector<int64_t>& got) { ops.a2a_splits = got; };
  ops.done.push_back(Submit(rt, std::move(x)));
  Submission r = Make(p + "rs", OpType::kReducescatter, DataType::kFloat32, {kRsRows, 2}, ops.id);
  r.input = FilledInput(job, me, kRsRows * 2);
  ops.rs = job.Alloc<float>(ReducescatterRows(kRsRows, n, i) * 2);
  r.output = ops.rs;
  ops.done.push_back(Submit(rt, std::move(r)));
}

void CheckAllOps(int me, SetOps& ops) {
  for (auto& d : ops.done) TFRING_ASSERT_OK(d.Wait(kOpTimeoutS));
  const auto& m = ops.members;
  const int n = static_cast<int>(m.size());
  const int i = static_cast<int>(std::find(m.begin(), m.end(), me) - m.begin());
  const std::string where = "set " + std::to_string(ops.id) + " rank " + std::to_string(me);
  auto member_sum = [&](int64_t k) {
    float s = 0;
    for (int32_t g : m) s += Input(g, k);
    return s;
  };
  for (int64_t k = 0; k < kN; ++k) {
    EXPECT_EQ(ops.sum[k], member_sum(k)) << where << " element " << k;
    EXPECT_FLOAT_EQ(ops.avg[k], member_sum(k) / n) << where << " element " << k;
  }
  std::vector<int64_t> want_gather;
  for (int q = 0; q < n; ++q)
    for (int k = 0; k < 2 * (q + 1); ++k) want_gather.push_back(100 * m[q] + k);
  ASSERT_EQ(ops.gather_shape, (std::vector<int64_t>{static_cast<int64_t>(want_gather.size()) / 2, 2})) << where;
  EXPECT_EQ(std::vector<int64_t>(ops.gathered, ops.gathered + want_gather.size()), want_gather) << where;
  for (int k = 0; k < 5; ++k) EXPECT_EQ(ops.bcast[k], m.back() * 1000 + k) << where;
  std::vector<int64_t> want_splits, want_a2a;
  for (int q = 0; q < n; ++q) {
    want_splits.push_back((i + q) % 2 + 1);
    for (int c = 0; c < (i + q) % 2 + 1; ++c) want_a2a.push_back(10 * m[q] + i);
  }
  EXPECT_EQ(ops.a2a_splits, want_splits) << where;
  ASSERT_EQ(ops.a2a_shape, (std::vector<int64_t>{static_cast<int64_t>(want_a2a.size()), 1})) << where;
  EXPECT_EQ(std::vector<int64_t>(ops.a2a, ops.a2a + want_a2a.size()), want_a2a) << where;
  int64_t first_row = 0;
  for (int q = 0; q < i; ++q) first_row += ReducescatterRows(kRsRows, n, q);
  for (int64_t k = 0; k < ReducescatterRows(kRsRows, n, i) * 2; ++k) {
    EXPECT_EQ(ops.rs[k], member_sum(first_row * 2 + k)) << where << " element " << k;
  }
}

// Registers `sets` (id -> members) on every rank, then runs every collective on all of them
// at once, each rank submitting its sets in a rank-dependent order. With `same_names`
// every set uses the same tensor names (only for sets no rank shares).
void RunSetsConcurrently(int size, bool shm, const std::map<int32_t, std::vector<int32_t>>& sets,
                         bool same_names = false) {
  ThreadedJob job(size, {{"TFRING_SHM", shm ? "1" : "0"}});
  TFRING_ASSERT_OK(job.InitAll());
  for (int r = 0; r < size; ++r) {
    for (const auto& kv : sets) TFRING_ASSERT_OK(job[r].AddProcessSet(kv.first, kv.second));
  }
  std::vector<std::vector<std::unique_ptr<SetOps>>> per_rank(size);
  for (int r = 0; r < size; ++r) {
    std::vector<int32_t> ids;
    for (const auto& kv : sets) {
      if (std::count(kv.second.begin(), kv.second.end(), r)) ids.push_back(kv.first);
    }
    if (r % 2) std::reverse(ids.begin(), ids.end());  // members submit sets in other orders
    for (int32_t id : ids) {
      auto ops = std::make_unique<SetOps>();
      ops->id = id;
      ops->members = sets.at(id);
      SubmitAllOps(job, r, *ops, same_names ? "t/" : "set" + std::to_string(id) + "/");
      per_rank[r].push_back(std::move(ops));
    }
  }
  for (int r = 0; r < size; ++r) {
    for (auto& ops : per_rank[r]) CheckAllOps(r, *ops);
  }
  // The global set still works afterwards.
  testing_util::ExpectAllreduceWorks(job, "global-after");
}

class ProcessSetJobTest : public ::testing::TestWithParam<bool> {};  // shared memory?

TEST_P(ProcessSetJobTest, ThreeRanksDisjointAndOverlappingSets) {
  RunSetsConcurrently(3, GetParam(), {{1, {0, 2}}, {2, {1}}, {3, {0, 1}}});
}

TEST_P(ProcessSetJobTest, FourRanksTwoDisjointPairsAndAnOverlappingTriple) {
  RunSetsConcurrently(4, GetParam(), {{1, {0, 2}}, {2, {1, 3}}, {3, {1, 2, 3}}});
}

TEST_P(ProcessSetJobTest, DisjointSetsRunTheSameNamesAtOnce) {
  RunSetsConcurrently(4, GetParam(), {{1, {0, 2}}, {2, {1, 3}}}, /*same_names=*/true);
}

TEST_P(ProcessSetJobTest, AnErrorOnOneSetLeavesTheSameNameOnAnotherSetAlone) {
  ThreadedJob job(3, {{"TFRING_SHM", GetParam() ? "1" : "0"}});
  TFRING_ASSERT_OK(job.InitAll());
  for (int r = 0; r < 3; ++r) {
    TFRING_ASSERT_OK(job[r].AddProcessSet(1, {0, 2}));
    TFRING_ASSERT_OK(job[r].AddProcessSet(2, {1}));
  }
  std::vector<Completion> done;
  for (int r = 0; r < 3; ++r) {
    const int64_t n = r == 2 ? 5 : 4;  // ranks 0 and 2 disagree on the shape in set 1
    Submission s = testing_util::Allreduce("g", FilledInput(job, r, n), job.Alloc<float>(n), n);
    s.request.attrs.process_set_id = r == 1 ? 2 : 1;
    done.push_back(Submit(job[r], std::move(s)));
  }
  EXPECT_TRUE(HasError(done[0].Wait(kOpTimeoutS), ErrorCode::kMismatch, {"'g'", "rank 0 has [4], rank 2 has [5]"}));
  EXPECT_TRUE(HasError(done[2].Wait(kOpTimeoutS), ErrorCode::kMismatch, {"'g'"}));
  TFRING_EXPECT_OK(done[1].Wait(kOpTimeoutS));
}

TEST_P(ProcessSetJobTest, EnqueueErrorsNameTheTensorTheSetAndTheRank) {
  ThreadedJob job(3, {{"TFRING_SHM", GetParam() ? "1" : "0"}});
  TFRING_ASSERT_OK(job.InitAll());
  for (int r = 0; r < 3; ++r) TFRING_ASSERT_OK(job[r].AddProcessSet(1, {0, 2}));
  Runtime& rt = job[1];
  float* in = FilledInput(job, 1, 6);
  float* out = job.Alloc<float>(6);
  Completion never;
  auto try_enqueue = [&](Runtime& on, Submission s) {
    s.done = never.Callback();
    return on.Enqueue(std::move(s));
  };
  auto allreduce = [&](const std::string& name, int32_t set) {
    Submission s = testing_util::Allreduce(name, in, out, 6);
    s.request.attrs.process_set_id = set;
    return s;
  };
  EXPECT_TRUE(HasError(try_enqueue(rt, allreduce("outsider", 1)), ErrorCode::kInvalidArgument,
                       {"'outsider'", "rank 1", "not a member of process set 1 [0, 2]"}));
  EXPECT_TRUE(HasError(try_enqueue(rt, allreduce("unknown", 7)), ErrorCode::kInvalidArgument,
                       {"'unknown'", "process set id 7", "not registered"}));
  Submission b = allreduce("root", 1);
  b.request.attrs.op = OpType::kBroadcast;
  b.request.attrs.root = 1;  // a global rank outside the set
  EXPECT_TRUE(HasError(try_enqueue(job[0], b), ErrorCode::kInvalidArgument,
                       {"'root'", "root_rank=1", "not a member of process set 1"}));
  Submission a = allreduce("splits", 1);
  a.request.attrs.op = OpType::kAlltoall;
  a.allocate_output = [](const std::vector<int64_t>&, void**) { return Status::OK(); };
  a.request.splits = {2, 2, 2};  // the job's size, not the set's
  EXPECT_TRUE(HasError(try_enqueue(job[2], a), ErrorCode::kInvalidArgument,
                       {"'splits'", "3 entries", "process set 1 has 2 ranks"}));
  Submission g = allreduce("gpu", 1);
  g.request.attrs.device = 0;
  EXPECT_TRUE(HasError(try_enqueue(job[0], g), ErrorCode::kUnimplemented, {"'gpu'", "process sets", "CPU"}));
  // Removed sets are unknown again; the global set cannot be removed.
  for (int r = 0; r < 3; ++r) TFRING_ASSERT_OK(job[r].RemoveProcessSet(1));
  EXPECT_TRUE(HasError(try_enqueue(job[0], allreduce("removed", 1)), ErrorCode::kInvalidArgument,
                       {"process set id 1", "not registered"}));
  EXPECT_TRUE(HasError(job[0].RemoveProcessSet(0), ErrorCode::kInvalidArgument, {"global"}));
  std::vector<int32_t> members;
  TFRING_ASSERT_OK(job[0].ProcessSetMembers(0, &members));
  EXPECT_EQ(members, (std::vector<int32_t>{0, 1, 2}));
  // Positions, for the rows a reducescatter keeps: the index in the set, -1 outside it.
  for (int r = 0; r < 3; ++r) TFRING_ASSERT_OK(job[r].AddProcessSet(2, {1, 2}));
  int rank = 7, size = 0;
  TFRING_ASSERT_OK(job[2].ProcessSetPosition(2, &rank, &size));
  EXPECT_EQ(rank, 1);
  EXPECT_EQ(size, 2);
  TFRING_ASSERT_OK(job[0].ProcessSetPosition(2, &rank, &size));
  EXPECT_EQ(rank, -1);
  TFRING_ASSERT_OK(job[1].ProcessSetPosition(0, &rank, &size));
  EXPECT_EQ(rank, 1);
  EXPECT_EQ(size, 3);
  EXPECT_TRUE(HasError(job[0].ProcessSetPosition(9, &rank, &size), ErrorCode::kInvalidArgument, {"id 9"}));
}

INSTANTIATE_TEST_SUITE_P(Transports, ProcessSetJobTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "shm" : "tcp"; });

}  // namespace
}  // namespace tfring
