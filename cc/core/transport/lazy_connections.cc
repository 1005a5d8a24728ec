// LazyConnections (lazy_connections.h): this rank dials the peer, or takes the connection
// the peer dialled, which the ConnectionPark's thread admitted.
#include "transport/lazy_connections.h"

#include <string>
#include <utility>

#include "base/logging.h"
#include "transport/mesh_hello.h"

namespace tfring {

using namespace mesh;  // NOLINT: the hello's vocabulary, transport's own

LazyConnections::LazyConnections(const CommunicatorOptions& opt, PeerHandshake handshake, const RosterFacts& facts,
                                 const PeerCard& mine, const std::atomic<bool>* aborted)
    : rank_(opt.rank), size_(opt.size), timeout_s_(opt.timeout_s), peer_timeout_s_(opt.peer_timeout_s),
      handshake_(std::move(handshake)), pairing_(opt, facts, mine), facts_(facts), aborted_(aborted),
      tried_(static_cast<size_t>(opt.size), false) {}

void LazyConnections::Start(Listener listener) {
  park_.Start(std::move(listener), [this](ParkedConnection* c) { return Admit(c); }, rank_);
}

void LazyConnections::Connect(int peer, Link& link, int spin_us) {
  if (peer == rank_ || peer < 0 || peer >= size_ || tried_[peer] || aborted_->load()) return;
  tried_[peer] = true;
  const Deadline deadline = Deadline::After(timeout_s_);
  ParkedConnection c;
  Socket& s = c.socket;
  Status st;
  if (park_.BeginDial(peer, &c)) {  // not parked yet: dial it (connection_park.h)
    st = handshake_.Dial(peer, kData, deadline, &s);
    if (st.ok() && pairing_.Applies(peer)) st = pairing_.Offer(peer, &c);  // before the verdict: shm_pairing.h
    std::string verdict;
    if (st.ok()) st = s.RecvMessage(&verdict, 1, Deadline::After(kHelloTimeoutS), aborted_);
    if (st.ok() && verdict != std::string(1, ConnectionPark::kAccept)) {
      c = ParkedConnection();  // declined: the peer dialled too, and the lower rank's connection wins
      st = verdict == std::string(1, ConnectionPark::kDecline)
               ? park_.Take(peer, deadline, aborted_, &c)
               : Status::Internal("rank " + std::to_string(peer) + " answered a data connection with '" + verdict + "'");
    }
  }
  if (!st.ok()) {
    TFRING_LOG(LogLevel::kDebug, "transport", "no data connection with rank " << peer << ": " << st.message());
    link.socket().set_label(facts_.DescribePeer(peer) + " (no data connection: " + st.message() + ")");
    return;
  }
  s.SetPeerTimeout(peer_timeout_s_);
  s.set_spin_us(spin_us);
  link.Connected(std::move(s));
  if (c.tx != nullptr && c.rx != nullptr) link.AttachRings(std::move(c.tx), std::move(c.rx));
  link.ReadPostsOf(c.read_posts_of);
  link.PostSendsFrom(c.post_sends_from);
  facts_.LabelData(peer, link.socket());
}

int LazyConnections::Admit(ParkedConnection* c) const {
  Socket& s = c->socket;
  uint8_t channel = 0;
  int peer = -1;
  if (!handshake_.ReadHello(s, &channel, &peer)) return -1;
  if (peer < 0 || channel != kData) {
    TFRING_LOG(LogLevel::kWarning, "transport",
               "refused " << s.label() << ": unexpected data hello (channel " << int(channel) << ", rank " << peer << ")");
    return -1;
  }
  s.set_label("rank " + std::to_string(peer) + " (" + s.PeerAddress() + ")");
  if (pairing_.Applies(peer)) {
    const Status st = pairing_.Answer(peer, c);
    if (!st.ok()) {
      TFRING_LOG(LogLevel::kWarning, "transport", "refused rank " << peer << "'s data connection: " << st.message());
      return -1;
    }
  }
  return peer;
}

}  // namespace tfring
