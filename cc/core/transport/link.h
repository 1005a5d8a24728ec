// Link: this rank's data connection to one peer — a TCP socket and, when the peer runs on
// the same host, a pair of shared-memory rings (tx: to the peer, rx: from it). When the
// rings exist every payload byte goes through them and the socket only reports the peer's
// death (EOF); otherwise payloads go through the socket.
//
// Single-copy (CMA) sends: a send of at least cma_min_bytes() over the rings is not copied
// into the ring; it is posted (address + length, shm_ring.h) and the peer copies it out of
// this process with process_vm_readv (cma.h), so the send waits until the peer has read
// all of it. The receiver follows whatever the sender does; reads from a peer need its pid
// (cma_pid(), set only when the connection-time probe could read that peer's memory).
//
// Transfer() is the one data-moving primitive of every collective. A Link's state is
// private: what happened to it is said by its Record*() methods (link.cc), what was set up
// by Connected/AttachRings/PostSendsFrom/ReadPostsOf (the Communicator's construction).
// Ownership: the Link owns its socket and rings; the Communicator owns the Links.
// Thread-safety: the runtime's background thread alone transfers; Socket::Shutdown() (via
// Communicator::Abort) may be called from any thread and ends a transfer within ~1 ms,
// with kAborted (not kPeerLost) because the abort flag is set before the sockets close.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "transport/shm_ring.h"
#include "base/socket.h"

namespace tfring {

class Link {
 public:
  // The TCP connection (valid once connected; with rings it only reports the peer's death).
  // Transfers read and poll it; the Communicator labels, tunes and shuts it down.
  Socket& socket() { return socket_; }
  const Socket& socket() const { return socket_; }
  // The connection was made (Create's mesh, or a lazy connection): this link owns it.
  void Connected(Socket socket) { socket_ = std::move(socket); }
  // The shared-memory rings with a peer on this host were made (shm_setup.h): this link
  // owns them, and every payload byte goes through them from now on.
  void AttachRings(std::unique_ptr<ShmRing> tx, std::unique_ptr<ShmRing> rx) {
    tx_ = std::move(tx);
    rx_ = std::move(rx);
  }
  ShmRing* tx() const { return tx_.get(); }  // to the peer (same host only), else null
  ShmRing* rx() const { return rx_.get(); }  // from the peer (same host only), else null
  bool shm() const { return tx_ != nullptr && rx_ != nullptr; }
  const std::string& label() const { return socket_.label(); }

  // Single-copy (shm_setup.h decides, once, at Create): the peer can read this rank's
  // memory, so sends of at least `min_bytes` are posted; this rank can read the peer's
  // (its pid `writer`), so its posts are read from it.
  void PostSendsFrom(size_t min_bytes) { cma_min_bytes_ = min_bytes; }
  void ReadPostsOf(pid_t writer) { cma_pid_ = writer; }
  size_t cma_min_bytes() const { return cma_min_bytes_; }  // SIZE_MAX: never posts
  pid_t cma_pid() const { return cma_pid_; }               // 0: the peer never posts

  // What Transfer*() moved (link.cc, the background thread): payload bytes sent to /
  // received from this peer (TCP or shared memory; control messages excluded), the part
  // of those received read single-copy, and a finished side's flow time.
  void RecordSent(size_t bytes) { bytes_sent_ += bytes; }
  void RecordReceived(size_t bytes) { bytes_received_ += bytes; }
  void RecordReadSingleCopy(size_t bytes) { cma_bytes_received_ += bytes; }
  void RecordSendFlow(uint64_t ns) { send_flow_ns_ += ns; }
  void RecordReceiveFlow(uint64_t ns) { recv_flow_ns_ += ns; }

  // The counters. Background thread only, like the writers (the runtime copies the totals
  // into its stats under its own lock).
  uint64_t bytes_sent() const { return bytes_sent_; }
  uint64_t bytes_received() const { return bytes_received_; }
  uint64_t cma_bytes_received() const { return cma_bytes_received_; }
  // Flow time: for each transfer, from the first to the last byte of its send (receive)
  // side on this link, summed (ns). Bytes over flow time is the rate the link delivered
  // while data moved, without the time the transfer waited before the peer began to send
  // (a ring's steps wait for the slowest link upstream; this does not count it). A side
  // that completes in one move adds 0 (a small message has no rate).
  uint64_t send_flow_ns() const { return send_flow_ns_; }
  uint64_t recv_flow_ns() const { return recv_flow_ns_; }

 private:
  Socket socket_;
  std::unique_ptr<ShmRing> tx_;
  std::unique_ptr<ShmRing> rx_;
  uint64_t bytes_sent_ = 0;
  uint64_t bytes_received_ = 0;
  uint64_t send_flow_ns_ = 0;
  uint64_t recv_flow_ns_ = 0;
  size_t cma_min_bytes_ = SIZE_MAX;
  pid_t cma_pid_ = 0;
  uint64_t cma_bytes_received_ = 0;
};

// Sends `send_size` bytes to `to` while receiving `recv_size` bytes from `from`, both
// progressing together (no deadlock when both peers send large buffers at once).
// `on_received(bytes_so_far)` is called, if set, whenever more bytes arrived, so callers can
// reduce received data while the rest is still in flight. Either size may be 0; `to` and
// `from` may be the same link. Blocking, bounded by `deadline`; kPeerLost names the peer.
Status Transfer(Link& to, const void* send_buf, size_t send_size, Link& from, void* recv_buf,
                size_t recv_size, Deadline deadline, const std::atomic<bool>* abort,
                const std::function<void(size_t)>& on_received = nullptr);

// Like Transfer, but the received bytes are reduced into `accumulate` (recv_size bytes of
// `dtype`) instead of stored: straight out of shared memory when `from` has rings, else
// through `scratch` (recv_size bytes) in chunks of `chunk_bytes` while the rest arrives.
// A single-copy post is read into `scratch` chunk_bytes (whole elements) at a time, each
// piece reduced while it is still in cache.
// `own` (recv_size bytes, not overlapping `accumulate`) makes it out of place:
// accumulate = own (op) received, so `accumulate` need not hold this rank's data first.
Status TransferReduce(Link& to, const void* send_buf, size_t send_size, Link& from,
                      void* accumulate, size_t recv_size, DataType dtype, ReduceOp op,
                      char* scratch, size_t chunk_bytes, Deadline deadline,
                      const std::atomic<bool>* abort, const void* own = nullptr);

}  // namespace tfring
