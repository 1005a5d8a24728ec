// Collective algorithms with ranks as threads over a real Communicator mesh on 127.0.0.1
// (TCP, shared-memory rings with a small ring so every transfer wraps around, and rings
// plus single-copy posts above a small threshold, so one stream mixes both), for world
// sizes 1..8, against plain references. Inputs are small integers so that every
// reduction order gives exactly the same result in every dtype (bit-exact comparisons).
#include "collectives/collectives.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <thread>

#include "base/reduce_kernels.h"
#include "collective_args_util.h"
#include "collectives/dispatch.h"
#include "test_util.h"

namespace tfring {
namespace {

using testing_util::AllgatherArgs;
using testing_util::AllreduceArgs;
using testing_util::AlltoallArgs;
using testing_util::BroadcastArgs;
using testing_util::ExpectAllOk;
using testing_util::HasError;
using testing_util::MakeMesh;
using testing_util::Mesh;
using testing_util::MeshOptions;
using testing_util::ReducescatterArgs;
using testing_util::RunRanks;
using testing_util::SecondsSince;

const DataType kAllDataTypes[] = {DataType::kUInt8,   DataType::kInt8,    DataType::kInt16,
                                  DataType::kUInt16,  DataType::kInt32,   DataType::kInt64,
                                  DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                                  DataType::kFloat64, DataType::kBool};
static_assert(sizeof(kAllDataTypes) / sizeof(kAllDataTypes[0]) == kNumDataTypes, "a dtype is missing here");
// The element-wise ops the rings run (Adasum has its own algorithm: adasum_test.cc).
const ReduceOp kAllReduceOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                                  ReduceOp::kMax, ReduceOp::kProduct};
constexpr int kNumRingOps = sizeof(kAllReduceOps) / sizeof(kAllReduceOps[0]);

// The dtypes the every-dtype sweeps run: all of them, except where TFRING_TEST_SWEEP=threads
// (the TSan run, Makefile TSAN_RUN_OPTS): there one dtype per element size (1, 2, 4 and 8
// bytes: segment and chunk boundaries fall where they fall for every dtype of that size).
// TSan checks how threads interact, and a dtype changes only the arithmetic each rank's
// thread does on its own segment, never which thread touches which bytes when; the plain
// and ASan+UBSan runs keep every dtype.
std::vector<DataType> SweepDataTypes() {
  const char* sweep = std::getenv("TFRING_TEST_SWEEP");
  if (sweep != nullptr && std::string(sweep) == "threads") {
    return {DataType::kInt8, DataType::kFloat16, DataType::kFloat32, DataType::kFloat64};
  }
  return std::vector<DataType>(std::begin(kAllDataTypes), std::end(kAllDataTypes));
}

uint32_t Mix(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t h = a * 0x9e3779b1u ^ (b + 0x7f4a7c15u) * 0x85ebca6bu ^ (c + 0x165667b1u) * 0xc2b2ae35u;
  h ^= h >> 15;
  h *= 0x2c1b3c6du;
  h ^= h >> 12;
  return h;
}

bool IsUnsigned(DataType dt) {
  return dt == DataType::kUInt8 || dt == DataType::kUInt16 || dt == DataType::kBool;
}

// Element i of rank `rank`'s input for case `seed`.
int64_t InputValue(uint32_t seed, int rank, size_t i, DataType dt, ReduceOp op) {
  uint32_t h = Mix(seed, static_cast<uint32_t>(rank), static_cast<uint32_t>(i));
  if (dt == DataType::kBool) return (h >> 3) & 1;
  if (op == ReduceOp::kProduct) {  // |product| <= 2^8: exact in float16 and bfloat16
    int64_t v = 1 + (h & 1);
    return (!IsUnsigned(dt) && (h & 2)) ? -v : v;
  }
  return IsUnsigned(dt) ? static_cast<int64_t>(h % 4) : static_cast<int64_t>(h % 7) - 3;
}

void SetValue(void* buf, DataType dt, size_t i, int64_t v) {
  switch (dt) {
    case DataType::kUInt8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v); return;
    case DataType::kInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v); return;
    case DataType::kInt16: static_cast<int16_t*>(buf)[i] = static_cast<int16_t>(v); return;
    case DataType::kUInt16: static_cast<uint16_t*>(buf)[i] = static_cast<uint16_t>(v); return;
    case DataType::kInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); return;
    case DataType::kInt64: static_cast<int64_t*>(buf)[i] = v; return;
    case DataType::kFloat16: static_cast<uint16_t*>(buf)[i] = FloatToHalf(static_cast<float>(v)); return;
    case DataType::kBFloat16: static_cast<uint16_t*>(buf)[i] = FloatToBFloat16(static_cast<float>(v)); return;
    case DataType::kFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); return;
    case DataType::kFloat64: static_cast<double*>(buf)[i] = static_cast<double>(v); return;
    case DataType::kBool: static_cast<uint8_t*>(buf)[i] = v != 0; return;
  }
}

double GetValue(const void* buf, DataType dt, size_t i) {
  switch (dt) {
    case DataType::kUInt8: return static_cast<const uint8_t*>(buf)[i];
    case DataType::kInt8: return static_cast<const int8_t*>(buf)[i];
    case DataType::kInt16: return static_cast<const int16_t*>(buf)[i];
    case DataType::kUInt16: return static_cast<const uint16_t*>(buf)[i];
    case DataType::kInt32: return static_cast<const int32_t*>(buf)[i];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case DataType::kFloat16: return HalfToFloat(static_cast<const uint16_t*>(buf)[i]);
    case DataType::kBFloat16: return BFloat16ToFloat(static_cast<const uint16_t*>(buf)[i]);
    case DataType::kFloat32: return static_cast<const float*>(buf)[i];
    case DataType::kFloat64: return static_cast<const double*>(buf)[i];
    case DataType::kBool: return static_cast<const uint8_t*>(buf)[i];
  }
  return 0;
}

// What the dtype makes of the exact integer reference (integer types wrap).
double Expected(DataType dt, int64_t ref) {
  alignas(8) char tmp[8];
  SetValue(tmp, dt, 0, ref);
  return GetValue(tmp, dt, 0);
}

// Reference reduction of element i over ranks [0, size) (ranks apply Average as Sum).
int64_t Reference(uint32_t seed, int size, size_t i, DataType dt, ReduceOp op) {
  int64_t acc = InputValue(seed, 0, i, dt, op);
  for (int r = 1; r < size; ++r) {
    int64_t v = InputValue(seed, r, i, dt, op);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage: acc += v; break;
      case ReduceOp::kMin: acc = std::min(acc, v); break;
      case ReduceOp::kMax: acc = std::max(acc, v); break;
      case ReduceOp::kProduct: acc *= v; break;
      case ReduceOp::kAdasum: break;  // not a ring op: adasum_test.cc
    }
  }
  if (dt == DataType::kBool) acc = acc != 0;
  return acc;
}

void FillInput(std::vector<char>* buf, uint32_t seed, int rank, size_t count, DataType dt, ReduceOp op) {
  buf->assign(count * DataTypeSize(dt) + 1, '\x5a');  // + a guard byte
  for (size_t i = 0; i < count; ++i) SetValue(buf->data(), dt, i, InputValue(seed, rank, i, dt, op));
}

// First mismatch between `buf` and the reference, or "" when all match.
std::string CheckReduced(const char* buf, uint32_t seed, int size, size_t begin, size_t end,
                         size_t offset_in_buf, DataType dt, ReduceOp op) {
  for (size_t i = begin; i < end; ++i) {
    double want = Expected(dt, Reference(seed, size, i, dt, op));
    double got = GetValue(buf, dt, i - begin + offset_in_buf);
    if (got != want) {
      std::ostringstream os;
      os << DataTypeName(dt) << " " << ReduceOpName(op) << " element " << i << ": got " << got
         << ", want " << want;
      return os.str();
    }
  }
  return "";
}

// Byte k of the block rank `from` sends to rank `to` (allgather: to = -1).
char PatternByte(uint32_t seed, int from, int to, size_t k) {
  return static_cast<char>(Mix(seed + 17 * static_cast<uint32_t>(to + 1), static_cast<uint32_t>(from),
                               static_cast<uint32_t>(k)));
}

struct MeshParam {
  int size;
  bool shm;
  size_t cma_min_bytes = 0;  // 0: no single-copy sends
  bool lazy = false;         // data connections made on first use
};

void PrintTo(const MeshParam& p, std::ostream* os) {
  *os << p.size << " ranks over " << (p.shm ? "shared memory" : "TCP");
  if (p.cma_min_bytes > 0) *os << ", single-copy from " << p.cma_min_bytes << " bytes";
  if (p.lazy) *os << ", connected lazily";
}

std::string ParamName(const ::testing::TestParamInfo<MeshParam>& info) {
  return "np" + std::to_string(info.param.size) + (info.param.shm ? "_shm" : "_tcp") +
         (info.param.cma_min_bytes > 0 ? "_cma" + std::to_string(info.param.cma_min_bytes) : "") +
         (info.param.lazy ? "_lazy" : "");
}

class CollectivesTest : public ::testing::TestWithParam<MeshParam> {
 protected:
  void SetUp() override {
    MeshOptions o;
    o.size = GetParam().size;
    o.shm = GetParam().shm;
    o.shm_ring_bytes = 1 << 14;  // small: large transfers wrap around many times
    o.timeout_s = 20;
    o.lazy_data = GetParam().lazy;
    if (GetParam().cma_min_bytes > 0) {
      o.cma = CmaMode::kOn;
      o.cma_min_bytes = GetParam().cma_min_bytes;
    }
    Status st = MakeMesh(o, &mesh_);
    ASSERT_TRUE(st.ok()) << st.ToString();
    // Lazily, a pair's rings (and single-copy probe) come with its first transfer.
    const int at_init = o.lazy_data ? 0 : o.size - 1;
    ASSERT_EQ(mesh_[0].shm_peers(), o.shm ? at_init : 0);
    ASSERT_EQ(mesh_[0].cma_peers(), GetParam().cma_min_bytes > 0 ? at_init : 0);
  }
  int size() const { return GetParam().size; }
  // Runs fn on every rank; a hang aborts the mesh and fails the test.
  std::vector<Status> Run(const std::function<Status(int, Communicator&)>& fn, double timeout_s = 60) {
    return RunRanks(size(), timeout_s,
                    [&](int r) {
                      Status st = fn(r, mesh_[r]);
                      if (!st.ok()) mesh_[r].Abort();  // the others fail fast instead of timing out
                      return st;
                    },
                    [&] { mesh_.AbortAll(); });
  }
  Mesh mesh_;
};

// Lazily, a mesh starts without data connections (nor shared-memory rings) and a ring opens
// only its neighbours', with rings between ranks of one host.
TEST_P(CollectivesTest, LazyConnectionsOpenOnlyWhatTheAlgorithmUses) {
  if (!GetParam().lazy) GTEST_SKIP() << "a full mesh";
  for (int r = 0; r < size(); ++r) {
    EXPECT_EQ(mesh_[r].data_connections(), 0) << "rank " << r;
    EXPECT_EQ(mesh_[r].shm_peers(), 0) << "rank " << r;
  }
  std::vector<std::vector<float>> data(size(), std::vector<float>(1 << 16, 1.0f));  // above recursive doubling
  auto statuses = Run([&](int r, Communicator& comm) {
    return RingAllreduce(AllreduceArgs(comm, data[r].data(), data[r].data(), data[r].size(), DataType::kFloat32,
        ReduceOp::kSum, 1 << 14));
  });
  ExpectAllOk(statuses, "ring allreduce");
  for (int r = 0; r < size(); ++r) {
    EXPECT_EQ(data[r][0], static_cast<float>(size()));
    EXPECT_EQ(mesh_[r].data_connections(), size() == 2 ? 1 : 2) << "rank " << r << ": its two ring neighbours";
    EXPECT_EQ(mesh_[r].shm_peers(), GetParam().shm ? mesh_[r].data_connections() : 0) << "rank " << r;
    EXPECT_EQ(mesh_[r].cma_peers(), GetParam().cma_min_bytes > 0 ? mesh_[r].data_connections() : 0) << "rank " << r;
    if (GetParam().shm) {
      EXPECT_TRUE(mesh_[r].peek(mesh_[r].right()).shm()) << "rank " << r;
    }
  }
}

TEST_P(CollectivesTest, Neighbours) {
  for (int r = 0; r < size(); ++r) {
    EXPECT_EQ(mesh_[r].rank(), r);
    EXPECT_EQ(mesh_[r].size(), size());
    EXPECT_EQ(mesh_[r].right(), (r + 1) % size());
    EXPECT_EQ(mesh_[r].left(), (r + size() - 1) % size());
  }
}

struct AllreduceCase {
  DataType dtype;
  ReduceOp op;
  size_t count;
  size_t chunk_bytes;
};

std::vector<AllreduceCase> AllreduceCases(int size) {
  std::vector<AllreduceCase> cases;
  std::vector<size_t> counts = {0, 1, 37, 1001};
  if (size > 2) counts.push_back(static_cast<size_t>(size - 1));  // fewer elements than ranks
  for (DataType dt : SweepDataTypes()) {
    for (ReduceOp op : kAllReduceOps) {
      if (dt == DataType::kBool && op == ReduceOp::kAverage) continue;
      for (size_t n : counts) cases.push_back({dt, op, n, n == 1001 ? 1000u : 1u << 18});
    }
  }
  // Large: every dtype once (ops rotating), and float32 with every op; odd chunk sizes.
  int k = 0;
  for (DataType dt : SweepDataTypes()) {
    ReduceOp op = kAllReduceOps[k++ % kNumRingOps];
    if (dt == DataType::kBool && op == ReduceOp::kAverage) op = ReduceOp::kMax;
    cases.push_back({dt, op, 100003, 4099});
  }
  for (ReduceOp op : kAllReduceOps) cases.push_back({DataType::kFloat32, op, 100003, 1u << 18});
  return cases;
}

TEST_P(CollectivesTest, RingAllreduceEveryDtypeOpAndCount) {
  const auto cases = AllreduceCases(size());
  auto statuses = Run([&](int r, Communicator& comm) -> Status {
    std::vector<char> buf;
    for (size_t c = 0; c < cases.size(); ++c) {
      const auto& k = cases[c];
      const uint32_t seed = static_cast<uint32_t>(c);
      FillInput(&buf, seed, r, k.count, k.dtype, k.op);
      TFRING_RETURN_IF_ERROR(RingAllreduce(AllreduceArgs(comm, buf.data(), buf.data(), k.count, k.dtype, k.op,
          k.chunk_bytes)));
      std::string bad = CheckReduced(buf.data(), seed, size(), 0, k.count, 0, k.dtype, k.op);
      if (!bad.empty()) return Status::Internal("count " + std::to_string(k.count) + ": " + bad);
      if (buf.back() != '\x5a') return Status::Internal("wrote past the end of the buffer");
    }
    return Status::OK();
  });
  ExpectAllOk(statuses, "allreduce");
}

// Out of place: the ring reads `input` (left unchanged) and writes `output`, whose
// previous contents (garbage here) must not leak into the result.
TEST_P(CollectivesTest, RingAllreduceOutOfPlaceLeavesInputAlone) {
  const auto cases = AllreduceCases(size());
  auto statuses = Run([&](int r, Communicator& comm) -> Status {
    std::vector<char> input, output;
    for (size_t c = 0; c < cases.size(); ++c) {
      const auto& k = cases[c];
      const uint32_t seed = static_cast<uint32_t>(c);
      FillInput(&input, seed, r, k.count, k.dtype, k.op);
      const std::vector<char> original = input;
      output.assign(input.size(), '\x77');
      output.back() = '\x5a';
      TFRING_RETURN_IF_ERROR(RingAllreduce(AllreduceArgs(comm, input.data(), output.data(), k.count, k.dtype, k.op,
                                           k.chunk_bytes)));
      std::string bad = CheckReduced(output.data(), seed, size(), 0, k.count, 0, k.dtype, k.op);
      if (!bad.empty()) return Status::Internal("count " + std::to_string(k.count) + ": " + bad);
      if (input != original) return Status::Internal("the input was modified");
      if (output.back() != '\x5a') return Status::Internal("wrote past the end of the output");
    }
    return Status::OK();
  });
  ExpectAllOk(statuses, "out-of-place allreduce");
}

// The postscale is applied inside the ring, each element once by the rank owning its
// segment: the result must be bit for bit the unscaled ring followed by ScaleInPlace, for
// every dtype (integer rounding, float16/bfloat16 included), counts below the world size
// (empty segments), in and out of place.
TEST_P(CollectivesTest, RingAllreducePostscaleEqualsScalingAfter) {
  const size_t below_size = size() > 1 ? static_cast<size_t>(size() - 1) : 1;
  auto statuses = Run([&](int r, Communicator& comm) -> Status {
    std::vector<char> input, scaled, reference, output;
    uint32_t seed = 0;
    for (DataType dt : SweepDataTypes()) {
      if (dt == DataType::kBool) continue;
      const size_t es = DataTypeSize(dt);
      for (size_t n : {size_t{0}, size_t{1}, below_size, size_t{1001}, size_t{100003}}) {
        for (double postscale : {0.5, 3.0}) {
          FillInput(&input, ++seed, r, n, dt, ReduceOp::kSum);
          scaled = reference = input;
          TFRING_RETURN_IF_ERROR(RingAllreduce(AllreduceArgs(comm, scaled.data(), scaled.data(), n, dt,
              ReduceOp::kSum, 4099, postscale)));
          TFRING_RETURN_IF_ERROR(RingAllreduce(AllreduceArgs(comm, reference.data(), reference.data(), n, dt,
              ReduceOp::kSum, 4099)));
          ScaleInPlace(reference.data(), n, dt, postscale);
          const std::string what = std::string(DataTypeName(dt)) + " count " + std::to_string(n) + " postscale " +
                                   std::to_string(postscale);
          if (scaled != reference) return Status::Internal("in place differs from scaling after: " + what);
          output.assign(input.size(), '\x77');
          TFRING_RETURN_IF_ERROR(RingAllreduce(AllreduceArgs(comm, input.data(), output.data(), n, dt,
              ReduceOp::kSum, 4099, postscale)));
          if (std::memcmp(output.data(), reference.data(), n * es) != 0) {
            return Status::Internal("out of place differs from scaling after: " + what);
          }
        }
      }
    }
    return Status::OK();
  });
  ExpectAllOk(statuses, "allreduce with postscale");
}

// One rank's part of a test of an allreduce algorithm `run(input, output, case, postscale)`
// over AllreduceCases: out of place (input untouched, nothing written past the end), then
// in place with a postscale, whose result is kept in `results` for the same-bits check.
using AllreduceFn = std::function<Status(const char* input, char* output, const AllreduceCase& k, double postscale)>;

Status CheckAllreduceCases(int r, int size, const std::vector<AllreduceCase>& cases, const AllreduceFn& run,
                           std::vector<std::vector<char>>* results) {
  std::vector<char> input, output;
  for (size_t c = 0; c < cases.size(); ++c) {
    const auto& k = cases[c];
    const uint32_t seed = static_cast<uint32_t>(c);
    const std::string what = std::string(DataTypeName(k.dtype)) + " count " + std::to_string(k.count);
    FillInput(&input, seed, r, k.count, k.dtype, k.op);
    const std::vector<char> original = input;
    output.assign(input.size(), '\x77');
    output.back() = '\x5a';
    TFRING_RETURN_IF_ERROR(run(input.data(), output.data(), k, 1.0));
    std::string bad = CheckReduced(output.data(), seed, size, 0, k.count, 0, k.dtype, k.op);
    if (!bad.empty()) return Status::Internal("out of place, " + what + ": " + bad);
    if (input != original) return Status::Internal("the input was modified: " + what);
    if (output.back() != '\x5a') return Status::Internal("wrote past the end of the output: " + what);
    TFRING_RETURN_IF_ERROR(run(input.data(), input.data(), k, k.dtype == DataType::kBool ? 1.0 : 0.5));
    (*results)[c] = input;
  }
  return Status::OK();
}

// Every rank's results equal rank 0's, bit for bit.
void ExpectSameBitsEverywhere(const std::vector<std::vector<std::vector<char>>>& results) {
  for (size_t r = 1; r < results.size(); ++r) {
    for (size_t c = 0; c < results[r].size(); ++c) {
      EXPECT_TRUE(results[r][c] == results[0][c]) << "rank " << r << " holds other bits than rank 0, case " << c;
    }
  }
}

// Recursive doubling (small buffers; CpuBackend's choice below TFRING_RECURSIVE_DOUBLING_BYTES):
// the same cases as the ring, in place and out of place, every world size (powers of two
// and not), and every rank ending with the same bits, postscale included.
TEST_P(CollectivesTest, RecursiveDoublingAllreduceEveryDtypeOpCountAndPlace) {
  const auto cases = AllreduceCases(size());
  std::vector<std::vector<std::vector<char>>> results(size(), std::vector<std::vector<char>>(cases.size()));
  auto statuses = Run([&](int r, Communicator& comm) -> Status {
    return CheckAllreduceCases(r, size(), cases, [&](const char* in, char* out, const AllreduceCase& k, double scale) {
      return RecursiveDoublingAllreduce(AllreduceArgs(comm, in, out, k.count, k.dtype, k.op, scale));
    }, &results[r]);
  });
  ExpectAllOk(statuses, "recursive doubling");
  ExpectSameBitsEverywhere(results);
}

// Rabenseifner (recursive halving + doubling): the same cases, every world size (powers of
// two and not; counts below the number of ranks leave segments empty), in and out of place.
TEST_P(CollectivesTest, RabenseifnerAllreduceEveryDtypeOpCountAndPlace) {
  const auto cases = AllreduceCases(size());
  std::vector<std::vector<std::vector<char>>> results(size(), std::vector<std::vector<char>>(cases.size()));
  auto statuses = Run([&](int r, Communicator& comm) -> Status {
    return CheckAllreduceCases(r, size(), cases, [&](const char* in, char* out, const AllreduceCase& k, double scale) {
      return RabenseifnerAllreduce(AllreduceArgs(comm, in, out, k.count, k.dtype, k.op, k.chunk_bytes, scale));
    }, &results[r]);
  });
  ExpectAllOk(statuses, "rabenseifner");
  ExpectSameBitsEverywhere(results);
}

TEST_P(CollectivesTest, RingAllgathervWithZeroSizedBlocks) {
  std::mt19937 rng(size());
  std::vector<std::vector<size_t>> layouts;
  layouts.push_back(std::vector<size_t>(size(), 0));  // all empty
  layouts.push_back(std::vector<size_t>(size(), 1));
  for (int t = 0; t < 4; ++t) {
    std::vector<size_t> b(size());
    for (auto& x : b) x = (rng() % 3 == 0) ? 0 : rng() % 3000;
    layouts.push_back(b);
  }
  std::vector<size_t> big(size(), 0);
  big[size() - 1] = 100000;  // one large block, the rest empty
  if (size() > 1) big[0] = 77777;
  layouts.push_back(big);
  auto statuses = Run([&](int r, Communicator& comm) -> Status {
    for (size_t l = 0; l < layouts.size(); ++l) {
      const auto& bytes = layouts[l];
      const uint32_t seed = static_cast<uint32_t>(l);
      size_t total = 0, my_off = 0;
      for (int p = 0; p < size(); ++p) {
        if (p == r) my_off = total;
        total += bytes[p];
      }
      std::vector<char> in(bytes[r]);
      for (size_t k = 0; k < in.size(); ++k) in[k] = PatternByte(seed, r, -1, k);
      const bool in_place = l % 2 == 1;
      std::vector<char> out(total + 1, '\x33');
      if (in_place && !in.empty()) std::memcpy(out.data() + my_off, in.data(), in.size());
      const void* src = in_place ? static_cast<const void*>(out.data() + my_off) : in.data();
      TFRING_RETURN_IF_ERROR(RingAllgatherv(AllgatherArgs(comm, src, out.data(), bytes)));
      size_t off = 0;
      for (int p = 0; p < size(); ++p) {
        for (size_t k = 0; k < bytes[p]; ++k) {
          if (out[off + k] != PatternByte(seed, p, -1, k)) {
            return Status::Internal("layout " + std::to_string(l) + ": byte " + std::to_string(k) +
                                    " of rank " + std::to_string(p) + "'s block is wrong");
          }
        }
        off += bytes[p];
      }
      if (out.back() != '\x33') return Status::Internal("wrote past the end of the output");
    }
    return Status::OK();
  });
  ExpectAllOk(statuses, "allgatherv");
}

TEST_P(CollectivesTest, ChainBroadcastFromEveryRoot) {
  struct Case { size_t bytes, chunk; };
  const Case cases[] = {{0, 64}, {1, 7}, {13, 7}, {4099, 64}, {4099, 7}, {100000, 4096}, {262147, 65536}};
  auto statuses = Run([&](int r, Communicator& comm) -> Status {
    for (int root = 0; root < size(); ++root) {
      for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); ++c) {
        const uint32_t seed = static_cast<uint32_t>(root * 100 + c);
        std::vector<char> buf(cases[c].bytes + 1);
        for (size_t k = 0; k < cases[c].bytes; ++k) {
          buf[k] = r == root ? PatternByte(seed, root, -1, k) : static_cast<char>(r);
        }
        buf.back() = '\x77';
        TFRING_RETURN_IF_ERROR(ChainBroadcast(BroadcastArgs(comm, buf.data(), cases[c].bytes, root, cases[c].chunk)));
        for (size_t k = 0; k < cases[c].bytes; ++k) {
          if (buf[k] != PatternByte(seed, root, -1, k)) {
            return Status::Internal("root " + std::to_string(root) + ", " + std::to_string(cases[c].bytes) +
                                    " bytes in chunks of " + std::to_string(cases[c].chunk) +
                                    ": byte " + std::to_string(k) + " differs");
          }
        }
        if (buf.back() != '\x77') return Status::Internal("wrote past the end of the buffer");
      }
    }
    return Status::OK();
  });
  ExpectAllOk(statuses, "broadcast");
}

TEST_P(CollectivesTest, PairwiseAlltoallvWithRandomSplits) {
  std::mt19937 rng(100 + size());
  std::vector<std::vector<std::vector<size_t>>> matrices;  // [from][to] bytes
  auto empty = std::vector<std::vector<size_t>>(size(), std::vector<size_t>(size(), 0));
  matrices.push_back(empty);
  for (int t = 0; t < 5; ++t) {
    auto m = empty;
    for (auto& row : m)
      for (auto& x : row) x = (rng() % 4 == 0) ? 0 : rng() % (t == 4 ? 40000 : 700);
    matrices.push_back(m);
  }
  auto statuses = Run([&](int r, Communicator& comm) -> Status {
    for (size_t t = 0; t < matrices.size(); ++t) {
      const auto& m = matrices[t];
      const uint32_t seed = static_cast<uint32_t>(t);
      std::vector<size_t> send(size()), recv(size());
      size_t send_total = 0, recv_total = 0;
      for (int p = 0; p < size(); ++p) {
        send[p] = m[r][p];
        recv[p] = m[p][r];
        send_total += send[p];
        recv_total += recv[p];
      }
      std::vector<char> in(send_total), out(recv_total + 1, '\x44');
      size_t off = 0;
      for (int p = 0; p < size(); ++p) {
        for (size_t k = 0; k < send[p]; ++k) in[off + k] = PatternByte(seed, r, p, k);
        off += send[p];
      }
      TFRING_RETURN_IF_ERROR(PairwiseAlltoallv(AlltoallArgs(comm, in.data(), send, out.data(), recv)));
      off = 0;
      for (int p = 0; p < size(); ++p) {
        for (size_t k = 0; k < recv[p]; ++k) {
          if (out[off + k] != PatternByte(seed, p, r, k)) {
            return Status::Internal("matrix " + std::to_string(t) + ": byte " + std::to_string(k) +
                                    " from rank " + std::to_string(p) + " is wrong");
          }
        }
        off += recv[p];
      }
      if (out.back() != '\x44') return Status::Internal("wrote past the end of the output");
    }
    return Status::OK();
  });
  ExpectAllOk(statuses, "alltoallv");
}

TEST_P(CollectivesTest, RingReducescatter) {
  struct Case { DataType dt; ReduceOp op; std::vector<size_t> rows; size_t row_elements; };
  std::vector<Case> cases;
  auto even = [&](size_t dim0) {
    std::vector<size_t> rows(size());
    for (int p = 0; p < size(); ++p) rows[p] = EvenSegments(dim0, size())[p].count;
    return rows;
  };
  std::mt19937 rng(7 * size());
  std::vector<size_t> ragged(size());
  for (auto& x : ragged) x = rng() % 3 == 0 ? 0 : rng() % 50;
  int k = 0;
  for (DataType dt : SweepDataTypes()) {
    ReduceOp op = kAllReduceOps[k++ % kNumRingOps];
    if (dt == DataType::kBool && op == ReduceOp::kAverage) op = ReduceOp::kMin;
    for (size_t dim0 : {size_t{0}, size_t{1}, static_cast<size_t>(size() + 1), size_t{1000}}) {
      cases.push_back({dt, op, even(dim0), dim0 == 1000 ? 3u : 1u});
    }
    cases.push_back({dt, op, ragged, 5});
  }
  auto statuses = Run([&](int r, Communicator& comm) -> Status {
    for (size_t c = 0; c < cases.size(); ++c) {
      const auto& k = cases[c];
      const uint32_t seed = static_cast<uint32_t>(1000 + c);
      size_t total_rows = 0, my_first_row = 0;
      for (int p = 0; p < size(); ++p) {
        if (p == r) my_first_row = total_rows;
        total_rows += k.rows[p];
      }
      const size_t count = total_rows * k.row_elements;
      std::vector<char> buf;
      const size_t mine = k.rows[r] * k.row_elements;
      const size_t begin = my_first_row * k.row_elements;
      // In place (buf is consumed), and out of place (buf is read only; scratch is garbage).
      for (bool out_of_place : {false, true}) {
        FillInput(&buf, seed, r, count, k.dt, k.op);
        const std::vector<char> original = buf;
        std::vector<char> scratch(buf.size(), '\x66');
        std::vector<char> out(mine * DataTypeSize(k.dt) + 1, '\x11');
        if (out_of_place) {
          TFRING_RETURN_IF_ERROR(RingReducescatter(ReducescatterArgs(comm, scratch.data(), k.rows, k.row_elements, k.dt,
                                                   k.op, 1000, out.data(), buf.data())));
          if (buf != original) return Status::Internal("case " + std::to_string(c) + ": input modified");
        } else {
          TFRING_RETURN_IF_ERROR(RingReducescatter(ReducescatterArgs(comm, buf.data(), k.rows, k.row_elements, k.dt,
              k.op,
                                                   1000, out.data())));
        }
        std::string bad = CheckReduced(out.data(), seed, size(), begin, begin + mine, 0, k.dt, k.op);
        if (!bad.empty()) {
          return Status::Internal("case " + std::to_string(c) + (out_of_place ? " out of place: " : ": ") + bad);
        }
        if (out.back() != '\x11') return Status::Internal("wrote past the end of the output");
      }
    }
    return Status::OK();
  });
  ExpectAllOk(statuses, "reducescatter");
}

std::vector<MeshParam> AllMeshes() {
  std::vector<MeshParam> out;
  for (int n = 1; n <= 8; ++n) out.push_back({n, false});
  for (int n : {2, 3, 4, 5, 8}) out.push_back({n, true});
  // Single-copy above 1 KiB (small transfers still take the ring), and for every size.
  for (int n : {2, 3, 4, 5}) out.push_back({n, true, 1024});
  for (int n : {2, 3}) out.push_back({n, true, 1});
  // Data connections made when a collective first needs them (TFRING_DATA_CONNECTIONS).
  for (int n : {3, 5, 8}) out.push_back({n, false, 0, true});
  out.push_back({4, true, 0, true});
  out.push_back({8, true, 0, true});     // rings made on first use, by the dialling rank
  out.push_back({5, true, 1024, true});  // and the single-copy probe with them
  return out;
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CollectivesTest, ::testing::ValuesIn(AllMeshes()), ParamName);

// ---- segments ----------------------------------------------------------------------

TEST(EvenSegmentsTest, CoverEverythingAndDifferByAtMostOne) {
  for (int parts = 1; parts <= 9; ++parts) {
    for (size_t count : {0, 1, 2, 7, 8, 9, 100, 101}) {
      auto segs = EvenSegments(count, parts);
      ASSERT_EQ(segs.size(), static_cast<size_t>(parts));
      size_t offset = 0;
      for (int i = 0; i < parts; ++i) {
        EXPECT_EQ(segs[i].offset, offset);
        EXPECT_EQ(segs[i].count, count / parts + (static_cast<size_t>(i) < count % parts ? 1 : 0));
        offset += segs[i].count;
      }
      EXPECT_EQ(offset, count);
    }
  }
}

// ---- failures ----------------------------------------------------------------------

// Transport: 0 TCP, 1 shared-memory rings, 2 rings + single-copy posts for every send.
class CollectiveFailureTest : public ::testing::TestWithParam<int> {
 protected:
  void UseTransport(MeshOptions* o) const {
    o->shm = GetParam() > 0;
    if (GetParam() == 2) {
      o->cma = CmaMode::kOn;
      o->cma_min_bytes = 1;
    }
  }
};

TEST_P(CollectiveFailureTest, DeadPeerIsNamedWithinSeconds) {
  for (int size : {2, 3}) {
    Mesh mesh;
    MeshOptions o;
    o.size = size;
    UseTransport(&o);
    o.timeout_s = 20;  // a dead peer must be noticed long before this
    TFRING_ASSERT_OK(MakeMesh(o, &mesh));
    const int dead = size - 1;
    mesh.comms[dead].reset();  // the process "died": its sockets close
    auto t0 = std::chrono::steady_clock::now();
    // Rank 0 must find the dead rank by itself. The others abort after their failure as the
    // runtime does, but only once rank 0 is done (at most 10 s): an abort closes their
    // connections, and rank 0 could otherwise meet rank 1's closed socket first (seen under
    // TSan with single-copy posts) and rightly name rank 1.
    std::atomic<bool> rank0_done{false};
    auto statuses = RunRanks(size - 1, 30, [&](int r) {
      std::vector<float> buf(50000, 1.0f);
      Status st = RingAllreduce(AllreduceArgs(mesh[r], buf.data(), buf.data(), buf.size(), DataType::kFloat32,
          ReduceOp::kSum, 4096));
      if (r == 0) {
        rank0_done = true;
      } else {
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!rank0_done && std::chrono::steady_clock::now() < give_up) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      }
      if (!st.ok()) mesh[r].Abort();  // as the runtime does after a failure
      return st;
    });
    EXPECT_LT(SecondsSince(t0), 5.0) << "size " << size;
    // The left neighbour of the dead rank (rank 0 when size is 2 or 3) names it.
    EXPECT_TRUE(HasError(statuses[0], ErrorCode::kPeerLost, {"rank " + std::to_string(dead)}))
        << "size " << size;
    for (int r = 1; r < size - 1; ++r) {
      EXPECT_EQ(statuses[r].code(), ErrorCode::kPeerLost) << statuses[r].ToString();
    }
  }
}

TEST_P(CollectiveFailureTest, AbortWakesABlockedTransferAtOnce) {
  Mesh mesh;
  MeshOptions o;
  o.size = 2;
  UseTransport(&o);
  o.timeout_s = 30;
  TFRING_ASSERT_OK(MakeMesh(o, &mesh));
  auto blocked = std::async(std::launch::async, [&] {
    std::vector<int32_t> buf(1000, 1);
    return RingAllreduce(AllreduceArgs(mesh[0], buf.data(), buf.data(), buf.size(), DataType::kInt32, ReduceOp::kSum,
        1 << 18));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto t0 = std::chrono::steady_clock::now();
  mesh[0].Abort();
  ASSERT_EQ(blocked.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_LT(SecondsSince(t0), 1.0);
  Status st = blocked.get();
  EXPECT_EQ(st.code(), ErrorCode::kAborted) << st.ToString();
  EXPECT_TRUE(mesh[0].aborted());
  // Later collectives fail at once too.
  std::vector<int32_t> buf(10, 1);
  EXPECT_FALSE(RingAllreduce(AllreduceArgs(mesh[0], buf.data(), buf.data(), buf.size(), DataType::kInt32,
      ReduceOp::kSum, 1 << 18)).ok());
}

TEST_P(CollectiveFailureTest, SilentPeerTimesOut) {
  Mesh mesh;
  MeshOptions o;
  o.size = 2;
  UseTransport(&o);
  o.timeout_s = 0.5;
  TFRING_ASSERT_OK(MakeMesh(o, &mesh));
  auto t0 = std::chrono::steady_clock::now();
  std::vector<double> buf(100, 1.0);
  Status st = RingAllreduce(AllreduceArgs(mesh[0], buf.data(), buf.data(), buf.size(), DataType::kFloat64,
      ReduceOp::kSum, 1 << 18));
  double took = SecondsSince(t0);
  EXPECT_TRUE(HasError(st, ErrorCode::kTimeout, {"rank 1", "TFRING_TIMEOUT_S"}));
  EXPECT_GE(took, 0.45);
  EXPECT_LT(took, 3.0);
}

INSTANTIATE_TEST_SUITE_P(Transports, CollectiveFailureTest, ::testing::Values(0, 1, 2),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::string(i.param == 0 ? "tcp" : i.param == 1 ? "shm" : "shm_cma");
                         });

// ---- mesh set-up ------------------------------------------------------------------

TEST(CommunicatorTest, MissingRankTimesOutNamingIt) {
  auto store = std::make_shared<MemoryStore>();
  std::string secret = RandomHex(8);
  std::vector<std::unique_ptr<Communicator>> comms(3);
  auto t0 = std::chrono::steady_clock::now();
  auto statuses = RunRanks(2, 20, [&](int r) {  // rank 2 never starts
    CommunicatorOptions opt;
    opt.rank = r;
    opt.size = 3;
    opt.secret = secret;
    opt.start_timeout_s = 1;
    opt.shm = false;
    return Communicator::Create(opt, store, &comms[r]);
  });
  EXPECT_LT(SecondsSince(t0), 6.0);
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(HasError(statuses[r], ErrorCode::kTimeout, {"rank " + std::to_string(r), "from rank(s) 2", "TFRING_START_TIMEOUT_S"}))
        << "rank " << r;
  }
}

TEST(CommunicatorTest, WrongSecretIsRefused) {
  auto store = std::make_shared<MemoryStore>();
  std::vector<std::unique_ptr<Communicator>> comms(2);
  auto statuses = RunRanks(2, 20, [&](int r) {
    CommunicatorOptions opt;
    opt.rank = r;
    opt.size = 2;
    opt.secret = r == 0 ? "the-job-secret" : "another-secret";
    opt.start_timeout_s = 1;
    opt.shm = false;
    return Communicator::Create(opt, store, &comms[r]);
  });
  EXPECT_TRUE(HasError(statuses[1], ErrorCode::kPrecondition, {"TFRING_SECRET"}));
  EXPECT_FALSE(statuses[0].ok());
}

}  // namespace
}  // namespace tfring

namespace tfring {
namespace {

// Hierarchical allreduce on emulated hosts (host ids told apart; shared memory inside a
// host where on): every dtype, op and count, in and out of place, the same bits on every
// rank, postscale included; hosts of unequal size get no layout. With `outsiders`, the
// group is a process set: each host has that many more ranks, which are not in the set
// (and do nothing), and the set's layout is made from its members' hosts.
struct HostsParam {
  int size;            // of the group the algorithms run on
  int ranks_per_host;  // of the group
  bool shm;
  bool interleaved = false;  // host h: ranks h, h + H, h + 2H... (not contiguous in rank order)
  int outsiders = 0;         // ranks per host outside the group (a process set when > 0)
};

void PrintTo(const HostsParam& p, std::ostream* os) {
  *os << p.size / p.ranks_per_host << " hosts x " << p.ranks_per_host << " ranks over " << (p.shm ? "shm" : "TCP")
      << (p.interleaved ? ", interleaved" : "")
      << (p.outsiders ? ", a process set (" + std::to_string(p.outsiders) + " more per host)" : "");
}

class HierarchicalTest : public ::testing::TestWithParam<HostsParam> {
 protected:
  void SetUp() override {
    const HostsParam p = GetParam();
    const int hosts = p.size / p.ranks_per_host;
    MeshOptions o;
    o.size = p.size + hosts * p.outsiders;
    o.ranks_per_host = p.ranks_per_host + p.outsiders;
    o.interleave_hosts = p.interleaved;
    o.shm = p.shm;
    TFRING_ASSERT_OK(MakeMesh(o, &mesh_));
    // The group: on each host, its first ranks_per_host ranks; global ranks ascending.
    std::map<std::string, int> taken;
    const std::vector<std::string>& host_of = mesh_[0].host_ids();
    for (int r = 0; r < o.size; ++r) {
      if (taken[host_of[static_cast<size_t>(r)]]++ < p.ranks_per_host) members_.push_back(r);
    }
  }
  // Runs fn(index, group) on every member (its index in the group; the group carrying its
  // host layout, checked first); the ranks outside the group do nothing.
  std::vector<Status> Run(const std::function<Status(int, const Group&)>& fn) {
    const HostsParam p = GetParam();
    return testing_util::RunRanks(mesh_.size(), 120, [&](int r) -> Status {
      Communicator& comm = mesh_[r];
      const Group members = p.outsiders > 0 ? Group(comm, members_) : Group(comm);
      if (members.rank() < 0) return Status::OK();
      const std::shared_ptr<const HostLayout> layout = HostLayoutOf(members);
      if (layout == nullptr) return Status::Internal("no host layout");
      if (static_cast<int>(layout->local.size()) != p.ranks_per_host ||
          static_cast<int>(layout->cross.size()) != p.size / p.ranks_per_host ||
          layout->hosts.size() != layout->cross.size()) {
        return Status::Internal("wrong layout");
      }
      Status st = fn(members.rank(), members.WithHostLayout(layout));
      if (!st.ok()) comm.Abort();  // the others fail fast instead of timing out
      return st;
    }, [&] { mesh_.AbortAll(); });
  }
  // Runs every AllreduceCases case through allreduce(group, in, out, case, scale) on
  // every rank: each result must be right (CheckAllreduceCases) and bitwise equal on all ranks.
  template <typename Allreduce>
  void ExpectEveryCaseRightEverywhere(const char* what, Allreduce allreduce) {
    const int size = GetParam().size;
    const auto cases = AllreduceCases(size);
    std::vector<std::vector<std::vector<char>>> results(size, std::vector<std::vector<char>>(cases.size()));
    auto statuses = Run([&](int r, const Group& g) -> Status {
      return CheckAllreduceCases(r, size, cases, [&](const char* in, char* out, const AllreduceCase& k, double scale) {
        return allreduce(g, in, out, k, scale);
      }, &results[r]);
    });
    ExpectAllOk(statuses, what);
    ExpectSameBitsEverywhere(results);
  }
  Mesh mesh_;
  std::vector<int32_t> members_;  // the group's global ranks
};

TEST_P(HierarchicalTest, EveryDtypeOpCountAndPlaceWithTheSameBitsEverywhere) {
  ExpectEveryCaseRightEverywhere("hierarchical allreduce", [](const Group& g, const char* in, char* out,
                                              const AllreduceCase& k, double scale) {
    return HierarchicalAllreduce(AllreduceArgs(g, in, out, k.count, k.dtype, k.op, k.chunk_bytes, scale));
  });
}

// Pipelined (blocks of 64 bytes: every case of >= 128 bytes runs in 2-16 blocks, the
// cross-host phase on the helper thread; blocks with fewer elements than ranks included).
TEST_P(HierarchicalTest, PipelinedEveryDtypeOpCountAndPlaceWithTheSameBitsEverywhere) {
  ExpectEveryCaseRightEverywhere("pipelined hierarchical allreduce", [](const Group& g, const char* in, char* out,
                                              const AllreduceCase& k, double scale) {
    return HierarchicalAllreduce(AllreduceArgs(g, in, out, k.count, k.dtype, k.op, k.chunk_bytes, scale, 64));
  });
}

// Small buffers (CpuBackend's choice below TFRING_RECURSIVE_DOUBLING_BYTES across hosts):
// reduce to each host's leader, recursive doubling among leaders (3 and 4 hosts: off and on
// a power of two), broadcast inside hosts (3 ranks per host: off a power of two).
TEST_P(HierarchicalTest, DoublingEveryDtypeOpCountAndPlaceWithTheSameBitsEverywhere) {
  ExpectEveryCaseRightEverywhere("hierarchical doubling allreduce", [](const Group& g, const char* in, char* out,
                                              const AllreduceCase& k, double scale) {
    return HierarchicalDoublingAllreduce(AllreduceArgs(g, in, out, k.count, k.dtype, k.op, scale));
  });
}

TEST(HierarchicalBlocksTest, PipelinedFromTwoBlocksAndAtMostSixteen) {
  EXPECT_EQ(HierarchicalAllreduceBlocks(16 << 20, 0), 1u);
  EXPECT_EQ(HierarchicalAllreduceBlocks((4 << 20) - 1, 2 << 20), 1u);
  EXPECT_EQ(HierarchicalAllreduceBlocks(4 << 20, 2 << 20), 2u);
  EXPECT_EQ(HierarchicalAllreduceBlocks(16 << 20, 2 << 20), 8u);
  EXPECT_EQ(HierarchicalAllreduceBlocks(size_t{1} << 30, 2 << 20), 16u);
}

// Allgather: blocks of every element size (1, 2, 4, 8 bytes x rows of 1-3 elements), first
// dimensions that differ per rank (zero included), in and out of place: every rank's
// output equals the flat ring's, byte for byte, and holds every rank's block.
TEST_P(HierarchicalTest, AllgatherEqualsTheFlatRingForUnevenBlocks) {
  const int size = GetParam().size;
  std::mt19937 rng(static_cast<uint32_t>(size * 31 + GetParam().ranks_per_host));
  std::vector<std::vector<size_t>> layouts = {std::vector<size_t>(size, 0), std::vector<size_t>(size, 1)};
  for (size_t row : {1u, 6u, 8u, 24u}) {  // int8, 3 x float16, 2 x float32, 3 x float64 rows
    std::vector<size_t> b(size);
    for (auto& x : b) x = (rng() % 4 == 0 ? 0 : rng() % 700) * row;
    layouts.push_back(b);
  }
  std::vector<size_t> big(size, 0);
  big[size - 1] = 300000;  // one large block (several ring wrap-arounds), the rest empty
  big[0] = 77776;
  layouts.push_back(big);
  std::vector<std::vector<std::vector<char>>> results(size, std::vector<std::vector<char>>(layouts.size()));
  auto statuses = Run([&](int r, const Group& g) -> Status {
    for (size_t l = 0; l < layouts.size(); ++l) {
      const auto& bytes = layouts[l];
      const uint32_t seed = static_cast<uint32_t>(l);
      size_t total = 0, my_off = 0;
      for (int p = 0; p < size; ++p) {
        if (p == r) my_off = total;
        total += bytes[p];
      }
      std::vector<char> in(bytes[r]);
      for (size_t k = 0; k < in.size(); ++k) in[k] = PatternByte(seed, r, -1, k);
      std::vector<char> flat(total + 1, '\x33'), out(total + 1, '\x44');
      TFRING_RETURN_IF_ERROR(RingAllgatherv(AllgatherArgs(g, in.data(), flat.data(), bytes)));
      const bool in_place = l % 2 == 1;
      if (in_place && !in.empty()) std::memcpy(out.data() + my_off, in.data(), in.size());
      const void* src = in_place ? static_cast<const void*>(out.data() + my_off) : in.data();
      TFRING_RETURN_IF_ERROR(HierarchicalAllgatherv(AllgatherArgs(g, src, out.data(), bytes)));
      if (out.back() != '\x44') return Status::Internal("wrote past the end of the output");
      out.back() = flat.back();
      if (out != flat) return Status::Internal("layout " + std::to_string(l) + ": differs from the flat ring");
      size_t off = 0;
      for (int p = 0; p < size; ++p) {
        for (size_t k = 0; k < bytes[p]; ++k) {
          if (out[off + k] != PatternByte(seed, p, -1, k)) {
            return Status::Internal("layout " + std::to_string(l) + ": rank " + std::to_string(p) + "'s block is wrong");
          }
        }
        off += bytes[p];
      }
      results[r][l] = out;
    }
    return Status::OK();
  });
  ExpectAllOk(statuses, "hierarchical allgather");
  ExpectSameBitsEverywhere(results);
}

// Reduce-scatter: every dtype (ops rotating), even and ragged rows (zero included), in place
// and out of place (the input untouched): each rank's block is exactly the reduction.
TEST_P(HierarchicalTest, ReducescatterEveryDtypeEvenAndRaggedRows) {
  const int size = GetParam().size;
  struct Case { DataType dt; ReduceOp op; std::vector<size_t> rows; size_t row_elements; };
  std::vector<Case> cases;
  std::mt19937 rng(static_cast<uint32_t>(11 * size + GetParam().ranks_per_host));
  std::vector<size_t> ragged(size);
  for (auto& x : ragged) x = rng() % 3 == 0 ? 0 : rng() % 50;
  int k = 0;
  for (DataType dt : SweepDataTypes()) {
    ReduceOp op = kAllReduceOps[k++ % kNumRingOps];
    if (dt == DataType::kBool && op == ReduceOp::kAverage) op = ReduceOp::kMin;
    for (size_t dim0 : {size_t{0}, size_t{1}, static_cast<size_t>(size + 1), size_t{20000}}) {
      std::vector<size_t> rows(size);
      for (int p = 0; p < size; ++p) rows[p] = EvenSegments(dim0, size)[p].count;
      cases.push_back({dt, op, rows, dim0 == 20000 ? 3u : 1u});
    }
    cases.push_back({dt, op, ragged, 5});
  }
  auto statuses = Run([&](int r, const Group& g) -> Status {
    for (size_t c = 0; c < cases.size(); ++c) {
      const auto& k = cases[c];
      const uint32_t seed = static_cast<uint32_t>(2000 + c);
      size_t total_rows = 0, my_first_row = 0;
      for (int p = 0; p < size; ++p) {
        if (p == r) my_first_row = total_rows;
        total_rows += k.rows[p];
      }
      const size_t count = total_rows * k.row_elements, mine = k.rows[r] * k.row_elements;
      const size_t begin = my_first_row * k.row_elements;
      std::vector<char> buf;
      for (bool out_of_place : {false, true}) {
        FillInput(&buf, seed, r, count, k.dt, k.op);
        const std::vector<char> original = buf;
        std::vector<char> scratch(buf.size(), '\x66');
        std::vector<char> out(mine * DataTypeSize(k.dt) + 1, '\x11');
        char* work = out_of_place ? scratch.data() : buf.data();
        TFRING_RETURN_IF_ERROR(HierarchicalReducescatter(ReducescatterArgs(g, work, k.rows, k.row_elements, k.dt,
            k.op, 1000,
                                                         out.data(), out_of_place ? buf.data() : nullptr)));
        if (out_of_place && buf != original) return Status::Internal("case " + std::to_string(c) + ": input modified");
        std::string bad = CheckReduced(out.data(), seed, size, begin, begin + mine, 0, k.dt, k.op);
        if (!bad.empty()) {
          return Status::Internal("case " + std::to_string(c) + (out_of_place ? " out of place: " : ": ") + bad);
        }
        if (out.back() != '\x11') return Status::Internal("wrote past the end of the output");
      }
    }
    return Status::OK();
  });
  ExpectAllOk(statuses, "hierarchical reducescatter");
}

// Broadcast from every root, sizes below and above the number of ranks, odd chunk sizes:
// every rank ends with the root's bytes and nothing past the buffer is written.
TEST_P(HierarchicalTest, BroadcastFromEveryRoot) {
  const int size = GetParam().size;
  struct Case { size_t bytes, chunk; };
  const Case cases[] = {{0, 64}, {1, 7}, {5, 64}, {4099, 7}, {100003, 4096}, {262147, 65536}};
  auto statuses = Run([&](int r, const Group& g) -> Status {
    for (int root = 0; root < size; ++root) {
      for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); ++c) {
        const uint32_t seed = static_cast<uint32_t>(root * 100 + c);
        std::vector<char> buf(cases[c].bytes + 1);
        for (size_t k = 0; k < cases[c].bytes; ++k) buf[k] = r == root ? PatternByte(seed, root, -1, k) : char(r);
        buf.back() = '\x77';
        TFRING_RETURN_IF_ERROR(HierarchicalBroadcast(BroadcastArgs(g, buf.data(), cases[c].bytes, root,
            cases[c].chunk)));
        for (size_t k = 0; k < cases[c].bytes; ++k) {
          if (buf[k] != PatternByte(seed, root, -1, k)) {
            return Status::Internal("root " + std::to_string(root) + ", " + std::to_string(cases[c].bytes) +
                                    " bytes: byte " + std::to_string(k) + " differs");
          }
        }
        if (buf.back() != '\x77') return Status::Internal("wrote past the end of the buffer");
      }
    }
    return Status::OK();
  });
  ExpectAllOk(statuses, "hierarchical broadcast");
}

INSTANTIATE_TEST_SUITE_P(Hosts, HierarchicalTest,
                         ::testing::Values(HostsParam{4, 2, true}, HostsParam{4, 2, false}, HostsParam{6, 3, true},
                                           HostsParam{6, 2, true}, HostsParam{8, 4, true}, HostsParam{8, 2, false},
                                           HostsParam{4, 2, true, true}, HostsParam{6, 2, true, true},
                                           // process sets: 2 of 3 ranks per host; 3 of 4 over TCP; interleaved
                                           HostsParam{4, 2, true, false, 1}, HostsParam{6, 3, false, false, 1},
                                           HostsParam{4, 2, true, true, 1}),
                         [](const ::testing::TestParamInfo<HostsParam>& i) {
                           return std::to_string(i.param.size / i.param.ranks_per_host) + "x" +
                                  std::to_string(i.param.ranks_per_host) + (i.param.shm ? "_shm" : "_tcp") +
                                  (i.param.interleaved ? "_interleaved" : "") + (i.param.outsiders ? "_process_set" : "");
                         });

TEST(HostLayoutTest, NoLayoutForOneHostOneRankPerHostOrUnequalHosts) {
  for (auto [size, per_host] : std::vector<std::pair<int, int>>{{4, 0}, {3, 1}, {3, 2}, {5, 2}}) {
    MeshOptions o;
    o.size = size;
    o.ranks_per_host = per_host;
    Mesh mesh;
    TFRING_ASSERT_OK(MakeMesh(o, &mesh));
    EXPECT_EQ(HostLayoutOf(Group(mesh[0])), nullptr) << size << " ranks, " << per_host << " per host";
  }
}

// A process set gets the layout of its own members: 2 hosts x 3 ranks, the set {0, 1, 3, 4}
// is 2 x 2 in set indices; {0, 1, 2, 3} (3 on one host, 1 on the other) and {0, 3} (one
// per host) get none; a group without a layout refuses a hierarchical algorithm.
TEST(HostLayoutTest, ProcessSetsGetTheLayoutOfTheirMembers) {
  MeshOptions o;
  o.size = 6;
  o.ranks_per_host = 3;
  Mesh mesh;
  TFRING_ASSERT_OK(MakeMesh(o, &mesh));
  const std::vector<int32_t> even = {0, 1, 3, 4}, uneven = {0, 1, 2, 3}, one_each = {0, 3};
  const std::shared_ptr<const HostLayout> layout = HostLayoutOf(Group(mesh[3], even));
  ASSERT_NE(layout, nullptr);
  EXPECT_EQ(layout->local, (std::vector<int32_t>{2, 3}));  // set indices of ranks 3 and 4
  EXPECT_EQ(layout->cross, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(layout->hosts, (std::vector<std::vector<int32_t>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(HostLayoutOf(Group(mesh[0], uneven)), nullptr);
  EXPECT_EQ(HostLayoutOf(Group(mesh[0], one_each)), nullptr);
  char byte = 0;
  const Group no_layout(mesh[0], even);
  const Status refused = RunCollective(OpType::kBroadcast, Algorithm::kHierarchical, BroadcastArgs(no_layout, &byte,
      1, 0, 64));
  EXPECT_EQ(refused.code(), ErrorCode::kInternal) << refused.message();
}

// Group::topology(), the selection's view of a group: the size, the shape of its host
// layout where it carries one, and the job's shared memory inside hosts.
TEST(HostLayoutTest, TopologyIsTheGroupsSizeLayoutShapeAndTheJobsSharedMemory) {
  auto make_mesh = [](int size, int ranks_per_host, bool shm, Mesh* mesh) {
    MeshOptions o;
    o.size = size;
    o.ranks_per_host = ranks_per_host;
    o.shm = shm;
    return MakeMesh(o, mesh);
  };
  for (bool shm : {false, true}) {
    Mesh mesh;
    TFRING_ASSERT_OK(make_mesh(6, 3, shm, &mesh));
    const Group world(mesh[4]);
    const Topology flat = world.topology();
    EXPECT_EQ(flat.ranks, 6);
    EXPECT_FALSE(flat.across_hosts);
    EXPECT_EQ(flat.shm_inside_hosts, shm);
    const Topology hosts = world.WithHostLayout(HostLayoutOf(world)).topology();
    EXPECT_TRUE(hosts.across_hosts);
    EXPECT_EQ(hosts.hosts, 2);
    EXPECT_EQ(hosts.ranks_per_host, 3);
    const std::vector<int32_t> even = {0, 1, 3, 4};
    const Group set(mesh[4], even);
    const Topology of_set = set.WithHostLayout(HostLayoutOf(set)).topology();
    EXPECT_EQ(of_set.ranks, 4);
    EXPECT_EQ(of_set.hosts, 2);
    EXPECT_EQ(of_set.ranks_per_host, 2);
    EXPECT_EQ(of_set.shm_inside_hosts, shm);
  }
  Mesh mesh;
  TFRING_ASSERT_OK(make_mesh(2, 1, true, &mesh));
  EXPECT_FALSE(Group(mesh[0]).topology().shm_inside_hosts) << "no two ranks share a host";
}

}  // namespace
}  // namespace tfring
