// ShmRing: a single-producer / single-consumer byte ring in POSIX shared memory, the data
// path between two ranks on the same host (one ring per direction).
//
// The receiver Create()s the ring under a random name and publishes it; the sender Open()s
// it; the receiver Unlink()s the name once the sender has mapped it, so a crash later leaves
// nothing behind in /dev/shm. head (bytes written) and tail (bytes read) are monotonic
// 64-bit counters on separate cache lines; release/acquire ordering publishes the bytes.
//
// Single-copy posts: instead of copying a large send into the ring, the writer may post the
// address and length of its own buffer at the current (aligned) stream position; the reader
// copies it out with process_vm_readv (cma.h) once its read position reaches the post and
// reports how much it read. The stream stays one ordered byte stream: ring bytes written
// before the post are read first, and the writer neither writes the ring nor changes the
// buffer until the whole post is read. One post at a time; post k lives in slot k % 2, so
// the writer never rewrites the slot the reader is looking at.
//
// Thread-safety: one writer thread and one reader thread (in different processes).
// TryWrite/TryRead never block: they move what fits and return the byte count.
// Peer death is not visible here; the caller watches the pair's TCP socket for that.
//
// Sleeping on a ring (futex, across the two processes): a reader with nothing to read or a
// writer with no room arms its side (ArmReaderWait / ArmWriterWait), tries once more, and
// if that moved nothing sleeps on the returned word (SleepOnAny) until the other side moves
// or the timeout passes; then it disarms. Every call that moves the stream (head, tail, a
// post, post_read) wakes an armed peer afterwards: a fence and a load when nobody sleeps,
// one futex wake when somebody does. Arm and wake order their accesses with full fences
// (Dekker), so a move is never missed by a side that goes to sleep. Blocking like a socket
// matters where ranks outnumber cores: a spinning or yielding waiter takes the CPU from the
// rank it waits for.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/data_type.h"
#include "base/status.h"

namespace tfring {

class ShmRing {
 public:
  ~ShmRing();
  ShmRing(const ShmRing&) = delete;
  ShmRing& operator=(const ShmRing&) = delete;

  static Status Create(const std::string& name, size_t capacity, std::unique_ptr<ShmRing>* out);
  static Status Open(const std::string& name, std::unique_ptr<ShmRing>* out);
  void Unlink();

  size_t TryWrite(const void* src, size_t n);
  size_t TryRead(void* dst, size_t n);
  // Reads whole elements and reduces them straight into `dst` (dst[i] = own[i] op ring[i];
  // `own` null means dst itself), saving the copy to a staging buffer. Needs the stream
  // aligned (see Align*).
  size_t TryReadReduce(void* dst, size_t n, DataType dtype, ReduceOp op, const void* own = nullptr);

  // Every transfer starts at an 8-byte aligned stream position on both sides, so that no
  // element ever straddles the wrap-around point. Writer: pads (returns false while the
  // ring has no room for the padding yet). Reader: skips the padding.
  bool TryAlignWrite();
  bool TryAlignRead();
  size_t capacity() const { return capacity_; }
  // Bytes written and not yet read (a reader may still drain them after the writer died).
  size_t Available() const;
  // Writer: bytes a TryWrite could take now (it takes them in one publish).
  size_t Room() const;

  // ---- sleeping reader (a doorbell protocol for message rings, control_channel.h) ----
  // The reader sets the flag before it blocks elsewhere (in poll() on a socket) and checks
  // Available() after; the writer checks ReaderSleeping() after its TryWrite and rings the
  // doorbell when set. Both sides order the two accesses with a full fence (Dekker), so a
  // message is never written unseen by a reader that goes to sleep.
  void SetReaderSleeping(bool sleeping);
  bool ReaderSleeping() const;

  // ---- futex sleeps (see the top of this file) ----
  struct Waiter {
    std::atomic<uint32_t>* word;  // in the shared mapping
    uint32_t seen;                // its value when armed: the sleep ends once it changes
  };
  // Reader / writer: announce a sleep; the returned waiter goes to SleepOnAny after one
  // more try. Disarm on every path out (also when the try moved bytes).
  Waiter ArmReaderWait();
  void DisarmReaderWait();
  Waiter ArmWriterWait();
  void DisarmWriterWait();
  // Sleeps until one of `n` (1 or 2) waiters' words changes, a wake, or `timeout_ms`.
  // Returns false when it timed out. Where the kernel lacks futex_waitv (Linux < 5.16) and
  // n == 2 it sleeps on the first waiter only, for at most 1 ms (the pre-futex behaviour).
  static bool SleepOnAny(const Waiter* waiters, int n, int timeout_ms);
  // Any thread (an abort): wakes both sides' sleepers, which then look at the abort flag.
  void WakeAll();

  // ---- single-copy posts (see the top of this file) ----
  struct Post {
    uint64_t addr;  // first unread byte, in the writer's address space
    size_t left;    // bytes of the post not read yet
  };
  // Writer: posts `len` > 0 bytes at `buf`. Needs the stream aligned (TryAlignWrite) and
  // the previous post fully read (PostRead() == its length).
  void PostBuffer(const void* buf, size_t len);
  // Writer: bytes of the current post the reader has copied so far.
  size_t PostRead() const;
  // Reader: true when a post starts at the current read position and has bytes left.
  bool PendingPost(Post* post) const;
  // Reader: `n` bytes of the pending post were copied.
  void ConsumePost(size_t n);

  // Connection set-up. Writer: records its pid and the address of a private random token
  // in the header. Reader (after the writer did, ordered by the store): reads the token
  // with process_vm_readv; returns 0 and the writer's pid, or the errno of the failure.
  void PublishWriter();
  int ProbeWriter(pid_t* pid) const;

 private:
  struct PostSlot {
    uint64_t addr;
    uint64_t len;
    uint64_t ring_pos;  // ring head when posted: the post follows the bytes before it
    uint64_t base;      // sum of the lengths of the earlier posts
  };
  struct Header {
    alignas(64) std::atomic<uint64_t> head;
    alignas(64) std::atomic<uint64_t> tail;
    alignas(64) uint64_t capacity;
    uint64_t magic;
    alignas(64) std::atomic<uint64_t> posts;  // writer: posts made (published with release)
    PostSlot slot[2];
    alignas(64) std::atomic<uint64_t> post_read;  // reader: bytes of all posts read
    alignas(64) std::atomic<uint32_t> reader_sleeping;  // reader: SetReaderSleeping
    std::atomic<uint32_t> reader_waiting;  // reader: armed a futex sleep on data_seq
    std::atomic<uint32_t> data_seq;        // writer: bumped after a move while reader_waiting
    alignas(64) int64_t writer_pid;
    uint64_t probe_addr;
    uint64_t probe_token;
    std::atomic<uint32_t> writer_waiting;  // writer: armed a futex sleep on space_seq
    std::atomic<uint32_t> space_seq;       // reader: bumped after a move while writer_waiting
  };
  ShmRing() = default;
  static Status Map(int fd, size_t bytes, void** addr);
  // After a move of the stream: wake the other side if it armed a sleep.
  void WakeReader();
  void WakeWriter();

  std::string name_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  Header* header_ = nullptr;
  char* data_ = nullptr;
  size_t capacity_ = 0;
  bool linked_ = false;
  uint64_t post_base_ = 0;  // writer: PostSlot::base and len of the current post
  uint64_t post_len_ = 0;
  uint64_t probe_token_ = 0;  // writer: read by the peer's probe
};

}  // namespace tfring
