// Data connections made when a collective first needs them (TFRING_DATA_CONNECTIONS=lazy;
// communicator.h, connection_park.h): this rank dials the peer, or takes the connection the
// peer dialled, which the ConnectionPark's thread admitted.
#include "transport/communicator.h"

#include "base/logging.h"
#include "transport/mesh_hello.h"

namespace tfring {

using namespace mesh;  // NOLINT: the hello's vocabulary, transport's own

void Communicator::ConnectLazily(int peer) {
  if (peer == rank_ || peer < 0 || peer >= size_ || lazy_tried_[peer] || aborted_.load()) return;
  lazy_tried_[peer] = true;
  const Deadline deadline = Deadline::After(timeout_s_);
  Socket s;
  Status st;
  if (park_.BeginDial(peer, &s)) {  // not parked yet: dial it (connection_park.h)
    st = Dial(peer, kData, deadline, &s);
    std::string verdict;
    if (st.ok()) st = s.RecvMessage(&verdict, 1, Deadline::After(kHelloTimeoutS), &aborted_);
    if (st.ok() && verdict != std::string(1, ConnectionPark::kAccept)) {
      s = Socket();  // declined: the peer dialled too, and the lower rank's connection wins
      st = verdict == std::string(1, ConnectionPark::kDecline)
               ? park_.Take(peer, deadline, &aborted_, &s)
               : Status::Internal("rank " + std::to_string(peer) + " answered a data connection with '" + verdict + "'");
    }
  }
  Link& link = data_[peer];
  if (!st.ok()) {
    TFRING_LOG(LogLevel::kDebug, "transport", "no data connection with rank " << peer << ": " << st.message());
    link.socket.set_label(DescribePeer(peer) + " (no data connection: " + st.message() + ")");
    return;
  }
  s.SetPeerTimeout(peer_timeout_s_);
  s.set_spin_us(spin_us_);
  link.socket = std::move(s);
  LabelData(peer);
}

int Communicator::AdmitData(Socket& s) {
  uint8_t channel = 0;
  int peer = -1;
  if (!ReadHello(s, &channel, &peer)) return -1;
  if (peer < 0 || channel != kData) {
    TFRING_LOG(LogLevel::kWarning, "transport",
               "refused " << s.label() << ": unexpected data hello (channel " << int(channel) << ", rank " << peer << ")");
    return -1;
  }
  s.set_label("rank " + std::to_string(peer) + " (" + s.PeerAddress() + ")");
  return peer;
}

}  // namespace tfring
