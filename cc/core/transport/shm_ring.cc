#include "transport/shm_ring.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <new>

#include "transport/cma.h"
#include "base/reduce_kernels.h"
#include "base/unique_fd.h"

namespace tfring {
namespace {
constexpr uint64_t kMagic = 0x746672696e677368ULL;  // "tfringsh"
constexpr size_t kHeaderBytes = 512;

// The futex words live in a MAP_SHARED mapping of two processes: shared (not private)
// futexes, keyed by the physical page.
long FutexWake(std::atomic<uint32_t>* word) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// FUTEX_WAIT on one word for at most timeout_ms. Returns false when it timed out.
bool FutexWaitOne(std::atomic<uint32_t>* word, uint32_t seen, int timeout_ms) {
  timespec relative{timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
  long rc = syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &relative, nullptr, 0);
  return !(rc != 0 && errno == ETIMEDOUT);
}

#ifdef SYS_futex_waitv
// futex_waitv (Linux 5.16+) sleeps on several words at once; its timeout is absolute.
// Returns 1 woken / value changed, 0 timed out, -1 not supported here.
int FutexWaitv(const ShmRing::Waiter* waiters, int n, int timeout_ms) {
  struct futex_waitv vec[2] = {};
  for (int i = 0; i < n; ++i) {
    vec[i].val = waiters[i].seen;
    vec[i].uaddr = reinterpret_cast<uint64_t>(waiters[i].word);
    vec[i].flags = FUTEX_32;  // no FUTEX_PRIVATE_FLAG: shared between processes
  }
  timespec until{};
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_nsec += (timeout_ms % 1000) * 1000000L;
  until.tv_sec += timeout_ms / 1000 + until.tv_nsec / 1000000000L;
  until.tv_nsec %= 1000000000L;
  long rc = syscall(SYS_futex_waitv, vec, n, 0, &until, CLOCK_MONOTONIC);
  if (rc >= 0) return 1;
  if (errno == ENOSYS) return -1;
  return errno == ETIMEDOUT ? 0 : 1;  // EAGAIN (a word changed), EINTR: look again
}
#else
int FutexWaitv(const ShmRing::Waiter*, int, int) { return -1; }
#endif

std::atomic<bool> g_no_futex_waitv{false};  // learned at the first ENOSYS
}  // namespace

ShmRing::~ShmRing() {
  Unlink();
  if (map_ != nullptr) munmap(map_, map_bytes_);
}

Status ShmRing::Map(int fd, size_t bytes, void** addr) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return Status::Internal(std::string("mmap of shared memory failed: ") + std::strerror(errno));
  *addr = p;
  return Status::OK();
}

Status ShmRing::Create(const std::string& name, size_t capacity, std::unique_ptr<ShmRing>* out) {
  if (capacity == 0 || (capacity & (capacity - 1)) != 0) {
    return Status::InvalidArgument("shared-memory ring capacity must be a power of two");
  }
  UniqueFd fd(shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    return Status::Unimplemented("cannot create shared memory " + name + ": " + std::strerror(errno) +
                                 " (set TFRING_SHM=0 to use TCP between local ranks)");
  }
  auto ring = std::unique_ptr<ShmRing>(new ShmRing());
  ring->name_ = name;
  ring->linked_ = true;
  ring->map_bytes_ = kHeaderBytes + capacity;
  Status st;
  if (ftruncate(fd.get(), static_cast<off_t>(ring->map_bytes_)) != 0) {
    st = Status::Unimplemented("cannot size shared memory " + name + ": " + std::strerror(errno) +
                               " (is /dev/shm full? set TFRING_SHM=0 to use TCP)");
  } else {
    st = Map(fd.get(), ring->map_bytes_, &ring->map_);
  }
  fd.reset();  // the mapping outlives the descriptor
  if (!st.ok()) return st;
  static_assert(sizeof(Header) <= kHeaderBytes, "ring header outgrew kHeaderBytes");
  ring->header_ = new (ring->map_) Header();
  ring->header_->head.store(0);
  ring->header_->tail.store(0);
  ring->header_->reader_sleeping.store(0);
  ring->header_->reader_waiting.store(0);
  ring->header_->data_seq.store(0);
  ring->header_->writer_waiting.store(0);
  ring->header_->space_seq.store(0);
  ring->header_->capacity = capacity;
  ring->header_->magic = kMagic;
  ring->data_ = static_cast<char*>(ring->map_) + kHeaderBytes;
  ring->capacity_ = capacity;
  *out = std::move(ring);
  return Status::OK();
}

Status ShmRing::Open(const std::string& name, std::unique_ptr<ShmRing>* out) {
  UniqueFd fd(shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) return Status::Internal("cannot open shared memory " + name + ": " + std::strerror(errno));
  struct stat info {};
  fstat(fd.get(), &info);
  auto ring = std::unique_ptr<ShmRing>(new ShmRing());
  ring->name_ = name;
  ring->map_bytes_ = static_cast<size_t>(info.st_size);
  Status st = ring->map_bytes_ > kHeaderBytes ? Map(fd.get(), ring->map_bytes_, &ring->map_)
                                              : Status::Internal("shared memory " + name + " is too small");
  fd.reset();  // the mapping outlives the descriptor
  if (!st.ok()) return st;
  ring->header_ = static_cast<Header*>(ring->map_);
  if (ring->header_->magic != kMagic || ring->header_->capacity + kHeaderBytes != ring->map_bytes_) {
    return Status::Internal("shared memory " + name + " is not a tfring ring");
  }
  ring->data_ = static_cast<char*>(ring->map_) + kHeaderBytes;
  ring->capacity_ = ring->header_->capacity;
  *out = std::move(ring);
  return Status::OK();
}

size_t ShmRing::Available() const {
  return static_cast<size_t>(header_->head.load(std::memory_order_acquire) -
                             header_->tail.load(std::memory_order_relaxed));
}

size_t ShmRing::Room() const {
  return capacity_ - static_cast<size_t>(header_->head.load(std::memory_order_relaxed) -
                                         header_->tail.load(std::memory_order_acquire));
}

void ShmRing::SetReaderSleeping(bool sleeping) {
  header_->reader_sleeping.store(sleeping ? 1 : 0, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

bool ShmRing::ReaderSleeping() const {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return header_->reader_sleeping.load(std::memory_order_seq_cst) != 0;
}

namespace {

// One side's half of the sleep protocol (the top of shm_ring.h): `waiting` is that side's
// flag, `seq` the word it sleeps on, which the other side bumps after a move.
ShmRing::Waiter ArmWait(std::atomic<uint32_t>& waiting, std::atomic<uint32_t>& seq) {
  waiting.store(1, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return ShmRing::Waiter{&seq, seq.load(std::memory_order_seq_cst)};
}

// The other side, after a move: wakes the sleeper if it armed.
void WakeIfArmed(const std::atomic<uint32_t>& waiting, std::atomic<uint32_t>& seq) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (waiting.load(std::memory_order_seq_cst) != 0) {
    seq.fetch_add(1, std::memory_order_seq_cst);
    FutexWake(&seq);
  }
}

}  // namespace

ShmRing::Waiter ShmRing::ArmReaderWait() { return ArmWait(header_->reader_waiting, header_->data_seq); }
void ShmRing::DisarmReaderWait() { header_->reader_waiting.store(0, std::memory_order_relaxed); }
ShmRing::Waiter ShmRing::ArmWriterWait() { return ArmWait(header_->writer_waiting, header_->space_seq); }
void ShmRing::DisarmWriterWait() { header_->writer_waiting.store(0, std::memory_order_relaxed); }
void ShmRing::WakeReader() { WakeIfArmed(header_->reader_waiting, header_->data_seq); }
void ShmRing::WakeWriter() { WakeIfArmed(header_->writer_waiting, header_->space_seq); }

void ShmRing::WakeAll() {
  header_->data_seq.fetch_add(1, std::memory_order_seq_cst);
  FutexWake(&header_->data_seq);
  header_->space_seq.fetch_add(1, std::memory_order_seq_cst);
  FutexWake(&header_->space_seq);
}

bool ShmRing::SleepOnAny(const Waiter* waiters, int n, int timeout_ms) {
  if (n <= 0) return false;
  if (n == 1) return FutexWaitOne(waiters[0].word, waiters[0].seen, timeout_ms);
  if (!g_no_futex_waitv.load(std::memory_order_relaxed)) {
    int rc = FutexWaitv(waiters, n, timeout_ms);
    if (rc >= 0) return rc == 1;
    g_no_futex_waitv.store(true);
  }
  return FutexWaitOne(waiters[0].word, waiters[0].seen, std::min(timeout_ms, 1));
}

void ShmRing::Unlink() {
  if (linked_) {
    shm_unlink(name_.c_str());
    linked_ = false;
  }
}

size_t ShmRing::TryWrite(const void* src, size_t n) {
  const uint64_t head = header_->head.load(std::memory_order_relaxed);
  const uint64_t tail = header_->tail.load(std::memory_order_acquire);
  const size_t room = capacity_ - static_cast<size_t>(head - tail);
  const size_t w = std::min(n, room);
  if (w == 0) return 0;
  const size_t pos = static_cast<size_t>(head & (capacity_ - 1));
  const size_t first = std::min(w, capacity_ - pos);
  std::memcpy(data_ + pos, src, first);
  if (w > first) std::memcpy(data_, static_cast<const char*>(src) + first, w - first);
  header_->head.store(head + w, std::memory_order_release);
  WakeReader();
  return w;
}

size_t ShmRing::TryRead(void* dst, size_t n) {
  const uint64_t tail = header_->tail.load(std::memory_order_relaxed);
  const uint64_t head = header_->head.load(std::memory_order_acquire);
  const size_t r = std::min(n, static_cast<size_t>(head - tail));
  if (r == 0) return 0;
  const size_t pos = static_cast<size_t>(tail & (capacity_ - 1));
  const size_t first = std::min(r, capacity_ - pos);
  std::memcpy(dst, data_ + pos, first);
  if (r > first) std::memcpy(static_cast<char*>(dst) + first, data_, r - first);
  header_->tail.store(tail + r, std::memory_order_release);
  WakeWriter();
  return r;
}

size_t ShmRing::TryReadReduce(void* dst, size_t n, DataType dtype, ReduceOp op, const void* own) {
  const size_t es = DataTypeSize(dtype);
  const uint64_t tail = header_->tail.load(std::memory_order_relaxed);
  const uint64_t head = header_->head.load(std::memory_order_acquire);
  size_t r = std::min(n, static_cast<size_t>(head - tail));
  r -= r % es;
  if (r == 0) return 0;
  const size_t pos = static_cast<size_t>(tail & (capacity_ - 1));
  const size_t first = std::min(r, capacity_ - pos);  // a multiple of es: stream is aligned
  const char* a = static_cast<const char*>(own != nullptr ? own : dst);
  ReduceTo(dst, a, data_ + pos, first / es, dtype, op);
  if (r > first) ReduceTo(static_cast<char*>(dst) + first, a + first, data_, (r - first) / es, dtype, op);
  header_->tail.store(tail + r, std::memory_order_release);
  WakeWriter();
  return r;
}

bool ShmRing::TryAlignWrite() {
  const uint64_t head = header_->head.load(std::memory_order_relaxed);
  const uint64_t aligned = (head + 7) & ~uint64_t{7};
  if (aligned == head) return true;
  const uint64_t tail = header_->tail.load(std::memory_order_acquire);
  if (aligned - tail > capacity_) return false;
  header_->head.store(aligned, std::memory_order_release);
  WakeReader();
  return true;
}

bool ShmRing::TryAlignRead() {
  const uint64_t tail = header_->tail.load(std::memory_order_relaxed);
  const uint64_t aligned = (tail + 7) & ~uint64_t{7};
  if (aligned == tail) return true;
  if (header_->head.load(std::memory_order_acquire) < aligned) return false;
  header_->tail.store(aligned, std::memory_order_release);
  WakeWriter();
  return true;
}

void ShmRing::PostBuffer(const void* buf, size_t len) {
  const uint64_t k = header_->posts.load(std::memory_order_relaxed);
  PostSlot& slot = header_->slot[k & 1];
  post_base_ += post_len_;
  post_len_ = len;
  slot.addr = reinterpret_cast<uint64_t>(buf);
  slot.len = len;
  slot.ring_pos = header_->head.load(std::memory_order_relaxed);
  slot.base = post_base_;
  header_->posts.store(k + 1, std::memory_order_release);
  WakeReader();
}

size_t ShmRing::PostRead() const {
  const uint64_t read = header_->post_read.load(std::memory_order_acquire);
  return read <= post_base_ ? 0 : static_cast<size_t>(std::min(read - post_base_, post_len_));
}

bool ShmRing::PendingPost(Post* post) const {
  const uint64_t k = header_->posts.load(std::memory_order_acquire);
  if (k == 0) return false;
  const PostSlot& slot = header_->slot[(k - 1) & 1];
  const uint64_t read = header_->post_read.load(std::memory_order_relaxed);
  if (read >= slot.base + slot.len) return false;
  if (header_->tail.load(std::memory_order_relaxed) != slot.ring_pos) return false;
  post->addr = slot.addr + (read - slot.base);
  post->left = static_cast<size_t>(slot.base + slot.len - read);
  return true;
}

void ShmRing::ConsumePost(size_t n) {
  const uint64_t read = header_->post_read.load(std::memory_order_relaxed);
  header_->post_read.store(read + n, std::memory_order_release);
  WakeWriter();
}

void ShmRing::PublishWriter() {
  probe_token_ = (reinterpret_cast<uint64_t>(this) ^
                  static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                  0x9e3779b97f4a7c15ULL) | 1;
  header_->writer_pid = getpid();
  header_->probe_addr = reinterpret_cast<uint64_t>(&probe_token_);
  header_->probe_token = probe_token_;
}

int ShmRing::ProbeWriter(pid_t* pid) const {
  if (header_->writer_pid <= 0) return ENOENT;  // the writer has single-copy sends off
  uint64_t token = 0;
  int err = CmaRead(static_cast<pid_t>(header_->writer_pid), header_->probe_addr, &token, sizeof(token));
  if (err != 0) return err;
  if (token != header_->probe_token) return EIO;  // another process (pid namespaces differ)
  *pid = static_cast<pid_t>(header_->writer_pid);
  return 0;
}

}  // namespace tfring
