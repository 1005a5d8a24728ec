#include "transport/peer_handshake.h"

#include <utility>

#include "base/logging.h"
#include "base/wire.h"
#include "rendezvous/auth.h"
#include "transport/mesh_hello.h"

namespace tfring {

using namespace mesh;  // NOLINT: the hello's vocabulary, transport's own

PeerHandshake::PeerHandshake(const CommunicatorOptions& opt, std::shared_ptr<PeerDirectory> directory)
    : rank_(opt.rank), size_(opt.size), secret_(opt.secret), session_(opt.session), hostname_(opt.hostname),
      directory_(std::move(directory)) {}

Status PeerHandshake::Dial(int peer, uint8_t channel, Deadline deadline, Socket* out) const {
  PeerCard card;
  TFRING_RETURN_IF_ERROR(directory_->Card(peer, deadline, &card));
  const std::string& addr = card.address;
  std::string host;
  int port = 0;
  TFRING_RETURN_IF_ERROR(ParseHostPort(addr, "address of rank " + std::to_string(peer), &host, &port));
  Socket s;
  TFRING_RETURN_IF_ERROR(Socket::Connect(host, port, deadline, &s));
  s.set_label("rank " + std::to_string(peer) + " (" + addr + Suffix(static_cast<Channel>(channel)));
  TFRING_RETURN_IF_ERROR(AuthenticateAsClient(s, secret_, Deadline::After(kHelloTimeoutS)));
  TFRING_RETURN_IF_ERROR(s.SendMessage(Hello(static_cast<Channel>(channel), rank_, session_, hostname_),
                                       Deadline::After(kHelloTimeoutS)));
  *out = std::move(s);
  return Status::OK();
}

bool PeerHandshake::ReadHello(Socket& s, uint8_t* channel, int* peer) const {
  Status st = AuthenticateAsServer(s, secret_, Deadline::After(kHelloTimeoutS));
  std::string hello;
  if (st.ok()) st = s.RecvMessage(&hello, kMaxHelloBytes, Deadline::After(kHelloTimeoutS));
  if (!st.ok()) {
    TFRING_LOG(LogLevel::kWarning, "transport", "refused " << s.label() << ": " << st.message());
    return false;
  }
  WireReader r(hello);
  *channel = r.U8();
  *peer = r.I32();
  const std::string session = r.Str();
  if (*channel == kHeartbeat) r.Str();  // the hostname, known from the roster since
  if (r.ok() && session != session_) {
    TFRING_LOG(LogLevel::kWarning, "transport",
               "refused " << s.label() << ": hello from rank " << *peer << " of init session '" << session
                          << "', this is '" << session_ << "' (a process of an earlier generation of the job)");
    return false;
  }
  if (!r.ok() || !r.AtEnd() || *peer < 0 || *peer >= size_ || *peer == rank_) *peer = -1;
  return true;
}

}  // namespace tfring
