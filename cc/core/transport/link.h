// Link: this rank's data connection to one peer — a TCP socket and, when the peer runs on
// the same host, a pair of shared-memory rings (tx: to the peer, rx: from it). When the
// rings exist every payload byte goes through them and the socket only reports the peer's
// death (EOF); otherwise payloads go through the socket.
//
// Single-copy (CMA) sends: a send of at least `cma_min_bytes` over the rings is not copied
// into the ring; it is posted (address + length, shm_ring.h) and the peer copies it out of
// this process with process_vm_readv (cma.h), so the send waits until the peer has read
// all of it. The receiver follows whatever the sender does; reads from a peer need its pid
// (`cma_pid`, set only when the connection-time probe could read that peer's memory).
//
// Transfer() is the one data-moving primitive of every collective.
// Thread-safety: the runtime's background thread alone transfers; Socket::Shutdown() (via
// Communicator::Abort) may be called from any thread and ends a transfer within ~1 ms,
// with kAborted (not kPeerLost) because the abort flag is set before the sockets close.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "transport/shm_ring.h"
#include "base/socket.h"

namespace tfring {

struct Link {
  Socket socket;
  std::unique_ptr<ShmRing> tx;  // to the peer (same host only)
  std::unique_ptr<ShmRing> rx;  // from the peer (same host only)
  // Payload bytes Transfer*() moved to / from this peer (TCP or shared memory; control
  // messages excluded). Written by the background thread; read by it too (the runtime
  // copies the totals into its stats under its own lock).
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  // Flow time of those bytes: for each transfer, from the first to the last byte of its
  // send (receive) side on this link, summed (ns). Bytes over flow time is the rate the
  // link delivered while data moved, without the time the transfer waited before the peer
  // began to send (a ring's steps wait for the slowest link upstream; this does not count
  // it). A side that completes in one move adds 0 (a small message has no rate).
  uint64_t send_flow_ns = 0;
  uint64_t recv_flow_ns = 0;
  // Single-copy: post sends of at least this many bytes (SIZE_MAX: never), and the peer's
  // pid for reading its posts (0: it never posts).
  size_t cma_min_bytes = SIZE_MAX;
  pid_t cma_pid = 0;
  uint64_t cma_bytes_received = 0;  // the part of bytes_received read single-copy

  bool shm() const { return tx != nullptr && rx != nullptr; }
  const std::string& label() const { return socket.label(); }
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
