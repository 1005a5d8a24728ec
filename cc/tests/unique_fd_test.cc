// UniqueFd (unique_fd.h) and its owners Socket / Listener: every descriptor is closed exactly
// once, by whoever owns it last, and never twice.
#include "base/unique_fd.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <utility>

#include "base/fd_limit.h"
#include "base/socket.h"
#include "test_util.h"

namespace tfring {
namespace {

bool IsOpen(int fd) { return fd >= 0 && fcntl(fd, F_GETFD) != -1; }

// Two fresh descriptors (a pipe's ends), owned by the test.
std::pair<int, int> Pipe() {
  int fds[2] = {-1, -1};
  EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
  return {fds[0], fds[1]};
}

TEST(UniqueFd, ClosesOnDestructionAndResetOnly) {
  auto [r, w] = Pipe();
  {
    UniqueFd a(r);
    EXPECT_TRUE(a.valid());
    EXPECT_EQ(a.get(), r);
    UniqueFd b(w);
    b.reset();  // closes w now
    EXPECT_FALSE(b.valid());
    EXPECT_FALSE(IsOpen(w));
    EXPECT_TRUE(IsOpen(r));
  }
  EXPECT_FALSE(IsOpen(r));
  UniqueFd none;
  EXPECT_FALSE(none.valid());
  EXPECT_EQ(none.get(), -1);
}

TEST(UniqueFd, MoveTransfersOwnershipAndAssignmentClosesTheOldOne) {
  auto [r, w] = Pipe();
  UniqueFd a(r);
  UniqueFd b(std::move(a));
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): the moved-from state is the contract
  EXPECT_EQ(b.get(), r);
  UniqueFd c(w);
  c = std::move(b);  // closes w, takes r
  EXPECT_FALSE(IsOpen(w));
  EXPECT_TRUE(IsOpen(r));
  EXPECT_EQ(c.get(), r);
  c = std::move(c);  // self-move keeps the descriptor
  EXPECT_TRUE(IsOpen(r));
  c.reset(r);  // resetting to the descriptor held keeps it open
  EXPECT_TRUE(IsOpen(r));
  const int released = c.release();
  EXPECT_EQ(released, r);
  EXPECT_FALSE(c.valid());
  EXPECT_TRUE(IsOpen(r));  // released: the caller closes it
  ::close(released);
}

// Sockets and listeners, moved around as the communicator does, leave no descriptor behind.
TEST(UniqueFd, SocketsAndListenersLeakNothing) {
  const long before = OpenDescriptorCount();
  ASSERT_GT(before, 0);
  for (int round = 0; round < 3; ++round) {
    Listener first;
    TFRING_ASSERT_OK(Listener::Listen("127.0.0.1", 0, &first));
    Listener listener = std::move(first);
    EXPECT_LT(first.fd(), 0);  // NOLINT(bugprone-use-after-move)
    Socket client;
    TFRING_ASSERT_OK(Socket::Connect("127.0.0.1", listener.port(), Deadline::After(5), &client));
    Socket accepted;
    TFRING_ASSERT_OK(listener.Accept(Deadline::After(5), &accepted));
    Socket moved = std::move(accepted);
    EXPECT_FALSE(accepted.valid());  // NOLINT(bugprone-use-after-move)
    TFRING_ASSERT_OK(client.SendMessage("ping", Deadline::After(5)));
    std::string got;
    TFRING_ASSERT_OK(moved.RecvMessage(&got, 16, Deadline::After(5)));
    EXPECT_EQ(got, "ping");
    const int held = moved.fd();
    moved = Socket();  // assigning over a socket closes its descriptor
    EXPECT_FALSE(IsOpen(held));
  }
  EXPECT_EQ(OpenDescriptorCount(), before);
}

}  // namespace
}  // namespace tfring
