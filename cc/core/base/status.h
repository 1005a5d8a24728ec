// Status: the one error type of the core. Every failure that can cross a boundary
// (TF kernel, Python, the wire) is a Status with one of the codes below; each boundary
// maps the code to its own type (the table in docs/core.md, "Errors"):
//
//   kInvalidArgument     -> tf.errors.InvalidArgumentError / ValueError
//   kMismatch            -> tf.errors.FailedPreconditionError (ranks disagree)
//   kPrecondition        -> tf.errors.FailedPreconditionError (not initialized, shut down)
//   kPeerLost            -> tf.errors.UnavailableError (socket closed, process died)
//   kTimeout             -> tf.errors.DeadlineExceededError
//   kUnimplemented       -> tf.errors.UnimplementedError (dtype/op not supported)
//   kInternal            -> tf.errors.InternalError (a bug in tfring)
//   kAborted             -> tf.errors.AbortedError (the job is being torn down)
//
// Thread-safety: a Status is a value; copy it freely between threads.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace tfring {

enum class ErrorCode : uint8_t {
  kOk = 0,
  kInvalidArgument = 1,
  kMismatch = 2,
  kPrecondition = 3,
  kPeerLost = 4,
  kTimeout = 5,
  kUnimplemented = 6,
  kInternal = 7,
  kAborted = 8,
};

const char* ErrorCodeName(ErrorCode code);

// The canonical code (gRPC / absl::StatusCode numbering, as TF statuses and tf.errors
// classes use) each ErrorCode becomes at a framework boundary: the table above. The TF
// kernels (ToTfStatus) and tfring._tensorflow.errors both map through it. kOk -> 0; an
// unknown code -> INTERNAL (13).
int CanonicalCode(ErrorCode code);

class Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) { return {ErrorCode::kInvalidArgument, std::move(m)}; }
  static Status Mismatch(std::string m) { return {ErrorCode::kMismatch, std::move(m)}; }
  static Status Precondition(std::string m) { return {ErrorCode::kPrecondition, std::move(m)}; }
  static Status PeerLost(std::string m) { return {ErrorCode::kPeerLost, std::move(m)}; }
  static Status Timeout(std::string m) { return {ErrorCode::kTimeout, std::move(m)}; }
  static Status Unimplemented(std::string m) { return {ErrorCode::kUnimplemented, std::move(m)}; }
  static Status Internal(std::string m) { return {ErrorCode::kInternal, std::move(m)}; }
  static Status Aborted(std::string m) { return {ErrorCode::kAborted, std::move(m)}; }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

  // Returns a copy whose message is prefixed with `context + ": "`.
  Status WithContext(const std::string& context) const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

// Thrown only inside the core (never across the C ABI / pybind / TF boundary, where it is
// converted back to a Status). Lets deep transport code bail out with one statement.
struct StatusError {
  Status status;
};

#define TFRING_RETURN_IF_ERROR(expr)       \
  do {                                     \
    ::tfring::Status _st = (expr);         \
    if (!_st.ok()) return _st;             \
  } while (0)

}  // namespace tfring
