// Element-wise reduction and scaling on host memory, per dtype.
//
// float16 and bfloat16 are reduced in float32 and rounded back (round-to-nearest-even).
// bool: Sum/Max are logical OR, Min/Product logical AND; Average and scaling are refused.
// Integer Sum and Product wrap around on overflow (two's complement, as in TF).
// Integer scaling multiplies in double and truncates toward zero.
// ReduceOp::kAdasum is not element-wise: adasum.h owns it, and these kernels leave `dst`
// as it is for it (the CPU backend never hands it to a ring).
// Thread-safety: pure functions.
#pragma once

#include <cstddef>

#include "base/data_type.h"
#include "base/status.h"

namespace tfring {

// Returns kUnimplemented when `op` makes no sense for `dtype`, and kInvalidArgument for a
// scale factor other than 1 on bool.
Status CheckReduceSupported(DataType dtype, ReduceOp op, double prescale, double postscale);

// dst[i] = dst[i] (op) src[i] for i in [0, count). kAverage reduces as kSum.
void ReduceInto(void* dst, const void* src, size_t count, DataType dtype, ReduceOp op);

// dst[i] = a[i] (op) b[i]: the out-of-place form, which saves copying `a` into `dst` first.
// `a` may be `dst` (then it is ReduceInto); otherwise the three buffers must not overlap.
void ReduceTo(void* dst, const void* a, const void* b, size_t count, DataType dtype, ReduceOp op);

// buf[i] *= factor. No-op when factor == 1.
void ScaleInPlace(void* buf, size_t count, DataType dtype, double factor);

// float <-> half / bfloat16 conversions (exposed for tests).
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float BFloat16ToFloat(uint16_t b);
uint16_t FloatToBFloat16(float f);

}  // namespace tfring
