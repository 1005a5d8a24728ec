// The dispatch table (collectives/dispatch.h): every (operation, algorithm) pair the
// selection table can choose runs through RunCollective with its CollectiveArgs and gives
// the operation's result, on 2 emulated hosts of 2 ranks (so the hierarchical rows run),
// and so does allreduce's Adasum; a pair the table never chooses is kInternal, and
// arguments an algorithm cannot run on are refused before it runs, naming it.
#include "collectives/dispatch.h"

#include <gtest/gtest.h>

#include <cstring>

#include "collective_args_util.h"
#include "test_util.h"

namespace tfring {
namespace {

using testing_util::AllgatherArgs;
using testing_util::BroadcastArgs;
using testing_util::MakeMesh;
using testing_util::Mesh;
using testing_util::MeshOptions;
using testing_util::RunRanks;

constexpr int kRanks = 4;

class DispatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MeshOptions o;
    o.size = kRanks;
    o.ranks_per_host = 2;
    TFRING_ASSERT_OK(MakeMesh(o, &mesh_));
  }
  // Runs `body(rank, group with its host layout)` on every rank; every status must be OK.
  template <typename Body>
  void OnEveryRank(Body body) {
    auto statuses = RunRanks(kRanks, 30, [&](int r) {
      const Group world(mesh_[r]);
      const Group g = world.WithHostLayout(HostLayoutOf(world));
      if (g.host_layout() == nullptr) return Status::Internal("no host layout");
      return body(r, g);
    });
    for (int r = 0; r < kRanks; ++r) EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].ToString();
  }
  Mesh mesh_;
};

TEST_F(DispatchTest, EveryAllreduceAlgorithm) {
  for (Algorithm a : {Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kRabenseifner,
                      Algorithm::kHierarchical, Algorithm::kHierarchicalDoubling}) {
    SCOPED_TRACE(AlgorithmName(a));
    OnEveryRank([&](int r, const Group& g) {
      std::vector<float> in(1001, static_cast<float>(r + 1)), out(in.size(), -1);
      CollectiveArgs args(g);
      args.input = in.data();
      args.output = out.data();
      args.count = in.size();
      args.dtype = DataType::kFloat32;
      args.postscale = 0.5;
      args.chunk_bytes = 4096;
      TFRING_RETURN_IF_ERROR(RunCollective(OpType::kAllreduce, a, args));
      for (float v : out) {
        if (v != 5.0f) return Status::Internal("got " + std::to_string(v) + ", expected 5");
      }
      return Status::OK();
    });
  }
}

TEST_F(DispatchTest, EveryAllgatherAlgorithm) {
  for (Algorithm a : {Algorithm::kRing, Algorithm::kHierarchical}) {
    SCOPED_TRACE(AlgorithmName(a));
    OnEveryRank([&](int r, const Group& g) {
      std::vector<size_t> bytes = {1, 2, 3, 4};
      std::vector<char> in(bytes[r], static_cast<char>(r)), out(10, -1), expected;
      for (int p = 0; p < kRanks; ++p) expected.insert(expected.end(), bytes[p], static_cast<char>(p));
      CollectiveArgs args(g);
      args.input = in.data();
      args.output = out.data();
      args.recv_bytes = &bytes;
      TFRING_RETURN_IF_ERROR(RunCollective(OpType::kAllgather, a, args));
      return out == expected ? Status::OK() : Status::Internal("wrong allgather result");
    });
  }
}

TEST_F(DispatchTest, EveryBroadcastAlgorithm) {
  for (Algorithm a : {Algorithm::kChain, Algorithm::kHierarchical}) {
    SCOPED_TRACE(AlgorithmName(a));
    OnEveryRank([&](int r, const Group& g) {
      std::vector<char> buf(1000, static_cast<char>(r == 1 ? 7 : 0));
      CollectiveArgs args(g);
      args.output = buf.data();
      args.bytes = buf.size();
      args.root = 1;
      args.chunk_bytes = 256;
      TFRING_RETURN_IF_ERROR(RunCollective(OpType::kBroadcast, a, args));
      return buf == std::vector<char>(1000, 7) ? Status::OK() : Status::Internal("wrong broadcast result");
    });
  }
}

TEST_F(DispatchTest, Alltoall) {
  OnEveryRank([&](int r, const Group& g) {
    std::vector<size_t> one(kRanks, 1);
    std::vector<char> in(kRanks), out(kRanks, -1), expected(kRanks);
    for (int p = 0; p < kRanks; ++p) {
      in[p] = static_cast<char>(10 * r + p);
      expected[p] = static_cast<char>(10 * p + r);
    }
    CollectiveArgs args(g);
    args.input = in.data();
    args.send_bytes = &one;
    args.output = out.data();
    args.recv_bytes = &one;
    TFRING_RETURN_IF_ERROR(RunCollective(OpType::kAlltoall, Algorithm::kPairwise, args));
    return out == expected ? Status::OK() : Status::Internal("wrong alltoall result");
  });
}

TEST_F(DispatchTest, EveryReducescatterAlgorithm) {
  for (Algorithm a : {Algorithm::kRing, Algorithm::kHierarchical}) {
    SCOPED_TRACE(AlgorithmName(a));
    OnEveryRank([&](int r, const Group& g) {
      const std::vector<size_t> rows(kRanks, 1);
      std::vector<int32_t> in(kRanks * 10), work(in.size()), out(10, -1);
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int32_t>(i) * (r + 1);
      CollectiveArgs args(g);
      args.work = reinterpret_cast<char*>(work.data());
      args.input = in.data();
      args.rows_per_rank = &rows;
      args.row_elements = 10;
      args.dtype = DataType::kInt32;
      args.output = out.data();
      args.chunk_bytes = 64;
      TFRING_RETURN_IF_ERROR(RunCollective(OpType::kReducescatter, a, args));
      for (int i = 0; i < 10; ++i) {
        if (out[i] != (r * 10 + i) * 10) return Status::Internal("wrong reducescatter result");
      }
      return Status::OK();
    });
  }
}

TEST_F(DispatchTest, Adasum) {
  OnEveryRank([&](int r, const Group& g) {
    // Two tensors, each combined with its own coefficients: adasum(a, a) = a, so equal
    // inputs on every rank give the input back, here times the postscale.
    const std::vector<size_t> counts = {3, 2};
    std::vector<float> buf = {1, 2, 3, -4, 5};
    CollectiveArgs args(g);
    args.input = buf.data();
    args.output = buf.data();
    args.count = 5;
    args.dtype = DataType::kFloat32;
    args.op = ReduceOp::kAdasum;
    args.postscale = 2.0;
    args.tensor_counts = &counts;
    TFRING_RETURN_IF_ERROR(RunCollective(OpType::kAllreduce, Algorithm::kAdasum, args));
    const std::vector<float> expected = {2, 4, 6, -8, 10};
    return buf == expected ? Status::OK() : Status::Internal("wrong adasum result");
  });
}

// Each refusal names the algorithm and what is wrong, and nothing is sent (one rank alone
// calls: a collective would block).
TEST_F(DispatchTest, ArgumentsAnAlgorithmCannotRunOnAreRefusedNamingIt) {
  const Group world(mesh_[0]);
  const Group g = world.WithHostLayout(HostLayoutOf(world));
  ASSERT_NE(g.host_layout(), nullptr);
  char byte = 0;
  auto expect = [](const Status& st, ErrorCode code, const std::string& text) {
    EXPECT_EQ(st.code(), code) << st.ToString();
    EXPECT_NE(st.message().find(text), std::string::npos) << st.message();
  };
  for (int root : {-1, kRanks}) {
    expect(RunCollective(OpType::kBroadcast, Algorithm::kChain, BroadcastArgs(g, &byte, 1, root, 64)),
           ErrorCode::kInvalidArgument, "chain broadcast: root " + std::to_string(root) + " is not an index");
  }
  expect(RunCollective(OpType::kBroadcast, Algorithm::kHierarchical, BroadcastArgs(world, &byte, 1, 0, 64)),
         ErrorCode::kInternal, "hierarchical broadcast was chosen for a group of 4 ranks that carries no host layout");
  const std::vector<size_t> three(3, 1);
  expect(RunCollective(OpType::kAllgather, Algorithm::kRing, AllgatherArgs(g, &byte, &byte, three)),
         ErrorCode::kInvalidArgument, "ring allgather: recv_bytes needs one entry per rank of the group (4), got 3");
  expect(RunCollective(OpType::kAllgather, Algorithm::kHierarchical, CollectiveArgs(g)), ErrorCode::kInvalidArgument,
         "hierarchical allgather: recv_bytes needs one entry per rank of the group (4), got none");
  expect(RunCollective(OpType::kAlltoall, Algorithm::kPairwise, CollectiveArgs(g)), ErrorCode::kInvalidArgument,
         "pairwise alltoall: send_bytes needs one entry");
  expect(RunCollective(OpType::kReducescatter, Algorithm::kRing, CollectiveArgs(g)), ErrorCode::kInvalidArgument,
         "ring reducescatter: rows_per_rank needs one entry");
  CollectiveArgs adasum(g);
  adasum.count = 4;
  expect(RunCollective(OpType::kAllreduce, Algorithm::kAdasum, adasum), ErrorCode::kInvalidArgument,
         "adasum allreduce: tensor_counts must be given and sum to count (4)");
  const std::vector<size_t> counts = {4};
  float in[4] = {}, out[4] = {};
  adasum.tensor_counts = &counts;
  adasum.input = in;
  adasum.output = out;
  expect(RunCollective(OpType::kAllreduce, Algorithm::kAdasum, adasum), ErrorCode::kInvalidArgument,
         "adasum allreduce works in place");
}

TEST_F(DispatchTest, APairTheTableNeverChoosesIsInternal) {
  const Group g(mesh_[0]);
  const Status st = RunCollective(OpType::kAlltoall, Algorithm::kRing, CollectiveArgs(g));
  EXPECT_EQ(st.code(), ErrorCode::kInternal);
  EXPECT_NE(st.message().find("no ring algorithm for alltoall"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tfring
