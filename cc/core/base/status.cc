#include "base/status.h"

namespace tfring {

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "OK";
    case ErrorCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case ErrorCode::kMismatch: return "MISMATCH";
    case ErrorCode::kPrecondition: return "FAILED_PRECONDITION";
    case ErrorCode::kPeerLost: return "PEER_LOST";
    case ErrorCode::kTimeout: return "TIMEOUT";
    case ErrorCode::kUnimplemented: return "UNIMPLEMENTED";
    case ErrorCode::kInternal: return "INTERNAL";
    case ErrorCode::kAborted: return "ABORTED";
  }
  return "UNKNOWN";
}

int CanonicalCode(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return 0;
    case ErrorCode::kInvalidArgument: return 3;   // INVALID_ARGUMENT
    case ErrorCode::kMismatch: return 9;          // FAILED_PRECONDITION: ranks disagree
    case ErrorCode::kPrecondition: return 9;      // FAILED_PRECONDITION
    case ErrorCode::kPeerLost: return 14;         // UNAVAILABLE
    case ErrorCode::kTimeout: return 4;           // DEADLINE_EXCEEDED
    case ErrorCode::kUnimplemented: return 12;    // UNIMPLEMENTED
    case ErrorCode::kInternal: return 13;         // INTERNAL
    case ErrorCode::kAborted: return 10;          // ABORTED
  }
  return 13;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(ErrorCodeName(code_)) + ": " + message_;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace tfring
