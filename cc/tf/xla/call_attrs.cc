// Encoding of a tfring XLA custom call's attributes (see call_attrs.h).
#include "call_attrs.h"

#include <cstdio>
#include <cstring>

namespace tfring {
namespace tf_ops {
namespace xla_calls {
namespace {

// An MLIR string literal: printable ASCII as is, everything else (and '"', '\\') as \XX.
std::string MlirString(const std::string& s) {
  std::string out = "\"";
  char buf[4];
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      std::snprintf(buf, sizeof(buf), "\\%02X", c);
      out += buf;
    }
  }
  return out + "\"";
}

std::string I32(int32_t v) { return std::to_string(v) + " : i32"; }

// The exact bits: "0x3FF0000000000000 : f64" is 1.0.
std::string F64(double v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(bits));
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%016llX", static_cast<unsigned long long>(bits));
  return std::string(buf) + " : f64";
}

}  // namespace

std::string EncodeBackendConfig(const CallAttrs& a) {
  std::string joined;
  for (size_t i = 0; i < a.names.size(); ++i) {
    if (i) joined += kNameSeparator;
    joined += a.names[i];
  }
  return "{names = " + MlirString(joined) + ", op = " + I32(a.op) + ", reduce_op = " + I32(a.reduce_op) +
         ", prescale = " + F64(a.prescale) + ", postscale = " + F64(a.postscale) + ", root = " + I32(a.root) +
         ", process_set_id = " + I32(a.process_set_id) + "}";
}

std::vector<std::string> SplitNames(const std::string& joined) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (true) {
    size_t end = joined.find(kNameSeparator, begin);
    out.push_back(joined.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
    if (end == std::string::npos) return out;
    begin = end + 1;
  }
}

}  // namespace xla_calls
}  // namespace tf_ops
}  // namespace tfring
