// Socket and Listener: non-blocking TCP with deadlines and an abort flag.
//
// Contract:
//   * Every call that can block takes a Deadline and returns kTimeout when it passes.
//   * Every call that can block also takes an optional `abort` flag; when it becomes true the
//     call returns kAborted within ~kAbortPollMs. Closing the socket from another thread via
//     Shutdown() wakes the call at once (kAborted too when the flag was set first, as
//     Communicator::Abort does: a local abort is never reported as a lost peer).
//   * A peer that closes the connection (or resets it) yields kPeerLost naming `label()`.
//   * Thread-safety: one thread sends and one thread receives at a time; Shutdown() may be
//     called from any thread. Ownership: the Socket owns its fd (a UniqueFd; move-only).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "base/deadline.h"
#include "base/status.h"
#include "base/unique_fd.h"

namespace tfring {

constexpr int kAbortPollMs = 50;

class Socket {
 public:
  Socket() = default;
  // Takes ownership of `fd` and makes it non-blocking with TCP_NODELAY.
  explicit Socket(UniqueFd fd, std::string label = "peer");

  // Connects to host:port, retrying "connection refused" until the deadline (the server may
  // not be listening yet).
  static Status Connect(const std::string& host, int port, Deadline deadline, Socket* out,
                        const std::atomic<bool>* abort = nullptr);

  Status SendAll(const void* data, size_t size, Deadline deadline,
                 const std::atomic<bool>* abort = nullptr);
  Status RecvAll(void* data, size_t size, Deadline deadline,
                 const std::atomic<bool>* abort = nullptr);

  // Length-prefixed message (u32 little-endian length, then payload). RecvMessage refuses
  // a length above max_size with kInvalidArgument (garbage or hostile peer).
  Status SendMessage(const std::string& payload, Deadline deadline,
                     const std::atomic<bool>* abort = nullptr);
  Status RecvMessage(std::string* payload, size_t max_size, Deadline deadline,
                     const std::atomic<bool>* abort = nullptr);

  // Makes the kernel notice a peer that stopped acknowledging (a cut or partitioned network)
  // within about `seconds`: keepalive probes while idle, and TCP_USER_TIMEOUT for unacked
  // sends. A frozen process's kernel still acknowledges, so this never fires for slow or
  // stopped peers (liveness.h handles those). `seconds` <= 0 leaves the kernel defaults.
  // Best effort: an option the kernel refuses is skipped.
  void SetPeerTimeout(double seconds);

  // Waits until the socket is readable (data or EOF). Returns true if readable.
  bool WaitReadable(int timeout_ms);

  // Wakes any blocked call on this socket (from any thread) and makes later calls fail.
  void Shutdown();
  void Close();

  bool valid() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  const std::string& label() const { return label_; }
  void set_label(std::string label) { label_ = std::move(label); }
  // How long (microseconds) a blocked send or receive spins (non-blocking polls) before it
  // sleeps in poll(): a blocked thread takes 30-120 us to wake on these machines. 0 (the
  // default): never. The Communicator sets TFRING_SPIN_US on the connections whose waits
  // are on a collective's path (data and control); store, heartbeat and init connections
  // keep 0. Set before the socket is in use (not thread-safe).
  int spin_us() const { return spin_us_; }
  void set_spin_us(int micros) { spin_us_ = micros < 0 ? 0 : micros; }
  // "ip:port" of the local end (used to advertise the interface that reached the store).
  std::string LocalAddress() const;
  std::string PeerAddress() const;

 private:
  Status Lost(const char* what, int err) const;
  UniqueFd fd_;
  std::string label_ = "peer";
  int spin_us_ = 0;
};

class Listener {
 public:
  // Move-only: the Listener owns its fd (a UniqueFd).
  Listener() = default;

  // Binds host:port (port 0 = ephemeral) and listens.
  static Status Listen(const std::string& host, int port, Listener* out);
  Status Accept(Deadline deadline, Socket* out, const std::atomic<bool>* abort = nullptr);
  int port() const { return port_; }
  void Close();
  void Shutdown();
  int fd() const { return fd_.get(); }

 private:
  UniqueFd fd_;
  int port_ = 0;
};

// Splits "host:port"; fails with kInvalidArgument naming `what` on bad input.
Status ParseHostPort(const std::string& text, const std::string& what, std::string* host,
                     int* port);

}  // namespace tfring
