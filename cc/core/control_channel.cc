#include "control_channel.h"

namespace tfring {
namespace {

constexpr size_t kMaxControlMessage = 256u << 20;
constexpr double kTellPeersTimeoutS = 1.0;

}  // namespace

ControlChannel::ControlChannel(int rank, int size, Communicator* comm, double timeout_s,
                               StatsRecorder* stats)
    : rank_(rank), size_(size), comm_(comm), timeout_s_(timeout_s), stats_(stats) {
  if (size_ == 1) return;
  if (rank_ == 0) {
    for (int p = 1; p < size_; ++p) peers_.push_back(p);
  } else {
    peers_.push_back(0);
  }
}

Socket& ControlChannel::SocketOf(int peer) {
  return rank_ == 0 ? comm_->control_from(peer) : comm_->control_to_root();
}

Status ControlChannel::Send(const ControlMessage& message) {
  if (peers_.empty()) return Status::OK();
  const std::string bytes = EncodeControl(message);
  stats_->Update([&](RuntimeStats& s) {
    s.control_bytes_sent += static_cast<int64_t>(bytes.size() * peers_.size());
    s.control_messages_sent += static_cast<int64_t>(peers_.size());
  });
  for (int p : peers_) {
    TFRING_RETURN_IF_ERROR(SocketOf(p).SendMessage(bytes, Deadline::After(timeout_s_), comm_->abort_flag()));
  }
  return Status::OK();
}

void ControlChannel::Tell(const ControlMessage& message) {
  if (peers_.empty()) return;
  const std::string bytes = EncodeControl(message);
  for (int p : peers_) SocketOf(p).SendMessage(bytes, Deadline::After(kTellPeersTimeoutS));
}

Status ControlChannel::Greet(double timeout_s) {
  if (peers_.empty()) return Status::OK();
  Deadline deadline = Deadline::After(timeout_s);
  if (rank_ != 0) {
    ControlMessage hello;
    hello.kind = ControlKind::kHello;
    return SocketOf(0).SendMessage(EncodeControl(hello), deadline, comm_->abort_flag());
  }
  std::vector<int> waiting = peers_;
  while (!waiting.empty()) {
    if (deadline.expired()) {
      std::string ranks;
      for (int p : waiting) ranks += (ranks.empty() ? "" : ", ") + std::to_string(p);
      return Status::Timeout("rank(s) " + ranks + " did not finish init within " + std::to_string(timeout_s) +
                             " s (TFRING_START_TIMEOUT_S)");
    }
    std::vector<pollfd> fds;
    for (int p : waiting) fds.push_back(pollfd{SocketOf(p).fd(), POLLIN, 0});
    if (poll(fds.data(), fds.size(), deadline.MillisLeft(100)) <= 0) continue;
    for (size_t i = fds.size(); i-- > 0;) {  // erase from the back: indexes stay valid
      if (!fds[i].revents) continue;
      ControlMessage message;
      TFRING_RETURN_IF_ERROR(ReceiveFrom(waiting[i], deadline, comm_->abort_flag(), &message));
      if (message.kind != ControlKind::kHello) {
        return Status::Internal("rank " + std::to_string(waiting[i]) + " sent control message kind " +
                                std::to_string(static_cast<int>(message.kind)) + " before its hello");
      }
      waiting.erase(waiting.begin() + static_cast<long>(i));
    }
  }
  return Status::OK();
}

void ControlChannel::AppendPollFds(std::vector<pollfd>* fds) const {
  for (int p : peers_) {
    Socket& s = const_cast<ControlChannel*>(this)->SocketOf(p);
    fds->push_back(pollfd{s.fd(), POLLIN, 0});
  }
}

Status ControlChannel::ReceiveFrom(int peer, Deadline deadline, const std::atomic<bool>* abort,
                                   ControlMessage* message) {
  std::string bytes;
  Status st = SocketOf(peer).RecvMessage(&bytes, kMaxControlMessage, deadline, abort);
  if (!st.ok()) {
    if (st.code() == ErrorCode::kPeerLost) {
      return Status::PeerLost("rank " + std::to_string(peer) +
                              " is gone: its connection closed (the process exited, crashed "
                              "or was killed). Collectives need every rank.");
    }
    return st;
  }
  st = DecodeControl(bytes, size_, message);
  if (!st.ok()) {
    return Status::Internal("corrupt control message from rank " + std::to_string(peer) + ": " + st.message());
  }
  return Status::OK();
}

Status ControlChannel::Receive(int wait_ms,
                               const std::function<Status(int from, ControlMessage& message)>& handle) {
  if (peers_.empty()) return Status::OK();
  std::vector<pollfd> fds;
  AppendPollFds(&fds);
  if (poll(fds.data(), fds.size(), wait_ms) <= 0) return Status::OK();
  for (size_t i = 0; i < fds.size(); ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    ControlMessage message;
    TFRING_RETURN_IF_ERROR(ReceiveFrom(peers_[i], Deadline::After(timeout_s_), comm_->abort_flag(), &message));
    TFRING_RETURN_IF_ERROR(handle(peers_[i], message));
  }
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
      ControlMessage message;
      Status st = ReceiveFrom(open[i], window, nullptr, &message);
      if (st.code() == ErrorCode::kInternal) continue;  // undecodable: not the abort we wait for
      if (!st.ok()) {
        if (*closed_peer < 0) *closed_peer = open[i];
        open.erase(open.begin() + static_cast<long>(i));
        break;
      }
      if (message.kind == ControlKind::kAbort) {
        *abort = std::move(message);
        return true;
      }
    }
  }
  return false;
}

}  // namespace tfring
