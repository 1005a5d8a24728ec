#include "transport/link.h"

#include <poll.h>
#include <sched.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "transport/cma.h"
#include "base/reduce_kernels.h"

namespace tfring {
namespace {

using Clock = std::chrono::steady_clock;

// After the spin, a shared-memory wait yields the CPU (TF threads may need it) for this
// long before it sleeps on the rings (a futex the peer wakes when it moves them).
constexpr auto kShmYieldWindow = std::chrono::milliseconds(5);
// The longest such sleep without a look at the peers' sockets (a dead peer never wakes it)
// and at the abort flag (an Abort() wakes it at once).
constexpr int kShmSleepMs = 10;

// Largest single-copy read of a plain (non-reducing) receive: bounds how long the loop goes
// without serving its send side and looking at the abort flag (~0.1-0.2 ms here).
constexpr size_t kCmaCopyPieceBytes = 1 << 20;

Status Lost(const Link& link, const char* what, const std::string& reason) {
  return Status::PeerLost("lost connection to " + link.label() + " while " + what + " (" + reason +
                          "): the peer process died, was killed, or aborted after its own error");
}

// Moves bytes over TCP without blocking. Returns bytes moved (0 = would block) or an error.
Status TcpStep(Link& link, bool sending, char* buf, size_t left, size_t* moved) {
  ssize_t n = sending ? ::send(link.socket().fd(), buf, left, MSG_NOSIGNAL)
                      : ::recv(link.socket().fd(), buf, left, 0);
  *moved = 0;
  if (n > 0) {
    *moved = static_cast<size_t>(n);
    return Status::OK();
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Status::OK();
  if (link.socket().fd() < 0) return Status::Aborted("transfer with " + link.label() + " aborted");
  return Lost(link, sending ? "sending" : "receiving",
              n < 0 ? std::string(std::strerror(errno)) : "the peer closed the connection");
}

struct ReduceTarget {
  DataType dtype;
  ReduceOp op;
  char* scratch;       // single-copy posts are read here piece by piece, then reduced
  size_t piece_bytes;  // a multiple of the element size
  const char* own;     // this rank's operand (recv_size bytes); null: the receive buffer itself
};

// A local Abort() shuts this rank's sockets down, which then read as closed connections:
// report that as the abort it is, not as a dead peer.
Status LocalAbortOr(const Status& st, const std::atomic<bool>* abort, const Link& link) {
  if (!st.ok() && abort && abort->load()) {
    return Status::Aborted("transfer with " + link.label() + " aborted: tfring is shutting down");
  }
  return st;
}

// Reads what it can of a single-copy post waiting at `from`'s read position: straight into
// `dst`, or (reducing) a piece into the scratch, reduced into `dst` at once. *n: bytes
// consumed, 0 when no post is there (yet).
// `own`: this rank's operand for `dst` when reducing (may be dst).
Status CmaStep(Link& from, char* dst, const char* own, size_t left, const ReduceTarget* reduce,
               const std::atomic<bool>* abort, size_t* n) {
  *n = 0;
  ShmRing::Post post;
  if (!from.rx()->PendingPost(&post)) return Status::OK();
  size_t piece = std::min(left, post.left);
  char* into = dst;
  if (reduce != nullptr) {
    const size_t es = DataTypeSize(reduce->dtype);
    piece = std::min(piece, reduce->piece_bytes);
    piece -= piece % es;
    if (piece == 0) {
      return Status::Internal("single-copy data from " + from.label() +
                              " does not hold whole elements (sender and receiver disagree on sizes)");
    }
    into = reduce->scratch;
  } else {
    piece = std::min(piece, kCmaCopyPieceBytes);
  }
  int err = CmaRead(from.cma_pid(), post.addr, into, piece);
  if (err != 0) {
    return LocalAbortOr(Lost(from, "reading its buffer (single-copy)", CmaErrorText(err)), abort, from);
  }
  if (reduce != nullptr) {
    ReduceTo(dst, own, into, piece / DataTypeSize(reduce->dtype), reduce->dtype, reduce->op);
  }
  from.rx()->ConsumePost(piece);
  from.RecordReadSingleCopy(piece);
  *n = piece;
  return Status::OK();
}

// Waits up to `timeout_ms` for the sockets of the pending sides: a TCP side until it can
// move data, a shared-memory side (whose socket carries no data) for its peer's death.
// Returns kPeerLost for a shared-memory peer whose socket closed, once its ring is drained.
Status WatchSockets(Link& to, bool send_waits, Link& from, bool recv_waits, int timeout_ms,
                    const std::atomic<bool>* abort) {
  pollfd fds[2];
  Link* links[2];
  int nfds = 0;
  if (send_waits) {
    links[nfds] = &to;
    fds[nfds++] = pollfd{to.socket().fd(), static_cast<short>(to.shm() ? POLLIN : POLLOUT), 0};
  }
  if (recv_waits) {
    links[nfds] = &from;
    fds[nfds++] = pollfd{from.socket().fd(), POLLIN, 0};
  }
  int rc = poll(fds, nfds, timeout_ms);
  if (rc < 0 && errno != EINTR) return Status::Internal(std::string("poll failed: ") + std::strerror(errno));
  for (int i = 0; i < nfds && rc > 0; ++i) {
    if (!links[i]->shm() || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    // A peer that finished its part and exited leaves its last bytes in the ring: drain
    // them before calling it lost.
    if (links[i] == &from && recv_waits && from.rx()->Available() > 0) continue;
    char probe;
    ssize_t n = ::recv(links[i]->socket().fd(), &probe, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      return LocalAbortOr(Lost(*links[i], "exchanging data over shared memory", "its socket closed"),
                          abort, *links[i]);
    }
  }
  return Status::OK();
}

// The futex sleep of a transfer whose every waiting side is a shared-memory ring
// (shm_ring.h, "Sleeping on a ring"). Arm() before one more try; Sleep() when that try
// moved nothing; every path out disarms (the destructor too).
class RingSleep {
 public:
  ~RingSleep() { Disarm(); }
  bool armed() const { return n_ > 0; }
  void Arm(ShmRing* writing, ShmRing* reading) {
    if (reading != nullptr) waiters_[n_++] = (reader_ = reading)->ArmReaderWait();
    if (writing != nullptr) waiters_[n_++] = (writer_ = writing)->ArmWriterWait();
  }
  // False when nothing moved for `timeout_ms`.
  bool Sleep(int timeout_ms) {
    bool woken = ShmRing::SleepOnAny(waiters_, n_, timeout_ms);
    Disarm();
    return woken;
  }
  void Disarm() {
    if (reader_ != nullptr) reader_->DisarmReaderWait();
    if (writer_ != nullptr) writer_->DisarmWriterWait();
    reader_ = writer_ = nullptr;
    n_ = 0;
  }

 private:
  ShmRing::Waiter waiters_[2];
  int n_ = 0;
  ShmRing* reader_ = nullptr;
  ShmRing* writer_ = nullptr;
};

// One Transfer in progress: its send side (to `to`) and receive side (from `from`), each
// over shared memory (copied through the ring or posted single-copy) or over TCP, and how
// it waits when neither moves. Run() is the whole transfer; each step is a member.
class TransferRun {
 public:
  TransferRun(Link& to, const void* send_buf, size_t send_size, Link& from, void* recv_buf, size_t recv_size,
              Deadline deadline, const std::atomic<bool>* abort, const std::function<void(size_t)>& on_received,
              const ReduceTarget* reduce)
      : to_(to), from_(from), sp_(const_cast<char*>(static_cast<const char*>(send_buf))),
        rp_(static_cast<char*>(recv_buf)), send_size_(send_size), recv_size_(recv_size), deadline_(deadline),
        abort_(abort), on_received_(on_received), reduce_(reduce),
        send_shm_(send_size > 0 && to.shm()), recv_shm_(recv_size > 0 && from.shm()),
        send_post_(send_shm_ && send_size >= to.cma_min_bytes()), recv_cma_(recv_shm_ && from.cma_pid() > 0),
        spin_(std::max(to.socket().spin_us(), from.socket().spin_us())),
        send_aligned_(!send_shm_), recv_aligned_(!recv_shm_) {}

  Status Run() {
    last_progress_ = Clock::now();
    while (sent_ < send_size_ || received_ < recv_size_) {
      if (!send_aligned_) send_aligned_ = to_.tx()->TryAlignWrite();
      if (!recv_aligned_) recv_aligned_ = from_.rx()->TryAlignRead();
      size_t out = 0, in = 0;
      if (sent_ < send_size_) TFRING_RETURN_IF_ERROR(SendSome(&out));
      if (received_ < recv_size_) TFRING_RETURN_IF_ERROR(ReceiveSome(&in));
      if (out > 0 || in > 0) {
        sleep_.Disarm();
        last_progress_ = Clock::now();
        if (const uint64_t ns = FlowEnded(out, sent_, send_size_, &send_started_)) to_.RecordSendFlow(ns);
        if (const uint64_t ns = FlowEnded(in, received_, recv_size_, &recv_started_)) from_.RecordReceiveFlow(ns);
        continue;
      }
      TFRING_RETURN_IF_ERROR(WaitForProgress());
    }
    return Status::OK();
  }

 private:
  // Moves what it can of the send side without blocking; *n: bytes moved.
  Status SendSome(size_t* n) {
    if (send_post_) {
      if (send_aligned_ && !posted_) {
        to_.tx()->PostBuffer(sp_, send_size_);
        posted_ = true;
      }
      if (posted_) *n = to_.tx()->PostRead() - sent_;
    } else if (send_shm_) {
      if (send_aligned_) *n = to_.tx()->TryWrite(sp_ + sent_, send_size_ - sent_);
    } else {
      Status st = TcpStep(to_, true, sp_ + sent_, send_size_ - sent_, n);
      if (!st.ok()) return LocalAbortOr(st, abort_, to_);
    }
    sent_ += *n;
    to_.RecordSent(*n);
    return Status::OK();
  }

  // Moves (or reduces) what it can of the receive side without blocking; *n: bytes moved.
  Status ReceiveSome(size_t* n) {
    if (recv_shm_ && recv_aligned_) {
      const char* own = reduce_ && reduce_->own ? reduce_->own + received_ : rp_ + received_;
      *n = reduce_ ? from_.rx()->TryReadReduce(rp_ + received_, recv_size_ - received_, reduce_->dtype, reduce_->op, own)
                   : from_.rx()->TryRead(rp_ + received_, recv_size_ - received_);
      if (*n == 0 && recv_cma_) {
        TFRING_RETURN_IF_ERROR(CmaStep(from_, rp_ + received_, own, recv_size_ - received_, reduce_, abort_, n));
      }
    } else if (!recv_shm_) {
      Status st = TcpStep(from_, false, rp_ + received_, recv_size_ - received_, n);
      if (!st.ok()) return LocalAbortOr(st, abort_, from_);
    }
    received_ += *n;
    from_.RecordReceived(*n);
    if (*n > 0 && on_received_) on_received_(received_);
    return Status::OK();
  }

  // A side moved `n` bytes (now `done` of `size`) at last_progress_: its flow time (first
  // to last byte of this transfer, Link::*_flow_ns()) starts at its first move and is
  // returned at its last (0 otherwise: the link records nothing). A side done in one move
  // has 0 and costs no clock read.
  uint64_t FlowEnded(size_t n, size_t done, size_t size, Clock::time_point* started) const {
    if (n == 0) return 0;
    if (done == n) *started = last_progress_;
    if (done != size) return 0;
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(last_progress_ - *started).count());
  }

  // Nothing moved on either side: spin, yield, or sleep until something may move (bounded
  // by the deadline and the abort flag); an error when the transfer cannot go on.
  Status WaitForProgress() {
    const auto idle = Clock::now() - last_progress_;
    if (idle < spin_) return Status::OK();  // short waits: spinning beats a sleep/wake cycle
    // Yielding (like spinning) only where this rank has a CPU of its own: where ranks
    // outnumber CPUs (spin 0) it takes the CPU from the rank it waits for.
    if ((send_shm_ || recv_shm_) && spin_.count() > 0 && idle < kShmYieldWindow) {
      sched_yield();
      return Status::OK();
    }
    if (abort_ && abort_->load(std::memory_order_relaxed)) {
      return Status::Aborted("transfer with " + from_.label() + " aborted: tfring is shutting down");
    }
    if (deadline_.expired()) {
      return Status::Timeout("timed out exchanging data with " + to_.label() + " / " + from_.label() +
                             " (raise TFRING_TIMEOUT_S if peers are merely slow)");
    }
    const bool send_waits = sent_ < send_size_, recv_waits = received_ < recv_size_;
    if ((!send_waits || send_shm_) && (!recv_waits || recv_shm_)) return SleepOnRings(send_waits, recv_waits);
    // Sleep until a socket can move data, or (shared memory beside TCP) briefly while
    // watching the sockets for the peer's death.
    return WatchSockets(to_, send_waits, from_, recv_waits,
                        (send_shm_ || recv_shm_) ? 1 : deadline_.MillisLeft(kAbortPollMs), abort_);
  }

  // Every side that waits is a ring: sleep on the rings (futex) until the peer moves them.
  // Armed first, then one more try (a move between the last try and the arming would
  // otherwise go unseen).
  Status SleepOnRings(bool send_waits, bool recv_waits) {
    if (!sleep_.armed()) {
      sleep_.Arm(send_waits ? to_.tx() : nullptr, recv_waits ? from_.rx() : nullptr);
      return Status::OK();
    }
    if (sleep_.Sleep(deadline_.MillisLeft(kShmSleepMs))) return Status::OK();
    // Nothing moved for kShmSleepMs: a dead peer never moves a ring, so look at its socket.
    return WatchSockets(to_, send_waits, from_, recv_waits, 0, abort_);
  }

  Link& to_;
  Link& from_;
  char* const sp_;
  char* const rp_;
  const size_t send_size_, recv_size_;
  const Deadline deadline_;
  const std::atomic<bool>* const abort_;
  const std::function<void(size_t)>& on_received_;
  const ReduceTarget* const reduce_;
  const bool send_shm_, recv_shm_;
  const bool send_post_;  // single-copy send
  const bool recv_cma_;   // the peer may post
  const std::chrono::microseconds spin_;
  bool send_aligned_, recv_aligned_;
  bool posted_ = false;
  size_t sent_ = 0, received_ = 0;
  Clock::time_point last_progress_, send_started_, recv_started_;
  RingSleep sleep_;
};

Status TransferImpl(Link& to, const void* send_buf, size_t send_size, Link& from, void* recv_buf,
                    size_t recv_size, Deadline deadline, const std::atomic<bool>* abort,
                    const std::function<void(size_t)>& on_received, const ReduceTarget* reduce) {
  return TransferRun(to, send_buf, send_size, from, recv_buf, recv_size, deadline, abort, on_received, reduce)
      .Run();
}

}  // namespace

Status Transfer(Link& to, const void* send_buf, size_t send_size, Link& from, void* recv_buf,
                size_t recv_size, Deadline deadline, const std::atomic<bool>* abort,
                const std::function<void(size_t)>& on_received) {
  return TransferImpl(to, send_buf, send_size, from, recv_buf, recv_size, deadline, abort,
                      on_received, nullptr);
}

Status TransferReduce(Link& to, const void* send_buf, size_t send_size, Link& from,
                      void* accumulate, size_t recv_size, DataType dtype, ReduceOp op,
                      char* scratch, size_t chunk_bytes, Deadline deadline,
                      const std::atomic<bool>* abort, const void* own) {
  const char* own_bytes = static_cast<const char*>(own != nullptr ? own : accumulate);
  if (recv_size > 0 && from.shm()) {
    const size_t es = DataTypeSize(dtype);
    ReduceTarget target{dtype, op, scratch, std::max(es, chunk_bytes - chunk_bytes % es), own_bytes};
    return TransferImpl(to, send_buf, send_size, from, accumulate, recv_size, deadline, abort,
                        nullptr, &target);
  }
  const size_t es = DataTypeSize(dtype);
  char* dst = static_cast<char*>(accumulate);
  size_t reduced = 0;
  auto reduce_arrived = [&](size_t arrived) {
    size_t whole = arrived - arrived % es;
    if (whole - reduced >= chunk_bytes || whole == recv_size) {
      ReduceTo(dst + reduced, own_bytes + reduced, scratch + reduced, (whole - reduced) / es, dtype, op);
      reduced = whole;
    }
  };
  TFRING_RETURN_IF_ERROR(TransferImpl(to, send_buf, send_size, from, scratch, recv_size, deadline,
                                      abort, reduce_arrived, nullptr));
  if (reduced < recv_size) reduce_arrived(recv_size);
  return Status::OK();
}

}  // namespace tfring
