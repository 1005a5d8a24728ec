#include "base/socket.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>


namespace tfring {
namespace {

void SetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::string SockaddrToString(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = {0};
  int port = 0;
  if (addr.ss_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

// Waits for `events` on fd. Spins (non-blocking polls) for `spin_us` first: a blocked
// thread takes 30-120 us to wake on these machines, a spin catches short waits.
// Returns OK when ready, kTimeout / kAborted otherwise.
Status WaitFd(int fd, short events, int spin_us, Deadline deadline, const std::atomic<bool>* abort,
              const std::string& label, const char* what) {
  pollfd p{fd, events, 0};
  if (spin_us > 0) {
    auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us);
    while (std::chrono::steady_clock::now() < spin_until) {
      p.revents = 0;
      if (poll(&p, 1, 0) > 0) return Status::OK();
    }
  }
  for (;;) {
    if (abort && abort->load(std::memory_order_relaxed)) {
      return Status::Aborted(std::string(what) + " " + label + " aborted: tfring is shutting down");
    }
    if (deadline.expired()) {
      return Status::Timeout(std::string("timed out waiting to ") + what + " " + label +
                             " (raise TFRING_TIMEOUT_S if the peer is merely slow)");
    }
    p.revents = 0;
    int rc = poll(&p, 1, deadline.MillisLeft(kAbortPollMs));
    if (rc > 0) return Status::OK();
    if (rc < 0 && errno != EINTR) {
      return Status::Internal(std::string("poll failed: ") + std::strerror(errno));
    }
  }
}

}  // namespace

Socket::Socket(UniqueFd fd, std::string label) : fd_(std::move(fd)), label_(std::move(label)) {
  if (fd_.valid()) {
    SetNonBlocking(fd_.get());
    SetNoDelay(fd_.get());
  }
}

void Socket::Close() { fd_.reset(); }

void Socket::Shutdown() {
  if (fd_.valid()) ::shutdown(fd_.get(), SHUT_RDWR);
}

Status Socket::Lost(const char* what, int err) const {
  std::string reason = err == 0 ? "the peer closed the connection"
                                : std::string(std::strerror(err));
  if (err == ETIMEDOUT) {  // keepalive or user timeout (SetPeerTimeout): nothing acknowledged
    return Status::PeerLost("lost connection to " + label_ + " while " + what +
                            " (nothing acknowledged for longer than TFRING_PEER_TIMEOUT_S): the network "
                            "to it is cut or its host is down");
  }
  return Status::PeerLost("lost connection to " + label_ + " while " + what + " (" + reason +
                          "): the peer process died, was killed, or aborted after its own error");
}

// One attempt on every address of host:port; the connected fd, or an invalid one with
// `error` set.
static UniqueFd ConnectOnce(const std::string& host, const std::string& port_str,
                            Deadline deadline, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int gai = getaddrinfo(host.c_str(), port_str.c_str(), &hints, &res);
  if (gai != 0) {
    *error = std::string("cannot resolve the name: ") + gai_strerror(gai);
    return UniqueFd();
  }
  UniqueFd connected;
  for (addrinfo* ai = res; ai != nullptr && !connected.valid(); ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) continue;
    SetNonBlocking(fd.get());
    int rc = ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen);
    if (rc < 0 && errno == EINPROGRESS) {
      pollfd p{fd.get(), POLLOUT, 0};
      int prc = poll(&p, 1, std::max(1, deadline.MillisLeft(1000)));
      if (prc > 0) {
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      } else {
        rc = -1;
        errno = ETIMEDOUT;
      }
    }
    if (rc == 0) {
      connected = std::move(fd);
    } else {
      *error = std::strerror(errno);  // `fd` closes at the end of the iteration
    }
  }
  freeaddrinfo(res);
  return connected;
}

Status Socket::Connect(const std::string& host, int port, Deadline deadline, Socket* out,
                       const std::atomic<bool>* abort) {
  // Both a name that does not resolve yet (a Kubernetes Service or pod DNS record created
  // after this process started) and a refused connection (the server not listening yet)
  // are retried until the deadline; the name is resolved again on every attempt.
  const std::string port_str = std::to_string(port);
  std::string last_error = "no address";
  int backoff_ms = 10;
  for (;;) {
    UniqueFd fd = ConnectOnce(host, port_str, deadline, &last_error);
    if (fd.valid()) {
      *out = Socket(std::move(fd), host + ":" + port_str);
      return Status::OK();
    }
    if (abort && abort->load()) return Status::Aborted("connect to " + host + ":" + port_str + " aborted");
    if (deadline.expired()) {
      return Status::Timeout("could not connect to " + host + ":" + port_str + " (" + last_error +
                             ") before the deadline");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(backoff_ms, deadline.MillisLeft(1000))));
    backoff_ms = std::min(backoff_ms * 2, 200);
  }
}

Status Socket::SendAll(const void* data, size_t size, Deadline deadline,
                       const std::atomic<bool>* abort) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    if (!fd_.valid()) return Status::Aborted("send to " + label_ + " on a closed socket");
    ssize_t n = ::send(fd_.get(), p, size, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      TFRING_RETURN_IF_ERROR(WaitFd(fd_.get(), POLLOUT, spin_us_, deadline, abort, label_, "send to"));
      continue;
    }
    if (abort && abort->load()) return Status::Aborted("send to " + label_ + " aborted: tfring is shutting down");
    return Lost("sending", n < 0 ? errno : 0);
  }
  return Status::OK();
}

void Socket::SetPeerTimeout(double seconds) {
  if (!fd_.valid() || seconds <= 0) return;
  // Probes start after a third of the budget idle, then every ninth, three unanswered end it.
  const int idle = std::max(1, static_cast<int>(seconds / 3));
  const int interval = std::max(1, static_cast<int>(seconds / 9));
  const int count = 3;
  const unsigned user_timeout_ms = static_cast<unsigned>(seconds * 1000);
  const int one = 1;
  setsockopt(fd_.get(), SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  setsockopt(fd_.get(), IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd_.get(), IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  setsockopt(fd_.get(), IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  setsockopt(fd_.get(), IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof(user_timeout_ms));
}

Status Socket::RecvAll(void* data, size_t size, Deadline deadline,
                       const std::atomic<bool>* abort) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    if (!fd_.valid()) return Status::Aborted("receive from " + label_ + " on a closed socket");
    ssize_t n = ::recv(fd_.get(), p, size, 0);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      TFRING_RETURN_IF_ERROR(WaitFd(fd_.get(), POLLIN, spin_us_, deadline, abort, label_, "receive from"));
      continue;
    }
    if (abort && abort->load()) return Status::Aborted("receive from " + label_ + " aborted: tfring is shutting down");
    return Lost("receiving", n < 0 ? errno : 0);
  }
  return Status::OK();
}

Status Socket::SendMessage(const std::string& payload, Deadline deadline,
                           const std::atomic<bool>* abort) {
  uint32_t len = static_cast<uint32_t>(payload.size());
  unsigned char header[4] = {static_cast<unsigned char>(len), static_cast<unsigned char>(len >> 8),
                             static_cast<unsigned char>(len >> 16),
                             static_cast<unsigned char>(len >> 24)};
  std::string frame(reinterpret_cast<char*>(header), 4);
  frame += payload;
  return SendAll(frame.data(), frame.size(), deadline, abort);
}

Status Socket::RecvMessage(std::string* payload, size_t max_size, Deadline deadline,
                           const std::atomic<bool>* abort) {
  unsigned char header[4];
  TFRING_RETURN_IF_ERROR(RecvAll(header, 4, deadline, abort));
  uint32_t len = header[0] | (header[1] << 8) | (header[2] << 16) |
                 (static_cast<uint32_t>(header[3]) << 24);
  if (len > max_size) {
    return Status::InvalidArgument("message from " + label_ + " announces " + std::to_string(len) +
                                   " bytes, above the limit of " + std::to_string(max_size) +
                                   " (garbage or a foreign protocol)");
  }
  payload->resize(len);
  return RecvAll(payload->data(), len, deadline, abort);
}

bool Socket::WaitReadable(int timeout_ms) {
  if (!fd_.valid()) return true;
  pollfd p{fd_.get(), POLLIN, 0};
  return poll(&p, 1, timeout_ms) > 0;
}

std::string Socket::LocalAddress() const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "";
  return SockaddrToString(addr);
}

std::string Socket::PeerAddress() const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "unknown";
  return SockaddrToString(addr);
}

void Listener::Close() { fd_.reset(); }

void Listener::Shutdown() {
  if (fd_.valid()) ::shutdown(fd_.get(), SHUT_RDWR);
}

Status Listener::Listen(const std::string& host, int port, Listener* out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  std::string port_str = std::to_string(port);
  int gai = getaddrinfo(host.empty() ? nullptr : host.c_str(), port_str.c_str(), &hints, &res);
  if (gai != 0) {
    return Status::InvalidArgument("cannot resolve bind address '" + host + "': " +
                                   gai_strerror(gai));
  }
  std::string last_error = "no address";
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) continue;
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd.get(), 1024) == 0) {
      SetNonBlocking(fd.get());
      sockaddr_storage addr{};
      socklen_t len = sizeof(addr);
      getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
      out->fd_ = std::move(fd);
      out->port_ = addr.ss_family == AF_INET
                       ? ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port)
                       : ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
      freeaddrinfo(res);
      return Status::OK();
    }
    last_error = std::strerror(errno);  // `fd` closes at the end of the iteration
  }
  freeaddrinfo(res);
  return Status::InvalidArgument("cannot listen on " + host + ":" + port_str + ": " + last_error);
}

Status Listener::Accept(Deadline deadline, Socket* out, const std::atomic<bool>* abort) {
  for (;;) {
    if (!fd_.valid()) return Status::Aborted("accept on a closed listener");
    UniqueFd fd(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (fd.valid()) {
      *out = Socket(std::move(fd), "incoming connection");
      out->set_label("incoming connection from " + out->PeerAddress());
      return Status::OK();
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) {
      TFRING_RETURN_IF_ERROR(WaitFd(fd_.get(), POLLIN, 0, deadline, abort, "on port " +
                                    std::to_string(port_), "accept a connection"));
      continue;
    }
    return Status::Internal(std::string("accept failed: ") + std::strerror(errno));
  }
}

Status ParseHostPort(const std::string& text, const std::string& what, std::string* host,
                     int* port) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 >= text.size()) {
    return Status::InvalidArgument(what + "='" + text + "' is not of the form host:port");
  }
  std::string h = text.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  char* end = nullptr;
  long p = std::strtol(text.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || p <= 0 || p > 65535) {
    return Status::InvalidArgument(what + "='" + text + "' has an invalid port");
  }
  *host = h;
  *port = static_cast<int>(p);
  return Status::OK();
}

}  // namespace tfring
