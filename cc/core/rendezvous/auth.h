// Mutual challenge-response authentication with the job's shared secret (HMAC-SHA256).
//
//   server -> client : "TFR1" + 16-byte server nonce
//   client -> server : 16-byte client nonce + HMAC(secret, "client" | ns | nc)
//   server -> client : HMAC(secret, "server" | nc | ns)
//
// Neither side ever sends the secret. A peer that sends garbage or a wrong MAC is refused
// with kPrecondition ("authentication failed ...") and the caller closes the socket.
// Blocking: bounded by `deadline`. Thread-safety: stateless.
#pragma once

#include <string>

#include "base/socket.h"

namespace tfring {

Status AuthenticateAsServer(Socket& socket, const std::string& secret, Deadline deadline);
Status AuthenticateAsClient(Socket& socket, const std::string& secret, Deadline deadline);

// Fresh random bytes from the OS CSPRNG, hex-encoded (used for job secrets in tests).
std::string RandomHex(size_t num_bytes);

}  // namespace tfring
