// Element types and reduction operators understood by the core, with their wire values.
// The numeric values are part of the wire format and of the Python/TF bindings: never
// renumber, only append.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tfring {

enum class DataType : uint8_t {
  kUInt8 = 0,
  kInt8 = 1,
  kInt32 = 2,
  kInt64 = 3,
  kFloat16 = 4,
  kBFloat16 = 5,
  kFloat32 = 6,
  kFloat64 = 7,
  kBool = 8,
  kInt16 = 9,
  kUInt16 = 10,
};
constexpr int kNumDataTypes = 11;

enum class ReduceOp : uint8_t {
  kSum = 0,
  kAverage = 1,  // SUM followed by a post-scale of 1/size
  kMin = 2,
  kMax = 3,
  kProduct = 4,
  // Horovod's adaptive summation (adasum.h): not element-wise; float tensors only, a
  // power-of-two number of ranks, CPU only. Never reaches the ring's reduction kernels.
  kAdasum = 5,
};
constexpr int kNumReduceOps = 6;

// Which collective a request asks for.
enum class OpType : uint8_t {
  kAllreduce = 0,
  kAllgather = 1,
  kBroadcast = 2,
  kAlltoall = 3,
  kReducescatter = 4,
  kBarrier = 5,
  kJoin = 6,  // this rank has no more data: it adds zeros to the others' allreduces until all join
};
constexpr int kNumOpTypes = 7;

size_t DataTypeSize(DataType dtype);
const char* DataTypeName(DataType dtype);
const char* ReduceOpName(ReduceOp op);
const char* OpTypeName(OpType op);
bool IsValidDataType(int value);
bool IsValidReduceOp(int value);
bool IsValidOpType(int value);
bool IsFloatingPoint(DataType dtype);

}  // namespace tfring
