#include "control/control_channel.h"

#include <ctime>

#include "base/wire.h"

namespace tfring {
namespace {

constexpr size_t kMaxControlMessage = 256u << 20;
constexpr double kTellPeersTimeoutS = 1.0;
constexpr size_t kSeqBytes = 8;
// A ring frame: 8-byte length of what follows, 8-byte sequence number, encoded message.
constexpr size_t kFrameHeaderBytes = 16;

// A TCP control message: its sequence number (0: unordered), then its encoding (none: a
// doorbell). Little-endian, as all of wire.h.
std::string WithSeq(uint64_t seq, const std::string& body) {
  WireWriter w;
  w.I64(static_cast<int64_t>(seq));
  return w.Take() + body;
}

}  // namespace

ControlChannel::ControlChannel(int rank, int size, Communicator* comm, double timeout_s,
                               StatsRecorder* stats)
    : rank_(rank), size_(size), comm_(comm), timeout_s_(timeout_s), stats_(stats) {
  if (size_ == 1) return;
  const ControlTree& tree = comm_->control_tree();
  parent_ = tree.parent();
  children_ = tree.children();
  peers_ = tree.neighbours();
  order_.resize(static_cast<size_t>(size_));
}

Socket& ControlChannel::SocketOf(int peer) { return comm_->control(peer); }

Status ControlChannel::SendToParent(const ControlMessage& message) {
  if (parent_ < 0) return Status::Internal("rank 0 has no parent in the control tree to send to");
  const std::string bytes = EncodeControl(message);
  stats_->Update([&](RuntimeStats& s) {
    s.control_bytes_sent += static_cast<int64_t>(bytes.size());
    s.control_messages_sent += 1;
  });
  return SendOne(parent_, bytes, Deadline::After(timeout_s_));
}

Status ControlChannel::SendToChildren(const ControlMessage& message) {
  if (children_.empty()) return Status::OK();
  const std::string bytes = EncodeControl(message);
  stats_->Update([&](RuntimeStats& s) {
    s.control_bytes_sent += static_cast<int64_t>(bytes.size() * children_.size());
    s.control_messages_sent += static_cast<int64_t>(children_.size());
  });
  const Deadline deadline = Deadline::After(timeout_s_);
  for (int p : children_) TFRING_RETURN_IF_ERROR(SendOne(p, bytes, deadline));
  return Status::OK();
}

Status ControlChannel::SendOne(int peer, const std::string& body, Deadline deadline) {
  const uint64_t seq = order_[peer].next_send++;
  ShmRing* ring = comm_->control_shm_tx(peer);
  const size_t frame_bytes = kFrameHeaderBytes + body.size();
  if (ring == nullptr || ring->Room() < frame_bytes) {
    return SocketOf(peer).SendMessage(WithSeq(seq, body), deadline, comm_->abort_flag());
  }
  WireWriter header;
  header.I64(static_cast<int64_t>(kSeqBytes + body.size()));
  header.I64(static_cast<int64_t>(seq));
  frame_ = header.Take();
  frame_ += body;
  ring->TryWrite(frame_.data(), frame_bytes);  // takes all of it: Room() said so
  ++shm_messages_sent_;
  if (!ring->ReaderSleeping()) return Status::OK();
  return SocketOf(peer).SendMessage(WithSeq(0, ""), deadline, comm_->abort_flag());  // the doorbell
}

void ControlChannel::Tell(const ControlMessage& message) {
  if (peers_.empty()) return;
  const std::string bytes = WithSeq(0, EncodeControl(message));
  for (int p : peers_) SocketOf(p).SendMessage(bytes, Deadline::After(kTellPeersTimeoutS));
}

Status ControlChannel::Greet(double timeout_s) {
  if (peers_.empty()) return Status::OK();
  Deadline deadline = Deadline::After(timeout_s);
  std::vector<int> waiting = children_;
  while (!waiting.empty()) {
    if (deadline.expired()) {
      std::string ranks;
      for (int p : waiting) ranks += (ranks.empty() ? "" : ", ") + std::to_string(p);
      return Status::Timeout("rank(s) " + ranks + " (or a rank below them in the control tree) did not finish "
                             "init within " + std::to_string(timeout_s) + " s (TFRING_START_TIMEOUT_S)");
    }
    std::vector<pollfd> fds;
    for (int p : waiting) fds.push_back(pollfd{SocketOf(p).fd(), POLLIN, 0});
    if (poll(fds.data(), fds.size(), deadline.MillisLeft(100)) <= 0) continue;
    for (size_t i = fds.size(); i-- > 0;) {  // erase from the back: indexes stay valid
      if (!fds[i].revents) continue;
      Incoming in;
      TFRING_RETURN_IF_ERROR(ReceiveFrom(waiting[i], deadline, comm_->abort_flag(), &in));
      if (in.doorbell || in.message.kind != ControlKind::kHello) {
        return Status::Internal("rank " + std::to_string(waiting[i]) + " sent control message kind " +
                                std::to_string(static_cast<int>(in.message.kind)) + " before its hello");
      }
      waiting.erase(waiting.begin() + static_cast<long>(i));
    }
  }
  if (parent_ < 0) return Status::OK();
  ControlMessage hello;
  hello.kind = ControlKind::kHello;
  return SocketOf(parent_).SendMessage(WithSeq(0, EncodeControl(hello)), deadline, comm_->abort_flag());
}

void ControlChannel::AppendPollFds(std::vector<pollfd>* fds) const {
  for (int p : peers_) {
    Socket& s = const_cast<ControlChannel*>(this)->SocketOf(p);
    fds->push_back(pollfd{s.fd(), POLLIN, 0});
  }
}

Status ControlChannel::ReceiveFrom(int peer, Deadline deadline, const std::atomic<bool>* abort, Incoming* in) {
  std::string bytes;
  Status st = SocketOf(peer).RecvMessage(&bytes, kMaxControlMessage, deadline, abort);
  if (!st.ok()) {
    if (st.code() == ErrorCode::kPeerLost) {
      return Status::PeerLost(comm_->DescribePeer(peer) +
                              " is gone: its connection closed (the process exited, crashed "
                              "or was killed). Collectives need every rank.");
    }
    return st;
  }
  if (bytes.size() < kSeqBytes) {
    return Status::Internal("corrupt control message from rank " + std::to_string(peer) + ": " +
                            std::to_string(bytes.size()) + " bytes, shorter than its sequence number");
  }
  in->seq = static_cast<uint64_t>(WireReader(bytes).I64());
  in->doorbell = bytes.size() == kSeqBytes;
  if (in->doorbell) return Status::OK();
  st = DecodeControl(bytes.substr(kSeqBytes), size_, &in->message);
  if (!st.ok()) {
    return Status::Internal("corrupt control message from rank " + std::to_string(peer) + ": " + st.message());
  }
  return Status::OK();
}

Status ControlChannel::Deliver(int peer, Incoming& in, const std::function<Status(int, ControlMessage&)>& handle) {
  if (in.doorbell) return Status::OK();
  if (in.seq == 0) return handle(peer, in.message);
  PeerOrder& order = order_[peer];
  if (in.seq != order.next_deliver) {
    if (in.seq < order.next_deliver || !order.early.emplace(in.seq, std::move(in.message)).second) {
      return Status::Internal("control message " + std::to_string(in.seq) + " from rank " + std::to_string(peer) +
                              " arrived twice");
    }
    ++reordered_;
    return Status::OK();
  }
  ++order.next_deliver;
  TFRING_RETURN_IF_ERROR(handle(peer, in.message));
  for (auto it = order.early.find(order.next_deliver); it != order.early.end();
       it = order.early.find(order.next_deliver)) {
    ControlMessage next = std::move(it->second);
    order.early.erase(it);
    ++order.next_deliver;
    TFRING_RETURN_IF_ERROR(handle(peer, next));
  }
  return Status::OK();
}

Status ControlChannel::DrainShm(int peer, const std::function<Status(int, ControlMessage&)>& handle) {
  ShmRing* ring = comm_->control_shm_rx(peer);
  if (ring == nullptr) return Status::OK();
  std::string header(kFrameHeaderBytes, '\0');
  while (ring->Available() >= kFrameHeaderBytes) {  // a frame is published whole
    ring->TryRead(header.data(), kFrameHeaderBytes);
    WireReader fields(header);
    const uint64_t length = static_cast<uint64_t>(fields.I64());
    const uint64_t seq = static_cast<uint64_t>(fields.I64());
    if (length < kSeqBytes || length - kSeqBytes > ring->Available()) {
      return Status::Internal("corrupt shared-memory control frame from rank " + std::to_string(peer) + " (length " +
                              std::to_string(length) + ")");
    }
    std::string body(static_cast<size_t>(length - kSeqBytes), '\0');
    ring->TryRead(body.data(), body.size());
    Incoming in;
    in.seq = seq;
    Status st = DecodeControl(body, size_, &in.message);
    if (!st.ok()) {
      return Status::Internal("corrupt control message from rank " + std::to_string(peer) + ": " + st.message());
    }
    TFRING_RETURN_IF_ERROR(Deliver(peer, in, handle));
  }
  return Status::OK();
}

bool ControlChannel::ShmPending() const {
  for (int p : peers_) {
    ShmRing* ring = comm_->control_shm_rx(p);
    if (ring != nullptr && ring->Available() > 0) return true;
  }
  return false;
}

void ControlChannel::MarkSleeping(bool sleeping) {
  for (int p : peers_) {
    if (ShmRing* ring = comm_->control_shm_rx(p)) ring->SetReaderSleeping(sleeping);
  }
}

int PollMicros(std::vector<pollfd>* fds, int64_t timeout_us) {
  if (timeout_us < 0) return ppoll(fds->data(), fds->size(), nullptr, nullptr);
  const timespec ts{static_cast<time_t>(timeout_us / 1000000), static_cast<long>(timeout_us % 1000000) * 1000};
  return ppoll(fds->data(), fds->size(), &ts, nullptr);
}

int ControlChannel::PollAsleep(std::vector<pollfd>* fds, int64_t timeout_us) {
  MarkSleeping(true);
  const int rc = ShmPending() ? 0 : PollMicros(fds, timeout_us);
  MarkSleeping(false);
  return rc;
}

Status ControlChannel::Receive(int wait_ms,
                               const std::function<Status(int from, ControlMessage& message)>& handle) {
  if (peers_.empty()) return Status::OK();
  std::vector<pollfd> fds;
  AppendPollFds(&fds);
  int ready = wait_ms > 0 ? PollAsleep(&fds, int64_t{wait_ms} * 1000) : 0;
  if (ready == 0) ready = poll(fds.data(), fds.size(), 0);
  // TCP first: a message that took TCP was sent after every ring frame before it, so the
  // rings then hold whatever it must wait for.
  for (size_t i = 0; ready > 0 && i < fds.size(); ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    Incoming in;
    TFRING_RETURN_IF_ERROR(ReceiveFrom(peers_[i], Deadline::After(timeout_s_), comm_->abort_flag(), &in));
    // An unordered message (an abort, a shutdown) is handled at once, but not before what
    // the peer put in the ring ahead of it: an error response must not lose to "rank 0 has
    // shut down".
    if (in.seq == 0 && !in.doorbell) TFRING_RETURN_IF_ERROR(DrainShm(peers_[i], handle));
    TFRING_RETURN_IF_ERROR(Deliver(peers_[i], in, handle));
  }
  for (int p : peers_) TFRING_RETURN_IF_ERROR(DrainShm(p, handle));
  return Status::OK();
}

bool ControlChannel::AwaitAbort(double window_s, ControlMessage* abort, int* closed_peer) {
  *closed_peer = -1;
  Deadline window = Deadline::After(window_s);
  std::vector<int> open = peers_;
  while (!window.expired() && !open.empty()) {
    std::vector<pollfd> fds;
    for (int p : open) fds.push_back(pollfd{SocketOf(p).fd(), POLLIN, 0});
    if (poll(fds.data(), fds.size(), window.MillisLeft(50)) <= 0) continue;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      Incoming in;
      Status st = ReceiveFrom(open[i], window, nullptr, &in);
      if (st.code() == ErrorCode::kInternal) continue;  // undecodable: not the abort we wait for
      if (!st.ok()) {
        if (*closed_peer < 0) *closed_peer = open[i];
        open.erase(open.begin() + static_cast<long>(i));
        break;
      }
      if (!in.doorbell && in.message.kind == ControlKind::kAbort) {
        *abort = std::move(in.message);
        return true;
      }
      if (!in.doorbell && in.message.kind == ControlKind::kShutdown) {  // rank 0 hears of a departure
        *abort = DepartureMessage(open[i]);
        return true;
      }
    }
  }
  return false;
}

}  // namespace tfring
