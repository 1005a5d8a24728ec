// The attributes one tfring XLA custom call carries, shared by the lowerings that write
// them (xla_kernels.cc, into the call's backend_config) and the handlers that read them
// (host_handlers.cc, through XLA FFI attribute decoding). No TF or XLA dependency.
//
// Each tfring op lowers to two custom calls (docs/tensorflow.md, "XLA"):
//   kStartTarget(inputs...) -> outputs...            submits every tensor to the core
//   kDoneTarget(started..., inputs...) -> outputs... waits; output i aliases operand i
// Both carry the same attributes; `names` is the negotiation key of each tensor (the TF
// op's tensor_name, or a grouped allreduce's tensor_names), joined by kNameSeparator.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tfring {
namespace tf_ops {
namespace xla_calls {

inline constexpr char kStartTarget[] = "tfring_collective_start";
inline constexpr char kDoneTarget[] = "tfring_collective_done";
inline constexpr char kNameSeparator = '\n';

// What a lowering knows at compile time about one collective call.
struct CallAttrs {
  std::vector<std::string> names;
  int32_t op = 0;         // tfring::OpType
  int32_t reduce_op = 0;  // tfring::ReduceOp (allreduce, reducescatter)
  double prescale = 1.0;
  double postscale = 1.0;
  int32_t root = 0;            // broadcast: a global rank
  int32_t process_set_id = 0;  // 0: every rank
};

// The backend_config of both calls: an MLIR attribute dictionary such as
// {names = "a\0Ab", op = 0 : i32, ..., prescale = 0x3FF0000000000000 : f64} (strings
// hex-escaped, doubles as exact bit patterns), which XLA decodes for the FFI handlers.
std::string EncodeBackendConfig(const CallAttrs& attrs);

// The tensor names in a decoded `names` attribute.
std::vector<std::string> SplitNames(const std::string& joined);

}  // namespace xla_calls
}  // namespace tf_ops
}  // namespace tfring
