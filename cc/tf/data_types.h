// The one table between TF's element types and the core's (cc/core/base/data_type.h): the op
// registrations' type lists (ops.cc) and the kernels' conversion (kernel_common.cc) both
// read it, and tests/test_tf_tables.py pins the registered lists to the core's exported
// table (tfring._core.data_types()).
#pragma once

#include <string>

#include "base/data_type.h"
#include "tensorflow/core/framework/types.h"

namespace tfring {
namespace tf_ops {

struct DataTypePair {
  tensorflow::DataType tf;
  DataType core;
};

// Every core type, once (the order of the registered type lists).
inline constexpr DataTypePair kDataTypePairs[] = {
    {tensorflow::DT_UINT8, DataType::kUInt8},       {tensorflow::DT_INT8, DataType::kInt8},
    {tensorflow::DT_INT16, DataType::kInt16},       {tensorflow::DT_UINT16, DataType::kUInt16},
    {tensorflow::DT_INT32, DataType::kInt32},       {tensorflow::DT_INT64, DataType::kInt64},
    {tensorflow::DT_HALF, DataType::kFloat16},      {tensorflow::DT_BFLOAT16, DataType::kBFloat16},
    {tensorflow::DT_FLOAT, DataType::kFloat32},     {tensorflow::DT_DOUBLE, DataType::kFloat64},
    {tensorflow::DT_BOOL, DataType::kBool},
};
static_assert(sizeof(kDataTypePairs) / sizeof(kDataTypePairs[0]) == kNumDataTypes,
              "a core DataType has no TF type in kDataTypePairs");

// TF dtype -> core dtype. Returns false for a dtype the core has no wire value for.
inline bool ToCoreDataType(tensorflow::DataType tf_dtype, DataType* out) {
  for (const DataTypePair& p : kDataTypePairs) {
    if (p.tf == tf_dtype) {
      *out = p.core;
      return true;
    }
  }
  return false;
}

// "{uint8, int8, ..., bool}": the allowed values of a type attr, in TF's spelling.
inline std::string TypeListAttr() {
  std::string out = "{";
  for (const DataTypePair& p : kDataTypePairs) {
    out += (out.size() > 1 ? ", " : "") + tensorflow::DataTypeString(p.tf);
  }
  return out + "}";
}

}  // namespace tf_ops
}  // namespace tfring
