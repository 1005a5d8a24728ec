// Monitoring counters (RuntimeStats, docs/monitoring.md) from a real job of ranks as
// threads: per-rank wait for the slowest rank and negotiation time when one rank is late,
// stall warnings counted on rank 0, exact bytes on the wire of a ring allreduce, fusion, and
// transfer time split by collective.
#include <gtest/gtest.h>

#include <thread>

#include "runtime_job.h"

namespace tfring {
namespace {

using testing_util::Allreduce;
using testing_util::Completion;
using testing_util::FilledInput;
using testing_util::ThreadedJob;
using testing_util::kOpTimeoutS;
using testing_util::Submit;

class StatsTest : public ::testing::TestWithParam<bool> {  // shared memory?
 protected:
  std::map<std::string, std::string> Transport() const {
    return {{"TFRING_SHM", GetParam() ? "1" : "0"}};
  }
  // Transport() with the pacer's holds (parent_pacer.h), in microseconds.
  std::map<std::string, std::string> Holds(const char* first_us, const char* max_us) const {
    auto o = Transport();
    o["TFRING_CONTROL_HOLD_US"] = first_us;
    o["TFRING_CONTROL_HOLD_MAX_US"] = max_us;
    return o;
  }
};

TEST_P(StatsTest, LateRankMakesTheOthersWaitAndIsCountedAsAStall) {
  auto extra = Transport();
  extra["TFRING_STALL_WARNING_S"] = "1";  // logged at level warning; counted at any level
  ThreadedJob job(3, extra);
  TFRING_ASSERT_OK(job.InitAll());
  constexpr double kLateS = 2.5;
  std::vector<Completion> done;
  for (int r = 0; r < 2; ++r) done.push_back(Submit(job[r], Allreduce("late", FilledInput(job, r, 4), job.Alloc<float>(4), 4)));
  std::this_thread::sleep_for(std::chrono::duration<double>(kLateS));
  done.push_back(Submit(job[2], Allreduce("late", FilledInput(job, 2, 4), job.Alloc<float>(4), 4)));
  for (auto& d : done) TFRING_ASSERT_OK(d.Wait(kOpTimeoutS));
  for (int r = 0; r < 3; ++r) {
    RuntimeStats s = job[r].stats();
    EXPECT_EQ(s.collectives, 1) << "rank " << r;
    EXPECT_EQ(s.tensors, 1) << "rank " << r;
    EXPECT_EQ(s.stall_warnings, r == 0 ? 1 : 0) << "the stall inspector runs on rank 0 only";
    if (r < 2) {  // waited for rank 2
      EXPECT_GT(s.wait_for_slowest_seconds, kLateS - 0.3) << "rank " << r;
      EXPECT_LT(s.wait_for_slowest_seconds, kLateS + 2.0) << "rank " << r;
      EXPECT_GE(s.negotiation_seconds, s.wait_for_slowest_seconds - 0.05) << "rank " << r;
    } else {  // the slowest rank waits for nobody
      EXPECT_LT(s.wait_for_slowest_seconds, 0.5);
      EXPECT_LT(s.negotiation_seconds, 1.0);
    }
    EXPECT_GE(s.queue_seconds, 0.0);
  }
}

TEST_P(StatsTest, BytesOnTheWireFusionAndTransferTime) {
  auto extra = Transport();
  extra["TFRING_FUSION_THRESHOLD"] = "1048576";
  extra["TFRING_RECURSIVE_DOUBLING_BYTES"] = "0";  // the ring's bytes (recursive doubling: below)
  ThreadedJob job(3, extra);
  TFRING_ASSERT_OK(job.InitAll());
  // One allreduce of 3000 float32 (12000 bytes): 3 segments of 4000 bytes; each rank sends
  // 2 (n-1) segments = 16000 bytes and receives as many.
  std::vector<Completion> done;
  for (int r = 0; r < 3; ++r) done.push_back(Submit(job[r], Allreduce("big", FilledInput(job, r, 3000), job.Alloc<float>(3000), 3000)));
  for (auto& d : done) TFRING_ASSERT_OK(d.Wait(kOpTimeoutS));
  for (int r = 0; r < 3; ++r) {
    RuntimeStats s = job[r].stats();
    EXPECT_EQ(s.bytes_reduced, 12000);
    EXPECT_EQ(s.bytes_sent, 16000) << "rank " << r;
    EXPECT_EQ(s.bytes_received, 16000) << "rank " << r;
    EXPECT_GT(s.allreduce_transfer_seconds, 0.0);
    EXPECT_EQ(s.allreduce_transfer_seconds, s.transfer_seconds);
    EXPECT_LE(s.transfer_seconds, s.execute_seconds);
  }
  // Four small tensors submitted together: one fused collective.
  done.clear();
  for (int r = 0; r < 3; ++r) {
    std::vector<Submission> group;
    for (int t = 0; t < 4; ++t) {
      group.push_back(Allreduce("g" + std::to_string(t), FilledInput(job, r, 3), job.Alloc<float>(3), 3));
      done.emplace_back();
      group.back().done = done.back().Callback();
    }
    TFRING_ASSERT_OK(job[r].EnqueueGroup(std::move(group)));
  }
  for (auto& d : done) TFRING_ASSERT_OK(d.Wait(kOpTimeoutS));
  // A broadcast of 300 bytes from rank 0 along the chain 0 -> 1 -> 2.
  done.clear();
  for (int r = 0; r < 3; ++r) {
    Submission b;
    b.request.name = "bcast";
    b.request.attrs.op = OpType::kBroadcast;
    b.request.attrs.dtype = DataType::kUInt8;
    b.request.shape = {300};
    b.input = b.output = job.Alloc<uint8_t>(300);
    done.push_back(Submit(job[r], std::move(b)));
  }
  for (auto& d : done) TFRING_ASSERT_OK(d.Wait(kOpTimeoutS));
  for (int r = 0; r < 3; ++r) {
    RuntimeStats s = job[r].stats();
    EXPECT_EQ(s.collectives, 3) << "rank " << r;
    EXPECT_EQ(s.tensors, 6) << "rank " << r;
    EXPECT_EQ(s.fused_tensors, 4) << "rank " << r;
    EXPECT_EQ(s.bytes_reduced, 12000 + 4 * 12);
    // fused: 48 bytes in 3 segments of 16, 4 sent; broadcast: 0 and 1 send, 1 and 2 receive
    EXPECT_EQ(s.bytes_sent, 16000 + 64 + (r < 2 ? 300 : 0)) << "rank " << r;
    EXPECT_EQ(s.bytes_received, 16000 + 64 + (r > 0 ? 300 : 0)) << "rank " << r;
    EXPECT_GT(s.transfer_seconds, s.allreduce_transfer_seconds) << "the broadcast counts in transfer only";
    EXPECT_GE(s.negotiation_seconds, 0.0);
  }
}

// Below TFRING_RECURSIVE_DOUBLING_BYTES, 3 ranks: rank 2 (past the power of two) hands its
// 12000 bytes to rank 0 and gets the result back; ranks 0 and 1 exchange once.
TEST_P(StatsTest, RecursiveDoublingBytesOnTheWire) {
  auto extra = Transport();
  extra["TFRING_RECURSIVE_DOUBLING_BYTES"] = "12000";
  ThreadedJob job(3, extra);
  TFRING_ASSERT_OK(job.InitAll());
  std::vector<Completion> done;
  for (int r = 0; r < 3; ++r) done.push_back(Submit(job[r], Allreduce("small", FilledInput(job, r, 3000), job.Alloc<float>(3000), 3000)));
  for (auto& d : done) TFRING_ASSERT_OK(d.Wait(kOpTimeoutS));
  const int64_t expected[3] = {24000, 12000, 12000};
  for (int r = 0; r < 3; ++r) {
    RuntimeStats s = job[r].stats();
    EXPECT_EQ(s.bytes_reduced, 12000);
    EXPECT_EQ(s.bytes_sent, expected[r]) << "rank " << r;
    EXPECT_EQ(s.bytes_received, expected[r]) << "rank " << r;
  }
}

// A rank other than 0 sends its parent a message at once only while nothing it sent is
// unanswered (parent_pacer.h): the batches it drains before rank 0 answers are held and go
// up together. 40 submissions drained one by one while rank 0 submits nothing cost rank 1
// a few messages (holds of 0.2, 0.4, 0.8 ... ms; about 7), where each went up at once before (and
// still does with TFRING_CONTROL_HOLD_US=0).
TEST_P(StatsTest, AWorkerHoldsItsBatchesWhileItsLastMessageIsUnanswered) {
  constexpr int kTensors = 40;
  int64_t held_messages = 0;
  for (const char* hold_us : {"200", "0"}) {
    ThreadedJob job(2, Holds(hold_us, "100000"));
    TFRING_ASSERT_OK(job.InitAll());
    const int64_t sent0 = job[1].stats().control_messages_sent;
    std::vector<Completion> done;
    std::vector<float*> outs;
    for (int r : {1, 0}) {
      for (int t = 0; t < kTensors; ++t) {
        outs.push_back(job.Alloc<float>(4));
        done.push_back(Submit(job[r], Allreduce("held/" + std::to_string(t), FilledInput(job, r, 4), outs.back(), 4)));
        if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // one batch each
      }
      if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    for (size_t i = 0; i < done.size(); ++i) {
      TFRING_ASSERT_OK(done[i].Wait(kOpTimeoutS));
      for (int64_t k = 0; k < 4; ++k) ASSERT_EQ(outs[i][k], testing_util::SumOfInputs(2, k));
    }
    const int64_t messages = job[1].stats().control_messages_sent - sent0;
    if (std::string(hold_us) == "0") {
      EXPECT_GT(messages, held_messages) << "without holds each batch goes up at once";
    } else {
      EXPECT_LE(messages, 10) << "rank 1 sent " << messages << " messages for " << kTensors << " batches";
      held_messages = messages;
    }
  }
}

// Nothing unanswered, nothing held: with holds of a second, 20 lone allreduces one after
// the other still take milliseconds each.
TEST_P(StatsTest, ALoneCollectiveIsNeverHeld) {
  ThreadedJob job(3, Holds("1000000", "1000000"));
  TFRING_ASSERT_OK(job.InitAll());
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) {
    std::vector<Completion> done;
    for (int r = 0; r < 3; ++r) {
      done.push_back(Submit(job[r], Allreduce("lone", FilledInput(job, r, 2), job.Alloc<float>(2), 2)));
    }
    for (auto& d : done) TFRING_ASSERT_OK(d.Wait(kOpTimeoutS));
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0)
      << "a lone collective was held";
}

TEST(StatsLifecycleTest, SingleRankCountsNoWireBytesAndResetsAtShutdown) {
  Runtime rt;
  TFRING_ASSERT_OK(rt.Init({{"TFRING_LOG_LEVEL", "error"}}, false));
  std::vector<float> in(8, 1.f), out(8);
  TFRING_EXPECT_OK(Submit(rt, Allreduce("solo", in.data(), out.data(), 8)).Wait(kOpTimeoutS));
  RuntimeStats s = rt.stats();
  EXPECT_EQ(s.bytes_reduced, 32);
  EXPECT_EQ(s.bytes_sent, 0);
  EXPECT_EQ(s.wait_for_slowest_seconds, 0.0);
  EXPECT_EQ(s.stall_warnings, 0);
  TFRING_EXPECT_OK(rt.Shutdown());
  EXPECT_EQ(rt.stats().collectives, 0);
}

INSTANTIATE_TEST_SUITE_P(Transports, StatsTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "shm" : "tcp"; });

}  // namespace
}  // namespace tfring
