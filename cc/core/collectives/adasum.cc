// Adasum allreduce by vector halving, distance doubling (the shape of Horovod's CPU
// Adasum; the combination rule and the rules on requests are in adasum.h).
//
// Steps, for n = 2^k ranks and a buffer of N elements (T tensors back to back):
//   1. reduce-scatter, k levels (distance d = 1, 2, 4, ..., n/2): rank r and its partner
//      r ^ d hold the same range of the buffer (for the two groups of d ranks they stand
//      for); each keeps one half (the lower rank the first) and sends the other, so
//      each holds its half of both groups' vectors. Each computes, per tensor, the dot
//      product and both squared norms over its half (accumulated in double), and the 2d
//      ranks of the two groups add those 3 T doubles together by recursive doubling
//      (exchange with r ^ 1, r ^ 2, ..., r ^ d; IEEE addition is commutative, so every
//      rank gets bitwise the same sums). With the whole tensors' coefficients each rank
//      combines its half: own = c_own own + c_other other (in double, rounded to the
//      dtype). After k levels rank r holds the reduction of N / n elements.
//   2. allgather, k levels in reverse (d = n/2, ..., 1): each rank swaps its reduced range
//      with r ^ d, doubling it, until every rank holds the whole buffer. Every element was
//      computed by exactly one rank, so the results are bitwise identical everywhere.
// Bytes on the wire per rank: (n-1)/n x N elements in each phase (2 (n-1)/n x N, like the
// ring), plus 24 T bytes in each of the k (k+1) / 2 coefficient exchanges, over 2 k +
// k (k+1) / 2 pairwise steps (the ring takes 2 (n-1)). Unlike the ring, a level's
// combination starts once its half has arrived (no pipelining with the transfer).
#include "collectives/adasum.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "base/reduce_kernels.h"

namespace tfring {
namespace {

bool IsPowerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

// Element access in double for each float dtype.
template <typename T>
struct Native {
  using Storage = T;
  static double Load(T v) { return static_cast<double>(v); }
  static T Store(double v) { return static_cast<T>(v); }
};
struct Half {
  using Storage = uint16_t;
  static double Load(uint16_t v) { return HalfToFloat(v); }
  static uint16_t Store(double v) { return FloatToHalf(static_cast<float>(v)); }
};
struct BFloat {
  using Storage = uint16_t;
  static double Load(uint16_t v) { return BFloat16ToFloat(v); }
  static uint16_t Store(double v) { return FloatToBFloat16(static_cast<float>(v)); }
};

// dot = own . other, own_sq = |own|^2, other_sq = |other|^2 over n elements.
template <typename E>
void DotAndNorms(const char* own, const char* other, size_t n, double* dot, double* own_sq, double* other_sq) {
  const auto* a = reinterpret_cast<const typename E::Storage*>(own);
  const auto* b = reinterpret_cast<const typename E::Storage*>(other);
  double d = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < n; ++i) {
    const double x = E::Load(a[i]), y = E::Load(b[i]);
    d += x * y;
    aa += x * x;
    bb += y * y;
  }
  *dot = d;
  *own_sq = aa;
  *other_sq = bb;
}

// own = own_coeff * own + other_coeff * other, in double, rounded to the dtype.
template <typename E>
void ScaledAdd(char* own, double own_coeff, const char* other, double other_coeff, size_t n) {
  auto* a = reinterpret_cast<typename E::Storage*>(own);
  const auto* b = reinterpret_cast<const typename E::Storage*>(other);
  for (size_t i = 0; i < n; ++i) a[i] = E::Store(own_coeff * E::Load(a[i]) + other_coeff * E::Load(b[i]));
}

struct Kernels {
  void (*dot_and_norms)(const char*, const char*, size_t, double*, double*, double*) = nullptr;
  void (*scaled_add)(char*, double, const char*, double, size_t) = nullptr;
};

template <typename E>
Kernels KernelsOf() {
  return Kernels{&DotAndNorms<E>, &ScaledAdd<E>};
}

Kernels KernelsFor(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16: return KernelsOf<Half>();
    case DataType::kBFloat16: return KernelsOf<BFloat>();
    case DataType::kFloat32: return KernelsOf<Native<float>>();
    case DataType::kFloat64: return KernelsOf<Native<double>>();
    default: return Kernels{};
  }
}

// A range of the buffer, in elements.
struct Range {
  size_t lo = 0, hi = 0;
  size_t size() const { return hi - lo; }
};

// The part of tensor t (elements [starts[t], starts[t+1])) inside `r`; empty if none.
Range Overlap(const std::vector<size_t>& starts, size_t t, Range r) {
  Range o{std::max(starts[t], r.lo), std::min(starts[t + 1], r.hi)};
  if (o.lo > o.hi) o.hi = o.lo;
  return o;
}

}  // namespace

Status CheckAdasum(OpType op, DataType dtype, int world_size, bool on_gpu) {
  if (on_gpu) {
    return Status::Unimplemented("op=Adasum is implemented for host (CPU) tensors only, not on GPU; place "
                                 "the tensor on the CPU (with tf.device('/CPU:0')) or use op=Average");
  }
  if (op != OpType::kAllreduce) {
    return Status::Unimplemented(std::string("op=Adasum is defined for allreduce only, not ") + OpTypeName(op) +
                                 "; use Sum or Average");
  }
  if (!IsFloatingPoint(dtype)) {
    return Status::Unimplemented(std::string("op=Adasum combines float16, bfloat16, float32 or float64 tensors; "
                                             "got ") + DataTypeName(dtype) +
                                 ". Cast the tensor to a float type, or use op=Sum or Average");
  }
  if (!IsPowerOfTwo(world_size)) {
    return Status::Unimplemented("op=Adasum needs a power-of-two number of ranks (1, 2, 4, 8, ...), like "
                                 "Horovod's CPU Adasum; this job has " + std::to_string(world_size) +
                                 ". Launch a power-of-two number of ranks, or use op=Average");
  }
  return Status::OK();
}

double AdasumCoefficient(double dot, double anorm_sq) {
  return anorm_sq >= kAdasumMinNormSq ? 1.0 - dot / anorm_sq * 0.5 : 1.0;
}

namespace {

// The algorithm above, in place in `buf` (AdasumAllreduce's contract without the postscale).
Status CombineInPlace(const Group& comm, char* buf, const std::vector<size_t>& tensor_counts, DataType dtype) {
  const int n = comm.size(), me = comm.rank();
  TFRING_RETURN_IF_ERROR(CheckAdasum(OpType::kAllreduce, dtype, n, false));
  const Kernels k = KernelsFor(dtype);
  const size_t es = DataTypeSize(dtype);
  const size_t tensors = tensor_counts.size();
  std::vector<size_t> starts(tensors + 1, 0);
  for (size_t t = 0; t < tensors; ++t) starts[t + 1] = starts[t] + tensor_counts[t];
  const size_t total = starts.back();
  if (n == 1 || total == 0) return Status::OK();
  char* other = comm.Scratch((total - total / 2) * es);  // the larger half of the first level
  std::vector<double> sums(3 * tensors), theirs(3 * tensors);
  const size_t sums_bytes = sums.size() * sizeof(double);
  std::vector<Range> before;  // this rank's range before each level, for the allgather
  Range mine{0, total};

  for (int level = 1; level < n; level <<= 1) {
    Link& partner = comm.data(me ^ level);
    const bool lower = (me & level) == 0;  // keeps the first half; its group is "left"
    const size_t mid = mine.lo + mine.size() / 2;
    const Range keep = lower ? Range{mine.lo, mid} : Range{mid, mine.hi};
    const Range give = lower ? Range{mid, mine.hi} : Range{mine.lo, mid};
    TFRING_RETURN_IF_ERROR(Transfer(partner, buf + give.lo * es, give.size() * es, partner, other,
                                    keep.size() * es, comm.TransferDeadline(), comm.abort_flag()));
    // Per tensor (dot, |left group's|^2, |right group's|^2) over this rank's half.
    const size_t own_at = lower ? 1 : 2, other_at = lower ? 2 : 1;
    std::fill(sums.begin(), sums.end(), 0.0);
    for (size_t t = 0; t < tensors; ++t) {
      const Range o = Overlap(starts, t, keep);
      if (o.size() == 0) continue;
      k.dot_and_norms(buf + o.lo * es, other + (o.lo - keep.lo) * es, o.size(), &sums[3 * t],
                      &sums[3 * t + own_at], &sums[3 * t + other_at]);
    }
    // Whole-tensor sums over the 2 * level ranks holding the two groups' vectors.
    for (int d = 1; d <= level; d <<= 1) {
      Link& peer = comm.data(me ^ d);
      TFRING_RETURN_IF_ERROR(Transfer(peer, sums.data(), sums_bytes, peer, theirs.data(), sums_bytes,
                                      comm.TransferDeadline(), comm.abort_flag()));
      for (size_t i = 0; i < sums.size(); ++i) sums[i] += theirs[i];
    }
    for (size_t t = 0; t < tensors; ++t) {
      const Range o = Overlap(starts, t, keep);
      if (o.size() == 0) continue;
      const double dot = sums[3 * t];
      k.scaled_add(buf + o.lo * es, AdasumCoefficient(dot, sums[3 * t + own_at]),
                   other + (o.lo - keep.lo) * es, AdasumCoefficient(dot, sums[3 * t + other_at]), o.size());
    }
    before.push_back(mine);
    mine = keep;
  }

  for (int level = n / 2; level >= 1; level >>= 1) {
    Link& partner = comm.data(me ^ level);
    const Range whole = before.back();
    before.pop_back();
    const bool lower = (me & level) == 0;  // holds the first half of `whole`
    const Range missing = lower ? Range{mine.hi, whole.hi} : Range{whole.lo, mine.lo};
    TFRING_RETURN_IF_ERROR(Transfer(partner, buf + mine.lo * es, mine.size() * es, partner,
                                    buf + missing.lo * es, missing.size() * es, comm.TransferDeadline(),
                                    comm.abort_flag()));
    mine = whole;
  }
  return Status::OK();
}

}  // namespace

Status AdasumAllreduce(const CollectiveArgs& args) {
  char* buf = static_cast<char*>(args.output);
  TFRING_RETURN_IF_ERROR(CombineInPlace(*args.group, buf, *args.tensor_counts, args.dtype));
  ScaleInPlace(buf, args.count, args.dtype, args.postscale);
  return Status::OK();
}

}  // namespace tfring
