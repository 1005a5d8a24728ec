// Adasum (adasum.h) with ranks as threads over a real Communicator mesh on 127.0.0.1, for
// world sizes 1, 2, 4 and 8 (TCP; shared memory at 4; single-copy at 2), against a
// straightforward double-precision reference of the pairwise tree; every rank must end with
// bitwise the same bytes. A world of 3 ranks is refused, never answered.
#include "collectives/adasum.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include "base/reduce_kernels.h"
#include "collective_args_util.h"
#include "test_util.h"

namespace tfring {
namespace {

using testing_util::AdasumArgs;
using testing_util::ExpectAllOk;
using testing_util::HasError;
using testing_util::MakeMesh;
using testing_util::Mesh;
using testing_util::MeshOptions;
using testing_util::RunRanks;

const DataType kFloatTypes[] = {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                                DataType::kFloat64};

void StoreValue(char* buf, DataType dt, size_t i, double v) {
  switch (dt) {
    case DataType::kFloat16: reinterpret_cast<uint16_t*>(buf)[i] = FloatToHalf(static_cast<float>(v)); return;
    case DataType::kBFloat16: reinterpret_cast<uint16_t*>(buf)[i] = FloatToBFloat16(static_cast<float>(v)); return;
    case DataType::kFloat32: reinterpret_cast<float*>(buf)[i] = static_cast<float>(v); return;
    default: reinterpret_cast<double*>(buf)[i] = v; return;
  }
}

double Load(const char* buf, DataType dt, size_t i) {
  switch (dt) {
    case DataType::kFloat16: return HalfToFloat(reinterpret_cast<const uint16_t*>(buf)[i]);
    case DataType::kBFloat16: return BFloat16ToFloat(reinterpret_cast<const uint16_t*>(buf)[i]);
    case DataType::kFloat32: return reinterpret_cast<const float*>(buf)[i];
    default: return reinterpret_cast<const double*>(buf)[i];
  }
}

// The reference: adasum(a, b) of the adasum.h formula, in double.
std::vector<double> Combine(const std::vector<double>& a, const std::vector<double>& b) {
  double dot = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  const double ca = aa >= 1e-8 ? 1 - dot / (2 * aa) : 1;
  const double cb = bb >= 1e-8 ? 1 - dot / (2 * bb) : 1;
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = ca * a[i] + cb * b[i];
  return out;
}

// adasum(adasum(x0, x1), adasum(x2, x3)) ... for one tensor, one vector per rank.
std::vector<double> Tree(std::vector<std::vector<double>> v) {
  while (v.size() > 1) {
    std::vector<std::vector<double>> next;
    for (size_t i = 0; i < v.size(); i += 2) next.push_back(Combine(v[i], v[i + 1]));
    v = std::move(next);
  }
  return v[0];
}

// Largest error the dtype may show relative to the largest magnitude of the inputs and the
// result: a few roundings per level of the tree.
double Tolerance(DataType dt) {
  switch (dt) {
    case DataType::kFloat16: return 1e-2;
    case DataType::kBFloat16: return 5e-2;
    case DataType::kFloat32: return 1e-5;
    default: return 1e-12;
  }
}

struct Case {
  DataType dtype;
  std::vector<size_t> counts;  // tensors fused in one buffer
};

std::vector<Case> Cases() {
  const std::vector<std::vector<size_t>> layouts = {
      {}, {0}, {1}, {2}, {7}, {1000}, {3, 0, 5}, {1, 1, 1, 1, 1}, {513, 2, 0, 1031}};
  std::vector<Case> out;
  for (DataType dt : kFloatTypes) {
    for (const auto& l : layouts) out.push_back({dt, l});
  }
  return out;
}

struct AdasumMesh {
  int size;
  bool shm;
  bool cma;  // single-copy sends above 1 KiB (both partners post at once on one link)
};

class AdasumTest : public ::testing::TestWithParam<AdasumMesh> {
 protected:
  void SetUp() override {
    MeshOptions o;
    o.size = size();
    o.shm = GetParam().shm;
    o.shm_ring_bytes = 1 << 14;
    o.timeout_s = 20;
    if (GetParam().cma) {
      o.cma = CmaMode::kOn;
      o.cma_min_bytes = 1024;
    }
    Status st = MakeMesh(o, &mesh_);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  int size() const { return GetParam().size; }
  std::vector<Status> Run(const std::function<Status(int, Communicator&)>& fn) {
    return RunRanks(size(), 60,
                    [&](int r) {
                      Status st = fn(r, mesh_[r]);
                      if (!st.ok()) mesh_[r].Abort();
                      return st;
                    },
                    [&] { mesh_.AbortAll(); });
  }
  Mesh mesh_;
};

// Random inputs in [-1, 1], rounded to
// the dtype; the reference starts from the rounded values.
TEST_P(AdasumTest, MatchesTheTreeReferenceAndIsBitwiseIdenticalOnEveryRank) {
  const auto cases = Cases();
  const int n = size();
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& k = cases[c];
    const size_t es = DataTypeSize(k.dtype);
    size_t total = 0;
    for (size_t t : k.counts) total += t;
    std::vector<std::vector<char>> bufs(n, std::vector<char>(total * es + 1, '\x5a'));  // + guard
    std::vector<std::vector<double>> inputs(n, std::vector<double>(total));
    std::mt19937 rng(static_cast<uint32_t>(1000 * n + c));
    std::uniform_real_distribution<double> dist(-1, 1);
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < total; ++i) {
        StoreValue(bufs[r].data(), k.dtype, i, dist(rng));
        inputs[r][i] = Load(bufs[r].data(), k.dtype, i);
      }
    }
    ExpectAllOk(Run([&](int r, Communicator& comm) { return AdasumAllreduce(AdasumArgs(comm, bufs[r].data(),
        k.counts, k.dtype)); }),
                "adasum");
    std::ostringstream what;
    what << DataTypeName(k.dtype) << " tensors of";
    for (size_t t : k.counts) what << " " << t;
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(bufs[r].back(), '\x5a') << what.str() << ": rank " << r << " wrote past the end";
      ASSERT_EQ(std::memcmp(bufs[r].data(), bufs[0].data(), total * es), 0)
          << what.str() << ": rank " << r << " differs from rank 0";
    }
    size_t offset = 0;
    for (size_t count : k.counts) {
      std::vector<std::vector<double>> per_rank(n);
      for (int r = 0; r < n; ++r) per_rank[r].assign(inputs[r].begin() + offset, inputs[r].begin() + offset + count);
      const std::vector<double> want = Tree(per_rank);
      double scale = 1e-30;  // the largest magnitude of the inputs and the result (cancellation)
      for (double w : want) scale = std::max(scale, std::fabs(w));
      for (const auto& v : per_rank) {
        for (double x : v) scale = std::max(scale, std::fabs(x));
      }
      for (size_t i = 0; i < count; ++i) {
        const double got = Load(bufs[0].data(), k.dtype, offset + i);
        ASSERT_LE(std::fabs(got - want[i]), Tolerance(k.dtype) * scale)
            << what.str() << ": element " << offset + i << " got " << got << ", want " << want[i];
      }
      offset += count;
    }
  }
}

// Every rank holds the same vector: Adasum of parallel equal vectors is their average, so the
// result is the vector itself, exactly (a.b equals |a|^2 bit for bit: coefficients 1/2).
TEST_P(AdasumTest, EqualVectorsGiveThemselvesExactly) {
  const size_t count = 37;
  std::vector<std::vector<float>> bufs(size(), std::vector<float>(count));
  for (auto& b : bufs) {
    for (size_t i = 0; i < count; ++i) b[i] = 0.25f * static_cast<float>(i) - 3.0f;
  }
  const std::vector<float> want = bufs[0];
  ExpectAllOk(Run([&](int r, Communicator& comm) {
                return AdasumAllreduce(AdasumArgs(comm, reinterpret_cast<char*>(bufs[r].data()), {count},
                    DataType::kFloat32));
              }),
              "adasum");
  for (int r = 0; r < size(); ++r) EXPECT_EQ(bufs[r], want) << "rank " << r;
}

// Orthogonal vectors (rank r holds r+1 at element r only) add up: the result is their sum.
// A zero vector (a joined rank's contribution) changes nothing: coefficient 1, dot 0.
TEST_P(AdasumTest, OrthogonalVectorsAddAndZerosAreNeutral) {
  const int n = size();
  const size_t count = static_cast<size_t>(n) + 3;
  std::vector<std::vector<double>> bufs(n, std::vector<double>(count, 0.0));
  for (int r = 0; r < n; ++r) bufs[r][r] = r + 1;
  if (n > 1) bufs[n - 1].assign(count, 0.0);  // the last rank "joined"
  ExpectAllOk(Run([&](int r, Communicator& comm) {
                return AdasumAllreduce(AdasumArgs(comm, reinterpret_cast<char*>(bufs[r].data()), {count},
                    DataType::kFloat64));
              }),
              "adasum");
  std::vector<double> want(count, 0.0);
  for (int r = 0; r < (n > 1 ? n - 1 : n); ++r) want[r] = r + 1;
  for (int r = 0; r < n; ++r) EXPECT_EQ(bufs[r], want) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, AdasumTest,
                         ::testing::Values(AdasumMesh{1, false, false}, AdasumMesh{2, false, false},
                                           AdasumMesh{4, false, false}, AdasumMesh{8, false, false},
                                           AdasumMesh{4, true, false}, AdasumMesh{2, true, true}),
                         [](const ::testing::TestParamInfo<AdasumMesh>& info) {
                           return "np" + std::to_string(info.param.size) + (info.param.shm ? "_shm" : "_tcp") +
                                  (info.param.cma ? "_cma" : "");
                         });

TEST(AdasumRulesTest, CoefficientIsHorovods) {
  EXPECT_EQ(AdasumCoefficient(0.0, 4.0), 1.0);   // orthogonal: a sum
  EXPECT_EQ(AdasumCoefficient(4.0, 4.0), 0.5);   // equal: an average
  EXPECT_EQ(AdasumCoefficient(-4.0, 4.0), 1.5);  // opposite
  EXPECT_EQ(AdasumCoefficient(1e-9, 0.0), 1.0);  // zero norm: coefficient 1
  EXPECT_EQ(AdasumCoefficient(1e-9, 0.99e-8), 1.0);
  EXPECT_NE(AdasumCoefficient(1e-9, 1e-8), 1.0);
}

TEST(AdasumRulesTest, RefusesWhatItCannotDoSayingWhy) {
  for (int n : {1, 2, 4, 8, 16, 1024}) {
    for (DataType dt : kFloatTypes) EXPECT_TRUE(CheckAdasum(OpType::kAllreduce, dt, n, false).ok()) << n;
  }
  for (int n : {3, 5, 6, 7, 12}) {
    EXPECT_TRUE(HasError(CheckAdasum(OpType::kAllreduce, DataType::kFloat32, n, false), ErrorCode::kUnimplemented,
                         {"power-of-two", "this job has " + std::to_string(n), "op=Average"}));
  }
  for (DataType dt : {DataType::kInt32, DataType::kInt64, DataType::kUInt8, DataType::kBool}) {
    EXPECT_TRUE(HasError(CheckAdasum(OpType::kAllreduce, dt, 2, false), ErrorCode::kUnimplemented,
                         {DataTypeName(dt), "float"}));
  }
  EXPECT_TRUE(HasError(CheckAdasum(OpType::kReducescatter, DataType::kFloat32, 2, false), ErrorCode::kUnimplemented,
                       {"allreduce only", "reducescatter"}));
  EXPECT_TRUE(HasError(CheckAdasum(OpType::kAllreduce, DataType::kFloat32, 2, true), ErrorCode::kUnimplemented,
                       {"CPU", "GPU"}));
}

// Three ranks: every rank is refused at once (no transfer started, so nobody hangs).
TEST(AdasumRulesTest, ThreeRanksAreRefusedOnEveryRank) {
  MeshOptions o;
  o.size = 3;
  Mesh mesh;
  ASSERT_TRUE(MakeMesh(o, &mesh).ok());
  std::vector<std::vector<float>> bufs(3, std::vector<float>(10, 1.0f));
  auto statuses = RunRanks(3, 30, [&](int r) {
    return AdasumAllreduce(AdasumArgs(mesh[r], reinterpret_cast<char*>(bufs[r].data()), {10}, DataType::kFloat32));
  }, [&] { mesh.AbortAll(); });
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(HasError(statuses[r], ErrorCode::kUnimplemented, {"this job has 3"})) << "rank " << r;
    EXPECT_EQ(bufs[r], std::vector<float>(10, 1.0f)) << "rank " << r << ": the buffer must be left alone";
  }
}

}  // namespace
}  // namespace tfring
