// Reduction kernels and half/bfloat16 conversions against straightforward references.
#include "base/reduce_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "test_util.h"

namespace tfring {
namespace {

using testing_util::HasError;

const DataType kAllDataTypes[] = {DataType::kUInt8,   DataType::kInt8,    DataType::kInt16,
                                  DataType::kUInt16,  DataType::kInt32,   DataType::kInt64,
                                  DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                                  DataType::kFloat64, DataType::kBool};
static_assert(sizeof(kAllDataTypes) / sizeof(kAllDataTypes[0]) == kNumDataTypes, "a dtype is missing here");
const ReduceOp kAllReduceOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                                  ReduceOp::kMax, ReduceOp::kProduct};

float Bits2F(uint32_t b) { float f; std::memcpy(&f, &b, 4); return f; }
uint32_t F2Bits(float f) { uint32_t b; std::memcpy(&b, &f, 4); return b; }

// ---- half / bfloat16 ---------------------------------------------------------------

TEST(HalfTest, EveryNonNanHalfRoundTripsExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_EQ((h >> 10) & 0x1f, 0x1fu) << std::hex << h;
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f)))) << std::hex << h;
      continue;
    }
    ASSERT_EQ(FloatToHalf(f), h) << "half 0x" << std::hex << h << " -> " << f;
  }
}

TEST(HalfTest, KnownValues) {
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xc000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);          // largest finite
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(HalfToFloat(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_TRUE(std::isinf(HalfToFloat(0x7c00)));
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToHalf(-1e9f), 0xfc00);  // overflow -> -inf
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);  // below the rounding boundary
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // rounds to inf
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
}

TEST(HalfTest, RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Just above halfway rounds up.
  EXPECT_EQ(FloatToHalf(Bits2F(F2Bits(1.0f + std::ldexp(1.0f, -11)) + 1)), 0x3c01);
  // Subnormal halfway cases: 0.5 and 1.5 units of 2^-24.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -26) * 2), 0x0002);  // 1.5 ulp -> 2 (even)
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25) * 1.0001f), 0x0001);
}

TEST(HalfTest, MatchesDoubleRoundingOnRandomFloats) {
  // Reference: pick the nearer of the two neighbouring halves (ties to even) in double.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mag(-20, 16);
  for (int i = 0; i < 20000; ++i) {
    float f = std::ldexp(1.0f + (rng() % 1000000) / 1e6f, static_cast<int>(mag(rng)));
    if (rng() & 1) f = -f;
    uint16_t h = FloatToHalf(f);
    double got = HalfToFloat(h);
    double err = std::fabs(got - f);
    uint16_t lower = static_cast<uint16_t>(h & 0x7fff) == 0 ? h : static_cast<uint16_t>(h - 1);
    uint16_t upper = static_cast<uint16_t>(h + 1);
    if ((h & 0x7c00) != 0x7c00) {
      EXPECT_LE(err, std::fabs(double(HalfToFloat(lower)) - f)) << f;
      if ((upper & 0x7c00) != 0x7c00) {
        EXPECT_LE(err, std::fabs(double(HalfToFloat(upper)) - f)) << f;
      }
    }
  }
}

TEST(BFloat16Test, ConversionsAndRounding) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    float f = BFloat16ToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToBFloat16(f), b) << std::hex << b;
  }
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie -> even
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  uint16_t nan = FloatToBFloat16(std::nanf(""));
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(nan)));
  // A NaN whose payload sits only in the low bits must stay NaN (not become inf).
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(Bits2F(0x7f800001u)))));
  EXPECT_TRUE(std::isinf(BFloat16ToFloat(FloatToBFloat16(std::numeric_limits<float>::max()))));
}

// ---- ReduceInto vs a plain reference -----------------------------------------------

template <typename T>
T RefCombine(T a, T b, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return static_cast<T>(a + b);
    case ReduceOp::kMin: return a < b ? a : b;
    case ReduceOp::kMax: return a > b ? a : b;
    case ReduceOp::kProduct: return static_cast<T>(a * b);
    case ReduceOp::kAdasum: break;  // not element-wise: adasum_test.cc
  }
  return a;
}

template <typename T>
void CheckTyped(DataType dtype, ReduceOp op, std::mt19937& rng, int lo, int hi) {
  const size_t n = 1 + rng() % 300;
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<T> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = static_cast<T>(dist(rng));
    b[i] = static_cast<T>(dist(rng));
  }
  std::vector<T> got = a;
  const std::vector<T> src = b;
  ReduceInto(got.data(), b.data(), n, dtype, op);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(got[i], RefCombine<T>(a[i], b[i], op))
        << DataTypeName(dtype) << " " << ReduceOpName(op) << " at " << i;
  }
  EXPECT_EQ(b, src) << "the source must not change";
  // Out of place gives the same result and leaves both operands alone.
  std::vector<T> out(n, T{});
  const std::vector<T> own = a;
  ReduceTo(out.data(), a.data(), b.data(), n, dtype, op);
  EXPECT_EQ(out, got) << DataTypeName(dtype) << " " << ReduceOpName(op) << " out of place";
  EXPECT_EQ(a, own);
  EXPECT_EQ(b, src);
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void Check16(DataType dtype, ReduceOp op, std::mt19937& rng) {
  const size_t n = 1 + rng() % 300;
  std::uniform_real_distribution<float> dist(-100, 100);
  std::vector<uint16_t> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = FromF(dist(rng));
    b[i] = FromF(dist(rng));
  }
  std::vector<uint16_t> got = a;
  ReduceInto(got.data(), b.data(), n, dtype, op);
  for (size_t i = 0; i < n; ++i) {
    uint16_t want = FromF(RefCombine<float>(ToF(a[i]), ToF(b[i]), op));  // one rounding
    ASSERT_EQ(got[i], want) << DataTypeName(dtype) << " " << ReduceOpName(op) << " at " << i;
  }
  std::vector<uint16_t> out(n, 0);
  ReduceTo(out.data(), a.data(), b.data(), n, dtype, op);
  EXPECT_EQ(out, got) << DataTypeName(dtype) << " " << ReduceOpName(op) << " out of place";
}

TEST(ReduceIntoTest, EveryDtypeAndOpMatchesReference) {
  std::mt19937 rng(42);
  for (ReduceOp op : kAllReduceOps) {
    for (int rep = 0; rep < 5; ++rep) {
      CheckTyped<uint8_t>(DataType::kUInt8, op, rng, 0, 255);
      CheckTyped<int8_t>(DataType::kInt8, op, rng, -128, 127);
      CheckTyped<int16_t>(DataType::kInt16, op, rng, -32768, 32767);
      CheckTyped<uint16_t>(DataType::kUInt16, op, rng, 0, 65535);
      CheckTyped<int32_t>(DataType::kInt32, op, rng, -30000, 30000);
      CheckTyped<int64_t>(DataType::kInt64, op, rng, -2000000000, 2000000000);
      CheckTyped<float>(DataType::kFloat32, op, rng, -1000, 1000);
      CheckTyped<double>(DataType::kFloat64, op, rng, -1000000, 1000000);
      Check16<HalfToFloat, FloatToHalf>(DataType::kFloat16, op, rng);
      Check16<BFloat16ToFloat, FloatToBFloat16>(DataType::kBFloat16, op, rng);
    }
  }
}

TEST(ReduceIntoTest, FloatingPointNonIntegers) {
  std::vector<float> a = {0.5f, -1.25f, 3.0f}, b = {0.25f, 2.0f, -7.5f};
  ReduceInto(a.data(), b.data(), 3, DataType::kFloat32, ReduceOp::kProduct);
  EXPECT_EQ(a, (std::vector<float>{0.125f, -2.5f, -22.5f}));
  std::vector<double> c = {1e300, -1e-300}, d = {1e300, 1e-300};
  ReduceInto(c.data(), d.data(), 2, DataType::kFloat64, ReduceOp::kSum);
  EXPECT_EQ(c[0], 2e300);
  EXPECT_EQ(c[1], 0.0);
}

TEST(ReduceIntoTest, IntegerSumAndProductWrapAround) {
  // Integer overflow wraps (two's complement), as TF's integer ops do; never UB.
  std::vector<int32_t> a = {std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()};
  std::vector<int32_t> b = {1, -1};
  ReduceInto(a.data(), b.data(), 2, DataType::kInt32, ReduceOp::kSum);
  EXPECT_EQ(a[0], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(a[1], std::numeric_limits<int32_t>::max());
  std::vector<int64_t> c = {int64_t{1} << 62, -(int64_t{1} << 62)}, d = {4, 3};
  ReduceInto(c.data(), d.data(), 2, DataType::kInt64, ReduceOp::kProduct);
  EXPECT_EQ(c[0], 0);
  EXPECT_EQ(c[1], int64_t{1} << 62);  // -3 * 2^62 mod 2^64
  std::vector<int8_t> e = {127, -128}, f = {1, -1};
  ReduceInto(e.data(), f.data(), 2, DataType::kInt8, ReduceOp::kSum);
  EXPECT_EQ(e[0], -128);
  EXPECT_EQ(e[1], 127);
  std::vector<uint8_t> g = {200}, h = {100};
  ReduceInto(g.data(), h.data(), 1, DataType::kUInt8, ReduceOp::kSum);
  EXPECT_EQ(g[0], 44);
}

TEST(ReduceIntoTest, BoolIsLogical) {
  const uint8_t x[] = {0, 0, 1, 1}, y[] = {0, 1, 0, 1};
  struct Case { ReduceOp op; uint8_t want[4]; } cases[] = {
      {ReduceOp::kSum, {0, 1, 1, 1}},
      {ReduceOp::kMax, {0, 1, 1, 1}},
      {ReduceOp::kMin, {0, 0, 0, 1}},
      {ReduceOp::kProduct, {0, 0, 0, 1}},
  };
  for (const auto& c : cases) {
    uint8_t got[4];
    std::memcpy(got, x, 4);
    ReduceInto(got, y, 4, DataType::kBool, c.op);
    EXPECT_EQ(std::memcmp(got, c.want, 4), 0) << ReduceOpName(c.op);
  }
}

TEST(ReduceIntoTest, ZeroCountTouchesNothing) {
  for (DataType dt : kAllDataTypes) {
    for (ReduceOp op : kAllReduceOps) {
      char dst[8] = {1, 2, 3, 4, 5, 6, 7, 8};
      char src[8] = {9, 9, 9, 9, 9, 9, 9, 9};
      ReduceInto(dst, src, 0, dt, op);
      EXPECT_EQ(dst[0], 1);
      EXPECT_EQ(dst[7], 8);
    }
  }
}

// ---- ScaleInPlace -----------------------------------------------------------------

TEST(ScaleInPlaceTest, IntegersTruncateTowardZero) {
  std::vector<int32_t> a = {7, -7, 3, -3, 0};
  ScaleInPlace(a.data(), a.size(), DataType::kInt32, 0.5);
  EXPECT_EQ(a, (std::vector<int32_t>{3, -3, 1, -1, 0}));
  std::vector<int64_t> b = {10, -10};
  ScaleInPlace(b.data(), 2, DataType::kInt64, 1.0 / 3);
  EXPECT_EQ(b, (std::vector<int64_t>{3, -3}));
  std::vector<uint8_t> c = {255, 3};
  ScaleInPlace(c.data(), 2, DataType::kUInt8, 0.5);
  EXPECT_EQ(c, (std::vector<uint8_t>{127, 1}));
  std::vector<int8_t> d = {-128, 5};
  ScaleInPlace(d.data(), 2, DataType::kInt8, 0.25);
  EXPECT_EQ(d, (std::vector<int8_t>{-32, 1}));
}

TEST(ScaleInPlaceTest, FloatsAndHalves) {
  std::vector<float> f = {1, -2, 0.5f};
  ScaleInPlace(f.data(), 3, DataType::kFloat32, 0.25);
  EXPECT_EQ(f, (std::vector<float>{0.25f, -0.5f, 0.125f}));
  std::vector<double> d = {3};
  ScaleInPlace(d.data(), 1, DataType::kFloat64, 1.0 / 3);
  EXPECT_DOUBLE_EQ(d[0], 1.0);
  std::vector<uint16_t> h = {FloatToHalf(3.0f), FloatToHalf(-6.0f)};
  ScaleInPlace(h.data(), 2, DataType::kFloat16, 1.0 / 3);
  EXPECT_EQ(h[0], FloatToHalf(1.0f));
  EXPECT_EQ(h[1], FloatToHalf(-2.0f));
  std::vector<uint16_t> bf = {FloatToBFloat16(8.0f)};
  ScaleInPlace(bf.data(), 1, DataType::kBFloat16, 0.125);
  EXPECT_EQ(BFloat16ToFloat(bf[0]), 1.0f);
}

TEST(ScaleInPlaceTest, FactorOneAndBoolAreNoOps) {
  std::vector<int32_t> a = {5, -5};
  ScaleInPlace(a.data(), 2, DataType::kInt32, 1.0);
  EXPECT_EQ(a, (std::vector<int32_t>{5, -5}));
  uint8_t b[] = {1, 0};
  ScaleInPlace(b, 2, DataType::kBool, 0.5);
  EXPECT_EQ(b[0], 1);
  EXPECT_EQ(b[1], 0);
}

// ---- CheckReduceSupported ---------------------------------------------------------

TEST(CheckReduceSupportedTest, BoolAverageAndScalingRefused) {
  EXPECT_TRUE(HasError(CheckReduceSupported(DataType::kBool, ReduceOp::kAverage, 1, 1),
                       ErrorCode::kUnimplemented, {"Average", "bool"}));
  EXPECT_TRUE(HasError(CheckReduceSupported(DataType::kBool, ReduceOp::kSum, 2, 1),
                       ErrorCode::kInvalidArgument, {"bool"}));
  EXPECT_TRUE(HasError(CheckReduceSupported(DataType::kBool, ReduceOp::kSum, 1, 0.5),
                       ErrorCode::kInvalidArgument, {"bool"}));
  EXPECT_TRUE(CheckReduceSupported(DataType::kBool, ReduceOp::kMin, 1, 1).ok());
}

TEST(CheckReduceSupportedTest, NonFiniteScaleRefused) {
  EXPECT_TRUE(HasError(CheckReduceSupported(DataType::kFloat32, ReduceOp::kSum,
                                            std::numeric_limits<double>::infinity(), 1),
                       ErrorCode::kInvalidArgument, {"prescale_factor"}));
  EXPECT_TRUE(HasError(CheckReduceSupported(DataType::kFloat32, ReduceOp::kSum, 1, std::nan("")),
                       ErrorCode::kInvalidArgument, {"postscale_factor"}));
}

TEST(CheckReduceSupportedTest, EveryOtherCombinationAccepted) {
  for (DataType dt : kAllDataTypes) {
    if (dt == DataType::kBool) continue;
    for (ReduceOp op : kAllReduceOps) {
      EXPECT_TRUE(CheckReduceSupported(dt, op, 0.5, 2.0).ok()) << DataTypeName(dt) << " " << ReduceOpName(op);
    }
  }
}

}  // namespace
}  // namespace tfring
