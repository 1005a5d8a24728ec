#include "link.h"

#include <poll.h>
#include <sched.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "cma.h"
#include "reduce_kernels.h"

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
  ssize_t n = sending ? ::send(link.socket.fd(), buf, left, MSG_NOSIGNAL)
                      : ::recv(link.socket.fd(), buf, left, 0);
  *moved = 0;
  if (n > 0) {
    *moved = static_cast<size_t>(n);
    return Status::OK();
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Status::OK();
  if (link.socket.fd() < 0) return Status::Aborted("transfer with " + link.label() + " aborted");
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
  if (!from.rx->PendingPost(&post)) return Status::OK();
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
  int err = CmaRead(from.cma_pid, post.addr, into, piece);
  if (err != 0) {
    return LocalAbortOr(Lost(from, "reading its buffer (single-copy)", CmaErrorText(err)), abort, from);
  }
  if (reduce != nullptr) {
    ReduceTo(dst, own, into, piece / DataTypeSize(reduce->dtype), reduce->dtype, reduce->op);
  }
  from.rx->ConsumePost(piece);
  from.cma_bytes_received += piece;
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
    fds[nfds++] = pollfd{to.socket.fd(), static_cast<short>(to.shm() ? POLLIN : POLLOUT), 0};
  }
  if (recv_waits) {
    links[nfds] = &from;
    fds[nfds++] = pollfd{from.socket.fd(), POLLIN, 0};
  }
  int rc = poll(fds, nfds, timeout_ms);
  if (rc < 0 && errno != EINTR) return Status::Internal(std::string("poll failed: ") + std::strerror(errno));
  for (int i = 0; i < nfds && rc > 0; ++i) {
    if (!links[i]->shm() || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    // A peer that finished its part and exited leaves its last bytes in the ring: drain
    // them before calling it lost.
    if (links[i] == &from && recv_waits && from.rx->Available() > 0) continue;
    char probe;
    ssize_t n = ::recv(links[i]->socket.fd(), &probe, 1, MSG_PEEK | MSG_DONTWAIT);
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

Status TransferImpl(Link& to, const void* send_buf, size_t send_size, Link& from, void* recv_buf,
                    size_t recv_size, Deadline deadline, const std::atomic<bool>* abort,
                    const std::function<void(size_t)>& on_received, const ReduceTarget* reduce) {
  char* sp = const_cast<char*>(static_cast<const char*>(send_buf));
  char* rp = static_cast<char*>(recv_buf);
  size_t sent = 0, received = 0;
  const bool send_shm = send_size > 0 && to.shm();
  const bool recv_shm = recv_size > 0 && from.shm();
  const bool send_post = send_shm && send_size >= to.cma_min_bytes;  // single-copy send
  const bool recv_cma = recv_shm && from.cma_pid > 0;                // the peer may post
  bool posted = false;
  const auto spin = std::chrono::microseconds(std::max(to.socket.spin_us(), from.socket.spin_us()));
  auto last_progress = Clock::now();
  bool send_aligned = !send_shm, recv_aligned = !recv_shm;
  RingSleep sleep;
  while (sent < send_size || received < recv_size) {
    if (!send_aligned) send_aligned = to.tx->TryAlignWrite();
    if (!recv_aligned) recv_aligned = from.rx->TryAlignRead();
    bool progressed = false;
    if (sent < send_size) {
      size_t n = 0;
      if (send_post) {
        if (send_aligned && !posted) {
          to.tx->PostBuffer(sp, send_size);
          posted = true;
        }
        if (posted) n = to.tx->PostRead() - sent;
      } else if (send_shm) {
        if (send_aligned) n = to.tx->TryWrite(sp + sent, send_size - sent);
      } else {
        Status st = TcpStep(to, true, sp + sent, send_size - sent, &n);
        if (!st.ok()) return LocalAbortOr(st, abort, to);
      }
      sent += n;
      to.bytes_sent += n;
      progressed |= n > 0;
    }
    if (received < recv_size) {
      size_t n = 0;
      if (recv_shm && recv_aligned) {
        const char* own = reduce && reduce->own ? reduce->own + received : rp + received;
        n = reduce ? from.rx->TryReadReduce(rp + received, recv_size - received, reduce->dtype, reduce->op, own)
                   : from.rx->TryRead(rp + received, recv_size - received);
        if (n == 0 && recv_cma) {
          Status st = CmaStep(from, rp + received, own, recv_size - received, reduce, abort, &n);
          if (!st.ok()) return st;
        }
      } else if (!recv_shm) {
        Status st = TcpStep(from, false, rp + received, recv_size - received, &n);
        if (!st.ok()) return LocalAbortOr(st, abort, from);
      }
      received += n;
      from.bytes_received += n;
      progressed |= n > 0;
      if (n > 0 && on_received) on_received(received);
    }
    if (progressed) {
      sleep.Disarm();
      last_progress = Clock::now();
      continue;
    }
    const auto idle = Clock::now() - last_progress;
    if (idle < spin) continue;  // short waits: spinning beats a sleep/wake cycle
    // Yielding (like spinning) only where this rank has a CPU of its own: where ranks
    // outnumber CPUs (spin 0) it takes the CPU from the rank it waits for.
    if ((send_shm || recv_shm) && spin.count() > 0 && idle < kShmYieldWindow) {
      sched_yield();
      continue;
    }
    if (abort && abort->load(std::memory_order_relaxed)) {
      return Status::Aborted("transfer with " + from.label() + " aborted: tfring is shutting down");
    }
    if (deadline.expired()) {
      return Status::Timeout("timed out exchanging data with " + to.label() + " / " + from.label() +
                             " (raise TFRING_TIMEOUT_S if peers are merely slow)");
    }
    const bool send_waits = sent < send_size, recv_waits = received < recv_size;
    if ((!send_waits || send_shm) && (!recv_waits || recv_shm)) {
      // Every side that waits is a ring: sleep on the rings (futex) until the peer moves
      // them. Armed first, then one more try (a move between the try above and the arming
      // would otherwise go unseen).
      if (!sleep.armed()) {
        sleep.Arm(send_waits ? to.tx.get() : nullptr, recv_waits ? from.rx.get() : nullptr);
        continue;
      }
      if (sleep.Sleep(deadline.MillisLeft(kShmSleepMs))) continue;
      // Nothing moved for kShmSleepMs: a dead peer never moves a ring, so look at its socket.
      TFRING_RETURN_IF_ERROR(WatchSockets(to, send_waits, from, recv_waits, 0, abort));
      continue;
    }
    // Sleep until a socket can move data, or (shared memory beside TCP) briefly while
    // watching the sockets for the peer's death.
    TFRING_RETURN_IF_ERROR(WatchSockets(to, send_waits, from, recv_waits,
                                        (send_shm || recv_shm) ? 1 : deadline.MillisLeft(kAbortPollMs), abort));
  }
  return Status::OK();
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
