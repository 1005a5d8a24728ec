#include "base/reduce_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace tfring {

float HalfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ff;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // subnormal or zero in half
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t exp = abs >> 23;
    uint32_t mant = (abs & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - exp;  // value * 2^24 = mant * 2^(exp - 126); shift in [14, 24]
    uint32_t result = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (result & 1))) ++result;
    return static_cast<uint16_t>(sign | result);
  }
  uint32_t exp = (abs >> 23) - 127 + 15;
  uint32_t mant = abs & 0x7fffff;
  uint32_t result = (exp << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (result & 1))) ++result;  // may carry into exponent: OK
  return static_cast<uint16_t>(sign | result);
}

float BFloat16ToFloat(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToBFloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // nan
  uint32_t lsb = (x >> 16) & 1;
  x += 0x7fff + lsb;
  return static_cast<uint16_t>(x >> 16);
}

namespace {

template <typename T>
inline T Combine(T a, T b, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return static_cast<T>(a + b);
    case ReduceOp::kMin: return std::min(a, b);
    case ReduceOp::kMax: return std::max(a, b);
    case ReduceOp::kProduct: return static_cast<T>(a * b);
    case ReduceOp::kAdasum: break;  // not element-wise (adasum.cc); never reaches a ring
  }
  return a;
}

// Integer Sum/Product wrap around (two's complement) like TF's integer kernels; they are
// computed in the unsigned type because signed overflow is undefined behaviour in C++.
template <typename T>
using WrapType = typename std::conditional<std::is_integral<T>::value, std::make_unsigned<T>,
                                           std::common_type<T>>::type::type;

// Element-wise dst[i] = f(a[i], b[i]) with no aliasing promised to the compiler, so that it
// vectorizes the loop: the in-place form (a == dst) and the out-of-place form (three
// distinct buffers) are separate loops.
template <typename T, typename F>
void ApplyInPlace(T* __restrict dst, const T* __restrict b, size_t n, F f) {
  for (size_t i = 0; i < n; ++i) dst[i] = f(dst[i], b[i]);
}

template <typename T, typename F>
void ApplyOutOfPlace(T* __restrict dst, const T* __restrict a, const T* __restrict b, size_t n, F f) {
  for (size_t i = 0; i < n; ++i) dst[i] = f(a[i], b[i]);
}

template <typename T, typename F>
void Apply(T* dst, const T* a, const T* b, size_t n, F f) {
  if (a == dst) {
    ApplyInPlace(dst, b, n, f);
  } else {
    ApplyOutOfPlace(dst, a, b, n, f);
  }
}

// Each op gets its own loop so the compiler vectorizes the common cases.
template <typename T>
void ReduceTyped(T* dst, const T* a, const T* b, size_t n, ReduceOp op) {
  using W = WrapType<T>;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      Apply(dst, a, b, n, [](T x, T y) { return static_cast<T>(static_cast<W>(x) + static_cast<W>(y)); });
      return;
    case ReduceOp::kMin:
      Apply(dst, a, b, n, [](T x, T y) { return y < x ? y : x; });
      return;
    case ReduceOp::kMax:
      Apply(dst, a, b, n, [](T x, T y) { return y > x ? y : x; });
      return;
    case ReduceOp::kProduct:
      Apply(dst, a, b, n, [](T x, T y) { return static_cast<T>(static_cast<W>(x) * static_cast<W>(y)); });
      return;
    case ReduceOp::kAdasum:  // not element-wise (adasum.cc): the CPU backend never rings it
      return;
  }
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void Reduce16(uint16_t* dst, const uint16_t* a, const uint16_t* b, size_t n, ReduceOp op) {
  for (size_t i = 0; i < n; ++i) {
    dst[i] = FromFloat(Combine<float>(ToFloat(a[i]), ToFloat(b[i]), op));
  }
}

void ReduceBool(uint8_t* dst, const uint8_t* a, const uint8_t* b, size_t n, ReduceOp op) {
  bool any = op == ReduceOp::kSum || op == ReduceOp::kMax;
  for (size_t i = 0; i < n; ++i) {
    dst[i] = any ? (a[i] || b[i]) : (a[i] && b[i]);
  }
}

template <typename T>
void ScaleTyped(T* buf, size_t n, double factor) {
  if constexpr (std::is_floating_point<T>::value) {
    const T f = static_cast<T>(factor);
    for (size_t i = 0; i < n; ++i) buf[i] *= f;
  } else {
    for (size_t i = 0; i < n; ++i) buf[i] = static_cast<T>(std::trunc(buf[i] * factor));
  }
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void Scale16(uint16_t* buf, size_t n, double factor) {
  const float f = static_cast<float>(factor);
  for (size_t i = 0; i < n; ++i) buf[i] = FromFloat(ToFloat(buf[i]) * f);
}

}  // namespace

Status CheckReduceSupported(DataType dtype, ReduceOp op, double prescale, double postscale) {
  if (dtype == DataType::kBool) {
    if (op == ReduceOp::kAverage) {
      return Status::Unimplemented("Average is not defined for bool tensors; use Sum (logical "
                                   "OR) or Min (logical AND)");
    }
    if (prescale != 1.0 || postscale != 1.0) {
      return Status::InvalidArgument("prescale/postscale factors cannot apply to bool tensors");
    }
  }
  if (!std::isfinite(prescale) || !std::isfinite(postscale)) {
    return Status::InvalidArgument("prescale_factor and postscale_factor must be finite");
  }
  return Status::OK();
}

void ReduceInto(void* dst, const void* src, size_t count, DataType dtype, ReduceOp op) {
  ReduceTo(dst, dst, src, count, dtype, op);
}

void ReduceTo(void* dst, const void* a, const void* b, size_t count, DataType dtype, ReduceOp op) {
#define TFRING_REDUCE(T) ReduceTyped(static_cast<T*>(dst), static_cast<const T*>(a), static_cast<const T*>(b), count, op)
  switch (dtype) {
    case DataType::kUInt8: TFRING_REDUCE(uint8_t); return;
    case DataType::kInt8: TFRING_REDUCE(int8_t); return;
    case DataType::kInt16: TFRING_REDUCE(int16_t); return;
    case DataType::kUInt16: TFRING_REDUCE(uint16_t); return;
    case DataType::kInt32: TFRING_REDUCE(int32_t); return;
    case DataType::kInt64: TFRING_REDUCE(int64_t); return;
    case DataType::kFloat32: TFRING_REDUCE(float); return;
    case DataType::kFloat64: TFRING_REDUCE(double); return;
    case DataType::kFloat16:
      Reduce16<HalfToFloat, FloatToHalf>(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a),
                                         static_cast<const uint16_t*>(b), count, op);
      return;
    case DataType::kBFloat16:
      Reduce16<BFloat16ToFloat, FloatToBFloat16>(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a),
                                                 static_cast<const uint16_t*>(b), count, op);
      return;
    case DataType::kBool:
      ReduceBool(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b), count, op);
      return;
  }
#undef TFRING_REDUCE
}

void ScaleInPlace(void* buf, size_t count, DataType dtype, double factor) {
  if (factor == 1.0 || count == 0) return;
  switch (dtype) {
    case DataType::kUInt8: ScaleTyped(static_cast<uint8_t*>(buf), count, factor); return;
    case DataType::kInt8: ScaleTyped(static_cast<int8_t*>(buf), count, factor); return;
    case DataType::kInt16: ScaleTyped(static_cast<int16_t*>(buf), count, factor); return;
    case DataType::kUInt16: ScaleTyped(static_cast<uint16_t*>(buf), count, factor); return;
    case DataType::kInt32: ScaleTyped(static_cast<int32_t*>(buf), count, factor); return;
    case DataType::kInt64: ScaleTyped(static_cast<int64_t*>(buf), count, factor); return;
    case DataType::kFloat32: ScaleTyped(static_cast<float*>(buf), count, factor); return;
    case DataType::kFloat64: ScaleTyped(static_cast<double*>(buf), count, factor); return;
    case DataType::kFloat16: Scale16<HalfToFloat, FloatToHalf>(static_cast<uint16_t*>(buf), count, factor); return;
    case DataType::kBFloat16: Scale16<BFloat16ToFloat, FloatToBFloat16>(static_cast<uint16_t*>(buf), count, factor); return;
    case DataType::kBool: return;
  }
}

}  // namespace tfring
