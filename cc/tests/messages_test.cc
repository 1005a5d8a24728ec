// Coordinator messages: encode/decode round trips, and hostile input (truncated, mutated,
// random, oversized counts) that must be refused with kInvalidArgument, never crash.
#include "control/messages.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "test_util.h"

namespace tfring {
namespace {

using testing_util::HasError;

constexpr int kWorld = 4;

Request MakeRequest(std::mt19937& rng, int i) {
  Request r;
  r.name = "layer" + std::to_string(i) + "/kernel:0";
  r.attrs.op = static_cast<OpType>(rng() % kNumOpTypes);
  r.attrs.dtype = static_cast<DataType>(rng() % kNumDataTypes);
  r.attrs.reduce_op = static_cast<ReduceOp>(rng() % kNumReduceOps);
  r.attrs.root = static_cast<int32_t>(rng() % kWorld);
  r.attrs.device = static_cast<int32_t>(rng() % 3) - 1;
  r.attrs.prescale = 0.5 * (rng() % 5);
  r.attrs.postscale = 1.0 / (1 + rng() % 7);
  for (int d = 0, n = rng() % 5; d < n; ++d) r.shape.push_back(rng() % 1000);
  if (r.attrs.op == OpType::kAlltoall) {
    for (int p = 0; p < kWorld; ++p) r.splits.push_back(rng() % 10);
  }
  r.attrs.process_set_id = static_cast<int32_t>(rng() % 3);  // 0: the global set
  return r;
}

Response MakeResponse(std::mt19937& rng, int i) {
  Response r;
  r.kind = (rng() % 4 == 0) ? Response::Kind::kError : Response::Kind::kCollective;
  r.attrs.op = static_cast<OpType>(rng() % kNumOpTypes);
  for (int n = 0, k = 1 + rng() % 4; n < k; ++n) r.tensors.push_back({"t" + std::to_string(i) + "_" + std::to_string(n)});
  r.attrs.dtype = static_cast<DataType>(rng() % kNumDataTypes);
  r.attrs.reduce_op = static_cast<ReduceOp>(rng() % kNumReduceOps);
  r.attrs.root = static_cast<int32_t>(rng() % kWorld);
  r.attrs.device = -1;
  r.attrs.prescale = 2.0;
  r.attrs.postscale = 0.25;
  for (int n = 0, k = rng() % (kWorld * kWorld + 1); n < k; ++n) r.sizes.push_back(static_cast<int64_t>(rng()) << 8);
  if (rng() % 2) {
    for (int p = 0; p < kWorld; ++p) r.ready_wait_s.push_back(static_cast<double>(rng() % 1000) / 8);
  }
  if (rng() % 2) {  // a process set: its id and sorted members
    r.attrs.process_set_id = 1 + static_cast<int32_t>(rng() % 5);
    for (int p = 0; p < kWorld; ++p) {
      if (rng() % 2 || (p == kWorld - 1 && r.members.empty())) r.members.push_back(p);
    }
  }
  if (r.kind == Response::Kind::kError) {
    r.error_code = ErrorCode::kMismatch;
    r.error_message = "tensor 't': ranks disagree on the dtype";
  } else if (rng() % 2) {  // cache ids: none, announced, or known (sent as the id alone)
    for (auto& t : r.tensors) {
      const int form = rng() % 3;
      t.cache_id = form == 0 ? -1 : static_cast<int32_t>(rng() % 5000);
      t.cache_id_is_new = form == 1;
    }
  }
  return r;
}

void ExpectSameAttrs(const CollectiveAttrs& a, const CollectiveAttrs& b) {
  EXPECT_EQ(a.op, b.op);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.reduce_op, b.reduce_op);
  EXPECT_EQ(a.root, b.root);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.prescale, b.prescale);
  EXPECT_EQ(a.postscale, b.postscale);
  EXPECT_EQ(a.process_set_id, b.process_set_id);
  EXPECT_TRUE(a == b);
}

void ExpectSameRequest(const Request& a, const Request& b) {
  EXPECT_EQ(a.name, b.name);
  ExpectSameAttrs(a.attrs, b.attrs);
  EXPECT_EQ(a.shape, b.shape);
  EXPECT_EQ(a.splits, b.splits);
}

// `decoded` came from `sent` over the wire: names sent as a known cache id arrive empty.
void ExpectSameResponse(const Response& decoded, const Response& sent) {
  const Response& a = decoded;
  const Response& b = sent;
  EXPECT_EQ(a.kind, b.kind);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < b.tensors.size(); ++i) {
    const Response::Tensor& t = b.tensors[i];
    EXPECT_EQ(a.tensors[i].cache_id, t.cache_id) << i;
    EXPECT_EQ(a.tensors[i].name, t.cache_id >= 0 && !t.cache_id_is_new ? "" : t.name) << i;
    EXPECT_EQ(a.tensors[i].cache_id_is_new, t.cache_id >= 0 && t.cache_id_is_new) << i;
  }
  ExpectSameAttrs(a.attrs, b.attrs);
  EXPECT_EQ(a.sizes, b.sizes);
  EXPECT_EQ(a.ready_wait_s, b.ready_wait_s);
  EXPECT_EQ(a.members, b.members);
  EXPECT_EQ(a.error_code, b.error_code);
  EXPECT_EQ(a.error_message, b.error_message);
}

std::vector<ControlMessage> SampleMessages() {
  std::mt19937 rng(1);
  std::vector<ControlMessage> out;
  ControlMessage req;
  req.kind = ControlKind::kRequests;
  for (int i = 0; i < 6; ++i) req.requests.push_back(MakeRequest(rng, i));
  req.cached_requests = {0, 3, 7, 8, 9, 200};
  out.push_back(req);
  ControlMessage only_ids;  // a steady-state step: nothing but a bit vector
  only_ids.kind = ControlKind::kRequests;
  for (int32_t id = 0; id < 161; id += 1 + id % 3) only_ids.cached_requests.push_back(id);
  out.push_back(only_ids);
  ControlMessage resp;
  resp.kind = ControlKind::kResponses;
  for (int i = 0; i < 6; ++i) resp.responses.push_back(MakeResponse(rng, i));
  out.push_back(resp);
  ControlMessage shut;
  shut.kind = ControlKind::kShutdown;
  out.push_back(shut);
  ControlMessage hello;
  hello.kind = ControlKind::kHello;
  out.push_back(hello);
  ControlMessage abort;
  abort.kind = ControlKind::kAbort;
  abort.abort_origin = 2;
  abort.abort_code = ErrorCode::kPeerLost;
  abort.abort_message = "rank 2 failed: rank 3 is gone";
  out.push_back(abort);
  return out;
}

TEST(MessagesTest, EveryKindRoundTrips) {
  for (const auto& m : SampleMessages()) {
    ControlMessage back;
    ASSERT_TRUE(DecodeControl(EncodeControl(m), kWorld, &back).ok()) << int(m.kind);
    EXPECT_EQ(back.kind, m.kind);
    ASSERT_EQ(back.requests.size(), m.requests.size());
    for (size_t i = 0; i < m.requests.size(); ++i) ExpectSameRequest(back.requests[i], m.requests[i]);
    EXPECT_EQ(back.cached_requests, m.cached_requests);
    ASSERT_EQ(back.responses.size(), m.responses.size());
    for (size_t i = 0; i < m.responses.size(); ++i) ExpectSameResponse(back.responses[i], m.responses[i]);
    if (m.kind == ControlKind::kAbort) {
      EXPECT_EQ(back.abort_origin, m.abort_origin);
      EXPECT_EQ(back.abort_code, m.abort_code);
      EXPECT_EQ(back.abort_message, m.abort_message);
    }
  }
}

TEST(MessagesTest, EmptyListsAndExtremeValuesRoundTrip) {
  ControlMessage m;
  m.kind = ControlKind::kRequests;
  ControlMessage back;
  ASSERT_TRUE(DecodeControl(EncodeControl(m), 1, &back).ok());
  EXPECT_TRUE(back.requests.empty());

  Request r;
  r.name = std::string(4096, 'n');  // the longest name accepted
  r.shape = std::vector<int64_t>(64, 0);  // the most dims accepted, zero-sized
  r.shape[0] = std::numeric_limits<int64_t>::max();
  r.attrs.prescale = -0.0;
  r.attrs.postscale = std::numeric_limits<double>::denorm_min();
  m.requests = {r};
  ASSERT_TRUE(DecodeControl(EncodeControl(m), 1, &back).ok());
  ExpectSameRequest(back.requests[0], r);
}

// ResNet-50 has 161 gradient tensors: a steady-state step's requests, all cached, fit in a
// bit vector of 21 bytes; in full they take ~100 bytes each.
TEST(MessagesTest, CachedRequestsTravelAsABitVector) {
  ControlMessage step;  // a cached step of 161 tensors, for a whole subtree
  step.kind = ControlKind::kRequests;
  for (int32_t id = 0; id < 161; ++id) step.subtree_cached.push_back(id);
  std::string bytes = EncodeControl(step);
  // magic, kind, 0 requests, no own ids, 0 relayed, the bit vector
  EXPECT_LE(bytes.size(), 4u + 1 + 4 + 4 + 4 + 4 + 21);
  ControlMessage back;
  ASSERT_TRUE(DecodeControl(bytes, kWorld, &back).ok());
  EXPECT_EQ(back.subtree_cached, step.subtree_cached);
  EXPECT_TRUE(back.cached_requests.empty());
  step.cached_requests.swap(step.subtree_cached);  // the same ids, reported as the sender's own
  bytes = EncodeControl(step);
  EXPECT_LE(bytes.size(), 4u + 1 + 4 + 4 + 21 + 4 + 4);
  ASSERT_TRUE(DecodeControl(bytes, kWorld, &back).ok());
  EXPECT_EQ(back.cached_requests, step.cached_requests);
  EXPECT_TRUE(back.subtree_cached.empty());

  Response r;  // a fused response naming 161 known tensors: 5 bytes per name
  for (int32_t id = 0; id < 161; ++id) r.tensors.push_back({"model/dense_" + std::to_string(id) + "/kernel", id, false});
  ControlMessage resp;
  resp.kind = ControlKind::kResponses;
  resp.responses = {r};
  EXPECT_LT(EncodeControl(resp).size(), 161u * 5 + 100);
  ASSERT_TRUE(DecodeControl(EncodeControl(resp), kWorld, &back).ok());
  ASSERT_EQ(back.responses[0].tensors.size(), 161u);
  EXPECT_EQ(back.responses[0].tensors[7].name, "") << "known ids travel without their names";
  EXPECT_EQ(back.responses[0].tensors[7].cache_id, 7);
}

TEST(MessagesTest, RelayedRequestsKeepTheirRanks) {
  auto named = [](const std::string& name) {
    Request r;
    r.name = name;
    r.shape = {2};
    return r;
  };
  ControlMessage m;
  m.kind = ControlKind::kRequests;
  m.requests.push_back(named("own"));
  m.relayed.resize(2);
  m.relayed[0].rank = 3;
  m.relayed[0].requests.push_back(named("from3"));
  m.relayed[1].rank = 2;
  m.relayed[1].cached = {1, 9};
  m.subtree_cached = {4};
  ControlMessage back;
  ASSERT_TRUE(DecodeControl(EncodeControl(m), kWorld, &back).ok());
  ASSERT_EQ(back.requests.size(), 1u);
  ASSERT_EQ(back.relayed.size(), 2u);
  EXPECT_EQ(back.relayed[0].rank, 3);
  ASSERT_EQ(back.relayed[0].requests.size(), 1u);
  EXPECT_EQ(back.relayed[0].requests[0].name, "from3");
  EXPECT_EQ(back.relayed[1].rank, 2);
  EXPECT_EQ(back.relayed[1].cached, (std::vector<int32_t>{1, 9}));
  EXPECT_EQ(back.subtree_cached, (std::vector<int32_t>{4}));
  m.relayed[0].rank = kWorld;  // no such rank
  EXPECT_EQ(DecodeControl(EncodeControl(m), kWorld, &back).code(), ErrorCode::kInvalidArgument);
}

TEST(MessagesTest, DecodeClearsPreviousContents) {
  auto msgs = SampleMessages();
  ControlMessage back;
  ASSERT_TRUE(DecodeControl(EncodeControl(msgs[0]), kWorld, &back).ok());
  ASSERT_TRUE(DecodeControl(EncodeControl(msgs[3]), kWorld, &back).ok());
  EXPECT_EQ(back.kind, ControlKind::kShutdown);
  EXPECT_TRUE(back.requests.empty());
  EXPECT_TRUE(back.cached_requests.empty());
  EXPECT_TRUE(back.responses.empty());
}

TEST(MessagesTest, EveryTruncationIsRefused) {
  for (const auto& m : SampleMessages()) {
    std::string bytes = EncodeControl(m);
    for (size_t len = 0; len < bytes.size(); ++len) {
      ControlMessage back;
      Status st = DecodeControl(bytes.substr(0, len), kWorld, &back);
      ASSERT_TRUE(HasError(st, ErrorCode::kInvalidArgument, {"malformed coordinator message"}))
          << "kind " << int(m.kind) << " cut at " << len << " of " << bytes.size();
    }
  }
}

TEST(MessagesTest, TrailingBytesAreRefused) {
  for (const auto& m : SampleMessages()) {
    ControlMessage back;
    EXPECT_TRUE(HasError(DecodeControl(EncodeControl(m) + "x", kWorld, &back),
                         ErrorCode::kInvalidArgument, {"trailing"}));
  }
}

TEST(MessagesTest, MutatedAndRandomBytesNeverCrash) {
  std::mt19937 rng(1234);
  auto msgs = SampleMessages();
  int accepted = 0, refused = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string bytes = EncodeControl(msgs[iter % msgs.size()]);
    int flips = 1 + rng() % 4;
    for (int f = 0; f < flips; ++f) {
      size_t pos = rng() % bytes.size();
      switch (rng() % 3) {
        case 0: bytes[pos] = static_cast<char>(rng()); break;
        case 1: bytes.erase(pos, 1 + rng() % 8); break;
        case 2: bytes.insert(pos, std::string(1 + rng() % 8, static_cast<char>(rng()))); break;
      }
      if (bytes.empty()) bytes = "x";
    }
    ControlMessage back;
    Status st = DecodeControl(bytes, kWorld, &back);
    if (st.ok()) {
      ++accepted;
      // What is accepted must be sane enough for the runtime to act on.
      for (const auto& r : back.requests) {
        EXPECT_FALSE(r.name.empty());
        EXPECT_GE(r.attrs.root, 0);
        EXPECT_LT(r.attrs.root, kWorld);
        for (int64_t d : r.shape) EXPECT_GE(d, 0);
      }
      for (const auto& r : back.responses) {
        EXPECT_FALSE(r.tensors.empty());
        EXPECT_GE(r.attrs.root, 0);
        EXPECT_LT(r.attrs.root, kWorld);
      }
    } else {
      ++refused;
      EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.ToString();
    }
  }
  EXPECT_GT(refused, 5000) << accepted << " accepted";
  std::string junk;
  for (int iter = 0; iter < 5000; ++iter) {
    junk.resize(rng() % 200);
    for (auto& c : junk) c = static_cast<char>(rng());
    if (junk.size() >= 5 && iter % 2) {  // a valid header makes the body reachable
      uint32_t magic = 0x54465243;
      std::memcpy(&junk[0], &magic, 4);
      junk[4] = static_cast<char>(1 + rng() % 4);
    }
    ControlMessage back;
    Status st = DecodeControl(junk, kWorld, &back);
    if (!st.ok()) {
      EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
    }
  }
}

// Builds a message by hand: magic, kind, then the given body.
std::string Frame(uint8_t kind, const std::string& body) {
  std::string s(4, '\0');
  uint32_t magic = 0x54465243;
  std::memcpy(&s[0], &magic, 4);
  s.push_back(static_cast<char>(kind));
  return s + body;
}

std::string U32(uint32_t v) { return std::string(reinterpret_cast<char*>(&v), 4); }

TEST(MessagesTest, HugeCountsAreRefusedWithoutAllocating) {
  ControlMessage back;
  // 4 billion requests announced, no bytes behind them.
  EXPECT_TRUE(HasError(DecodeControl(Frame(1, U32(0xffffffffu)), kWorld, &back),
                       ErrorCode::kInvalidArgument, {"malformed"}));
  EXPECT_TRUE(HasError(DecodeControl(Frame(2, U32(0xffffffffu)), kWorld, &back),
                       ErrorCode::kInvalidArgument, {"malformed"}));
  // A request whose name claims 4 GiB.
  EXPECT_TRUE(HasError(DecodeControl(Frame(1, U32(1) + U32(0xfffffff0u) + std::string(40, 'a')), kWorld, &back),
                       ErrorCode::kInvalidArgument, {"malformed"}));
}

TEST(MessagesTest, BadHeaderIsRefused) {
  ControlMessage back;
  EXPECT_TRUE(HasError(DecodeControl("", kWorld, &back), ErrorCode::kInvalidArgument, {"bad magic"}));
  EXPECT_TRUE(HasError(DecodeControl("GET / HTTP/1.1\r\n", kWorld, &back), ErrorCode::kInvalidArgument,
                       {"bad magic"}));
  EXPECT_TRUE(HasError(DecodeControl(Frame(0, ""), kWorld, &back), ErrorCode::kInvalidArgument, {"unknown kind"}));
  EXPECT_TRUE(HasError(DecodeControl(Frame(6, ""), kWorld, &back), ErrorCode::kInvalidArgument, {"unknown kind"}));
}

// Encodes one request, lets `mutate` change it, and returns what DecodeControl says.
Status DecodeOneRequest(const std::function<void(Request&)>& mutate, int world = kWorld) {
  Request r;
  r.name = "t";
  r.shape = {2, 3};
  mutate(r);
  ControlMessage m;
  m.kind = ControlKind::kRequests;
  m.requests = {r};
  ControlMessage back;
  return DecodeControl(EncodeControl(m), world, &back);
}

TEST(MessagesTest, InvalidRequestFieldsAreRefused) {
  EXPECT_TRUE(DecodeOneRequest([](Request&) {}).ok());
  auto refused = [](const std::function<void(Request&)>& f, const char* what) {
    Status st = DecodeOneRequest(f);
    EXPECT_TRUE(HasError(st, ErrorCode::kInvalidArgument, {"invalid request"})) << what;
  };
  refused([](Request& r) { r.name = ""; }, "empty name");
  refused([](Request& r) { r.name = std::string(4097, 'x'); }, "long name");
  refused([](Request& r) { r.shape = std::vector<int64_t>(65, 1); }, "too many dims");
  refused([](Request& r) { r.shape = {2, -1}; }, "negative dim");
  refused([](Request& r) { r.splits = {1, -2}; }, "negative split");
  refused([](Request& r) { r.attrs.root = kWorld; }, "root out of range");
  refused([](Request& r) { r.attrs.root = -1; }, "negative root");
  refused([](Request& r) { r.attrs.prescale = std::numeric_limits<double>::infinity(); }, "inf prescale");
  refused([](Request& r) { r.attrs.postscale = std::nan(""); }, "nan postscale");
  refused([](Request& r) { r.attrs.op = static_cast<OpType>(kNumOpTypes); }, "op");
  refused([](Request& r) { r.attrs.dtype = static_cast<DataType>(kNumDataTypes); }, "dtype");
  refused([](Request& r) { r.attrs.reduce_op = static_cast<ReduceOp>(kNumReduceOps); }, "reduce op");
  refused([](Request& r) { r.attrs.process_set_id = -1; }, "negative process set id");
  // The root is checked against the receiver's world size.
  EXPECT_TRUE(DecodeOneRequest([](Request& r) { r.attrs.root = 1; }, 2).ok());
  EXPECT_FALSE(DecodeOneRequest([](Request& r) { r.attrs.root = 1; }, 1).ok());
}

TEST(MessagesTest, InvalidResponseFieldsAreRefused) {
  auto decode = [](const std::function<void(Response&)>& mutate) {
    Response r;
    r.tensors = {{"t"}};
    mutate(r);
    ControlMessage m;
    m.kind = ControlKind::kResponses;
    m.responses = {r};
    ControlMessage back;
    return DecodeControl(EncodeControl(m), kWorld, &back);
  };
  EXPECT_TRUE(decode([](Response&) {}).ok());
  EXPECT_FALSE(decode([](Response& r) { r.tensors.clear(); }).ok());
  // The attributes are checked as in a request.
  EXPECT_FALSE(decode([](Response& r) { r.attrs.root = kWorld; }).ok());
  EXPECT_FALSE(decode([](Response& r) { r.attrs.prescale = std::nan(""); }).ok());
  EXPECT_FALSE(decode([](Response& r) { r.attrs.reduce_op = static_cast<ReduceOp>(kNumReduceOps); }).ok());
  EXPECT_FALSE(decode([](Response& r) { r.kind = static_cast<Response::Kind>(2); }).ok());
  EXPECT_FALSE(decode([](Response& r) { r.error_code = static_cast<ErrorCode>(9); }).ok());
  EXPECT_FALSE(decode([](Response& r) { r.attrs.dtype = static_cast<DataType>(200); }).ok());
  EXPECT_TRUE(decode([](Response& r) { r.ready_wait_s.assign(kWorld, 0.5); }).ok());
  EXPECT_FALSE(decode([](Response& r) { r.ready_wait_s.assign(kWorld - 1, 0.5); }).ok());
  EXPECT_FALSE(decode([](Response& r) { r.ready_wait_s.assign(kWorld, -1.0); }).ok());
  EXPECT_FALSE(decode([](Response& r) { r.ready_wait_s.assign(kWorld, std::nan("")); }).ok());
  // Process sets: a collective names its sorted, distinct members; the global set none.
  EXPECT_TRUE(decode([](Response& r) { r.attrs.process_set_id = 2; r.members = {0, kWorld - 1}; }).ok());
  EXPECT_FALSE(decode([](Response& r) { r.attrs.process_set_id = 2; }).ok());
  EXPECT_FALSE(decode([](Response& r) { r.members = {0}; }).ok());
  EXPECT_FALSE(decode([](Response& r) { r.attrs.process_set_id = -2; r.members = {0}; }).ok());
  EXPECT_FALSE(decode([](Response& r) { r.attrs.process_set_id = 2; r.members = {1, 0}; }).ok());
  EXPECT_FALSE(decode([](Response& r) { r.attrs.process_set_id = 2; r.members = {0, 0}; }).ok());
  EXPECT_FALSE(decode([](Response& r) { r.attrs.process_set_id = 2; r.members = {kWorld}; }).ok());
  // An error on an unknown set has the id and no members.
  EXPECT_TRUE(decode([](Response& r) { r.kind = Response::Kind::kError; r.attrs.process_set_id = 9; }).ok());
}

TEST(MessagesTest, InvalidAbortIsRefused) {
  ControlMessage m;
  m.kind = ControlKind::kAbort;
  m.abort_origin = 1;
  m.abort_code = ErrorCode::kOk;  // an abort must carry an error
  ControlMessage back;
  EXPECT_TRUE(HasError(DecodeControl(EncodeControl(m), kWorld, &back), ErrorCode::kInvalidArgument,
                       {"invalid abort"}));
  m.abort_code = ErrorCode::kAborted;
  EXPECT_TRUE(DecodeControl(EncodeControl(m), kWorld, &back).ok());
  for (int32_t origin : {-1, kWorld}) {  // the failing rank must be one of the job's
    m.abort_origin = origin;
    EXPECT_TRUE(HasError(DecodeControl(EncodeControl(m), kWorld, &back), ErrorCode::kInvalidArgument,
                         {"invalid abort"}))
        << origin;
  }
}

TEST(RequestTest, NumElementsAndDescribe) {
  Request r;
  r.name = "w";
  EXPECT_EQ(r.NumElements(), 1);  // scalar
  r.shape = {2, 3, 4};
  EXPECT_EQ(r.NumElements(), 24);
  r.shape = {5, 0};
  EXPECT_EQ(r.NumElements(), 0);
  r.shape = {2, 3};
  r.attrs.reduce_op = ReduceOp::kMax;
  EXPECT_EQ(r.Describe(), "allreduce float32[2,3] Max");
  r.attrs.op = OpType::kBroadcast;
  r.attrs.dtype = DataType::kInt64;
  r.attrs.root = 2;
  EXPECT_EQ(r.Describe(), "broadcast int64[2,3] root=2");
  r.attrs.op = OpType::kAllgather;
  r.shape = {};
  EXPECT_EQ(r.Describe(), "allgather int64[]");
}

}  // namespace
}  // namespace tfring
