// UniqueFd: the one owner of a file descriptor (socket, shared-memory object, eventfd).
//
// Move-only, like std::unique_ptr: the descriptor is closed exactly once, when the owner is
// destroyed, reset() or assigned over; a moved-from UniqueFd holds -1 and closes nothing.
// get() lends the descriptor (to poll, send, mmap) without giving up ownership; release()
// gives it up. Thread-safety: none of its own; the owning class says who may call what
// (Socket lets any thread call shutdown(2) on get() while another thread owns the object).
#pragma once

#include <unistd.h>

namespace tfring {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  ~UniqueFd() { reset(); }

  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }

  // Gives up ownership: the caller closes the returned descriptor.
  int release() noexcept {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

  // Closes the descriptor held (if any) and takes `fd` (default: none).
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0 && fd_ != fd) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace tfring
