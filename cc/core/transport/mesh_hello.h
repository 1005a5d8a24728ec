// The opening of every mesh connection (transport's own, not for other layers): after the
// HMAC handshake (rendezvous/auth.h) the dialling rank sends one hello naming the channel,
// its rank and the init session (CommunicatorOptions::session), so that a process of an
// earlier session (an elastic job's previous generation) reaching a new listener is refused
// instead of being mixed into the new mesh. A heartbeat hello also carries the hostname,
// for the messages that name a lost rank. Written and read by PeerHandshake (peer_handshake.h),
// for Create's connections (mesh_bootstrap.h) and lazy ones (lazy_connections.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/wire.h"

namespace tfring {
namespace mesh {

enum Channel : uint8_t { kData = 1, kControl = 2, kHeartbeat = 3 };
constexpr double kHelloTimeoutS = 10.0;
constexpr size_t kMaxHelloBytes = 1024;

inline std::string Hello(Channel channel, int rank, const std::string& session, const std::string& hostname) {
  WireWriter w;
  w.U8(channel);
  w.I32(rank);
  w.Str(session);
  if (channel == kHeartbeat) w.Str(hostname);
  return w.Take();
}

// The end of a socket's label: ")" for data, ", control)" or ", heartbeat)".
inline const char* Suffix(Channel channel) {
  return channel == kControl ? ", control)" : channel == kHeartbeat ? ", heartbeat)" : ")";
}

}  // namespace mesh
}  // namespace tfring
