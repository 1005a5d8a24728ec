// Sleeping on a shared-memory ring (shm_ring.h, "Sleeping on a ring"): a side that armed a
// futex sleep is woken by the other side's move, and a transfer that waits on a ring where
// it may not spin sleeps instead of polling every millisecond.
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "transport/link.h"
#include "transport/shm_ring.h"
#include "test_util.h"

namespace tfring {
namespace {

using testing_util::MakeMesh;
using testing_util::Mesh;
using testing_util::MeshOptions;
using Clock = std::chrono::steady_clock;

// A ring created and opened in this process (both ends; the futex words are shared).
struct RingPair {
  std::unique_ptr<ShmRing> reader, writer;
  explicit RingPair(size_t capacity) {
    static std::atomic<int> count{0};
    const std::string name = "/tfring-sleep-test-" + std::to_string(getpid()) + "-" + std::to_string(count++);
    Status st = ShmRing::Create(name, capacity, &reader);
    if (st.ok()) st = ShmRing::Open(name, &writer);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (reader) reader->Unlink();
  }
};

double MillisSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

TEST(RingSleepTest, AReaderAsleepIsWokenByTheWrite) {
  RingPair ring(1 << 12);
  ASSERT_TRUE(ring.reader && ring.writer);
  ShmRing::Waiter waiter = ring.reader->ArmReaderWait();
  char byte = 0;
  ASSERT_EQ(ring.reader->TryRead(&byte, 1), 0u);  // the try after arming: nothing yet
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(ring.writer->TryWrite("x", 1), 1u);
  });
  const auto start = Clock::now();
  const bool woken = ShmRing::SleepOnAny(&waiter, 1, 20000);
  const double slept_ms = MillisSince(start);
  ring.reader->DisarmReaderWait();
  writer.join();
  EXPECT_TRUE(woken) << "the sleep ran into its timeout: the write did not wake it";
  EXPECT_LT(slept_ms, 10000);
  EXPECT_EQ(ring.reader->TryRead(&byte, 1), 1u);
  EXPECT_EQ(byte, 'x');
}

TEST(RingSleepTest, AWriteBeforeTheSleepIsNotMissed) {
  RingPair ring(1 << 12);
  ASSERT_TRUE(ring.reader && ring.writer);
  ShmRing::Waiter waiter = ring.reader->ArmReaderWait();
  ASSERT_EQ(ring.writer->TryWrite("y", 1), 1u);  // between arming and sleeping
  const auto start = Clock::now();
  EXPECT_TRUE(ShmRing::SleepOnAny(&waiter, 1, 20000));
  EXPECT_LT(MillisSince(start), 10000);
  ring.reader->DisarmReaderWait();
}

TEST(RingSleepTest, AWriterAsleepOnAFullRingIsWokenByTheRead) {
  RingPair ring(64);
  ASSERT_TRUE(ring.reader && ring.writer);
  std::vector<char> fill(64, 'f');
  ASSERT_EQ(ring.writer->TryWrite(fill.data(), fill.size()), 64u);
  ShmRing::Waiter waiter = ring.writer->ArmWriterWait();
  ASSERT_EQ(ring.writer->TryWrite("z", 1), 0u);
  std::thread reader([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    char out[16];
    EXPECT_EQ(ring.reader->TryRead(out, sizeof(out)), sizeof(out));
  });
  EXPECT_TRUE(ShmRing::SleepOnAny(&waiter, 1, 20000));
  ring.writer->DisarmWriterWait();
  reader.join();
  EXPECT_EQ(ring.writer->Room(), 16u);
}

TEST(RingSleepTest, TwoWaitersWakeOnEither) {
  RingPair a(1 << 12), b(1 << 12);
  ASSERT_TRUE(a.reader && b.writer);
  ShmRing::Waiter waiters[2] = {a.reader->ArmReaderWait(), b.reader->ArmReaderWait()};
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(b.writer->TryWrite("w", 1), 1u);  // the second ring only
  });
  const auto start = Clock::now();
  EXPECT_TRUE(ShmRing::SleepOnAny(waiters, 2, 20000));
  EXPECT_LT(MillisSince(start), 10000);
  a.reader->DisarmReaderWait();
  b.reader->DisarmReaderWait();
  writer.join();
}

long VoluntarySwitchesOfThisThread() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_nvcsw;
}

// Where ranks outnumber CPUs (spin 0), a transfer waiting on a ring used to yield for 5 ms
// and then wake every millisecond to poll; it now sleeps until the peer writes (and looks
// at the peer's socket every kShmSleepMs = 10 ms): ~30 wake-ups in 300 ms, not ~300.
TEST(RingSleepTest, ATransferWaitingOnARingWithoutSpinSleepsUntilThePeerWrites) {
  MeshOptions o;
  o.size = 2;
  o.shm = true;
  Mesh mesh;
  TFRING_ASSERT_OK(MakeMesh(o, &mesh));
  for (int r : {0, 1}) mesh[r].SetSpinMicros(0);  // as where ranks outnumber CPUs
  ASSERT_TRUE(mesh[1].data(0).shm());
  uint64_t got = 0;
  long switches = 0;
  Status recv_status;
  std::thread receiver([&] {
    const long before = VoluntarySwitchesOfThisThread();
    Link& from0 = mesh[1].data(0);
    recv_status = Transfer(from0, nullptr, 0, from0, &got, sizeof(got), mesh[1].TransferDeadline(),
                           mesh[1].abort_flag());
    switches = VoluntarySwitchesOfThisThread() - before;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const uint64_t value = 0x0123456789abcdefULL;
  Link& to1 = mesh[0].data(1);
  TFRING_EXPECT_OK(Transfer(to1, &value, sizeof(value), to1, nullptr, 0, mesh[0].TransferDeadline(),
                            mesh[0].abort_flag()));
  receiver.join();
  TFRING_EXPECT_OK(recv_status);
  EXPECT_EQ(got, value);
  EXPECT_LT(switches, 120) << "the waiting transfer woke up " << switches << " times in 300 ms";
}

TEST(RingSleepTest, AbortEndsATransferAsleepOnARing) {
  MeshOptions o;
  o.size = 2;
  o.shm = true;
  Mesh mesh;
  TFRING_ASSERT_OK(MakeMesh(o, &mesh));
  Status st;
  std::thread receiver([&] {
    uint64_t got = 0;
    Link& from0 = mesh[1].data(0);
    st = Transfer(from0, nullptr, 0, from0, &got, sizeof(got), mesh[1].TransferDeadline(), mesh[1].abort_flag());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto start = Clock::now();
  mesh[1].AbortTransfers();
  receiver.join();
  EXPECT_EQ(st.code(), ErrorCode::kAborted) << st.ToString();
  EXPECT_LT(MillisSince(start), 5000);
}

}  // namespace
}  // namespace tfring
