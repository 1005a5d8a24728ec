// The dispatch table (collectives/dispatch.h): every (operation, algorithm) pair the
// selection table can choose runs through RunCollective with its CollectiveArgs and gives
// the operation's result, on 2 emulated hosts of 2 ranks (so the hierarchical rows run);
// a pair the table never chooses is kInternal.
#include "collectives/dispatch.h"

#include <gtest/gtest.h>

#include <cstring>

#include "test_util.h"

namespace tfring {
namespace {

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

TEST_F(DispatchTest, APairTheTableNeverChoosesIsInternal) {
  const Group g(mesh_[0]);
  const Status st = RunCollective(OpType::kAlltoall, Algorithm::kRing, CollectiveArgs(g));
  EXPECT_EQ(st.code(), ErrorCode::kInternal);
  EXPECT_NE(st.message().find("no ring algorithm for alltoall"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tfring
