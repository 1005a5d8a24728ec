// The algorithm selection table (algorithm.h): each row's conditions, TFRING_ALGORITHM's
// pins (honoured where the algorithm can run, ignored elsewhere) and its parsing.
#include "collectives/algorithm.h"

#include <gtest/gtest.h>

#include "base/config.h"
#include "test_util.h"

namespace tfring {
namespace {

AlgorithmSettings Defaults() {
  AlgorithmSettings s;
  s.recursive_doubling_bytes = 64 << 10;
  s.rabenseifner_bytes = 1 << 20;
  s.hierarchical_allreduce = s.hierarchical_allgather = s.hierarchical_broadcast = true;
  s.hierarchical_reducescatter = true;
  return s;
}

Topology OneHost(int ranks) {
  Topology t;
  t.ranks = ranks;
  t.shm_inside_hosts = true;
  return t;
}

Topology Hosts(int hosts, int per_host) {
  Topology t = OneHost(hosts * per_host);
  t.across_hosts = true;
  t.hosts = hosts;
  t.ranks_per_host = per_host;
  return t;
}

TEST(AlgorithmTableTest, AllreduceByBytesAndHosts) {
  const AlgorithmSettings s = Defaults();
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 8, OneHost(8), s), Algorithm::kRecursiveDoubling);
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 64 << 10, OneHost(3), s), Algorithm::kRecursiveDoubling);
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, (64 << 10) + 1, OneHost(8), s), Algorithm::kRing);
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 8, OneHost(1), s), Algorithm::kRing);
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 8, Hosts(2, 4), s), Algorithm::kRecursiveDoubling);
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 64 << 10, Hosts(4, 2), s), Algorithm::kRecursiveDoubling);
  for (size_t bytes : {size_t{8}, size_t{1} << 20, size_t{16} << 20}) {  // a pin only
    for (const Topology& t : {OneHost(8), Hosts(2, 4)}) {
      EXPECT_NE(ChooseAlgorithm(OpType::kAllreduce, bytes, t, s), Algorithm::kHierarchicalDoubling);
    }
  }
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 16 << 20, Hosts(2, 4), s), Algorithm::kHierarchical);
  AlgorithmSettings off = s;
  off.hierarchical_allreduce = false;
  off.recursive_doubling_bytes = 0;
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 16 << 20, Hosts(2, 4), off), Algorithm::kRing);
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 8, OneHost(8), off), Algorithm::kRing);
}

// Rabenseifner: above recursive doubling up to TFRING_RABENSEIFNER_BYTES, 8+ ranks (a power
// of two), TCP only (no shared-memory peer), where no hierarchical row applies.
TEST(AlgorithmTableTest, RabenseifnerOnEightOrMoreTcpRanksForMediumBuffers) {
  const AlgorithmSettings s = Defaults();
  Topology tcp8 = OneHost(8), tcp6 = OneHost(6), tcp4 = OneHost(4);
  tcp8.shm_inside_hosts = tcp6.shm_inside_hosts = tcp4.shm_inside_hosts = false;
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 64 << 10, tcp8, s), Algorithm::kRecursiveDoubling);
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, (64 << 10) + 1, tcp8, s), Algorithm::kRabenseifner);
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 1 << 20, tcp8, s), Algorithm::kRabenseifner);
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, (1 << 20) + 1, tcp8, s), Algorithm::kRing);
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 1 << 20, OneHost(8), s), Algorithm::kRing);  // shared memory
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 1 << 20, tcp6, s), Algorithm::kRing);  // not a power of two
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 1 << 20, tcp4, s), Algorithm::kRing);  // too few ranks
  Topology hosts = Hosts(4, 2);
  hosts.shm_inside_hosts = false;
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 1 << 20, hosts, s), Algorithm::kHierarchical);
  AlgorithmSettings off = s;
  off.rabenseifner_bytes = 0;
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 1 << 20, tcp8, off), Algorithm::kRing);
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 1 << 20, OneHost(2), s), Algorithm::kRing);  // np=2: today's path
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 8, OneHost(2), s), Algorithm::kRecursiveDoubling);
}

TEST(AlgorithmTableTest, AllgatherBroadcastAndReducescatterAcrossHostsOnly) {
  const AlgorithmSettings s = Defaults();
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllgather, 8, Hosts(3, 2), s), Algorithm::kHierarchical);
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllgather, 16 << 20, OneHost(8), s), Algorithm::kRing);
  EXPECT_EQ(ChooseAlgorithm(OpType::kBroadcast, 16 << 20, Hosts(2, 2), s), Algorithm::kHierarchical);
  EXPECT_EQ(ChooseAlgorithm(OpType::kBroadcast, 64 << 10, Hosts(2, 2), s), Algorithm::kChain);  // small: the chain
  EXPECT_EQ(ChooseAlgorithm(OpType::kBroadcast, 16 << 20, OneHost(8), s), Algorithm::kChain);
  AlgorithmSettings off = s;
  off.hierarchical_allgather = off.hierarchical_broadcast = false;
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllgather, 16 << 20, Hosts(2, 4), off), Algorithm::kRing);
  EXPECT_EQ(ChooseAlgorithm(OpType::kBroadcast, 16 << 20, Hosts(2, 4), off), Algorithm::kChain);
  EXPECT_EQ(ChooseAlgorithm(OpType::kAlltoall, 16 << 20, Hosts(2, 4), s), Algorithm::kPairwise);
  EXPECT_EQ(ChooseAlgorithm(OpType::kReducescatter, 16 << 20, Hosts(2, 4), s), Algorithm::kHierarchical);
  EXPECT_EQ(ChooseAlgorithm(OpType::kReducescatter, 16 << 20, OneHost(8), s), Algorithm::kRing);
  off.hierarchical_reducescatter = false;
  EXPECT_EQ(ChooseAlgorithm(OpType::kReducescatter, 16 << 20, Hosts(2, 4), off), Algorithm::kRing);
}

TEST(AlgorithmTableTest, PinsWinWhereTheyCanRun) {
  AlgorithmSettings s = Defaults();
  std::string error;
  ASSERT_TRUE(ParseAlgorithmPins("allreduce=ring, broadcast=hierarchical,allgather=auto", &s.pinned, &error)) << error;
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 8, Hosts(2, 4), s), Algorithm::kRing);
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 16 << 20, Hosts(2, 4), s), Algorithm::kRing);
  EXPECT_EQ(ChooseAlgorithm(OpType::kBroadcast, 8, Hosts(2, 4), s), Algorithm::kHierarchical);
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllgather, 8, Hosts(2, 4), s), Algorithm::kHierarchical);
  // hierarchical cannot run on one host (or a process set): the table decides
  EXPECT_EQ(ChooseAlgorithm(OpType::kBroadcast, 16 << 20, OneHost(8), s), Algorithm::kChain);
  ASSERT_TRUE(ParseAlgorithmPins("allreduce=recursive_doubling", &s.pinned, &error)) << error;
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 16 << 20, Hosts(2, 4), s), Algorithm::kRecursiveDoubling);
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 16 << 20, OneHost(1), s), Algorithm::kRing);
  ASSERT_TRUE(ParseAlgorithmPins("allreduce=hierarchical_doubling", &s.pinned, &error)) << error;
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 16 << 20, Hosts(2, 4), s), Algorithm::kHierarchicalDoubling);
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 8, OneHost(8), s), Algorithm::kRecursiveDoubling);
  ASSERT_TRUE(ParseAlgorithmPins("allreduce=rabenseifner", &s.pinned, &error)) << error;
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 8, OneHost(3), s), Algorithm::kRabenseifner);
  EXPECT_EQ(ChooseAlgorithm(OpType::kAllreduce, 8, OneHost(1), s), Algorithm::kRing);
  ASSERT_TRUE(ParseAlgorithmPins("auto", &s.pinned, &error)) << error;
  EXPECT_TRUE(s.pinned.empty());
}

TEST(AlgorithmTableTest, BadPinsAreRefusedNamingWhatIsAccepted) {
  std::map<OpType, Algorithm> pins;
  std::string error;
  EXPECT_FALSE(ParseAlgorithmPins("broadcast=ring", &pins, &error));
  EXPECT_NE(error.find("broadcast has no algorithm 'ring' (accepted: auto, chain, hierarchical)"), std::string::npos)
      << error;
  EXPECT_FALSE(ParseAlgorithmPins("alltoall=ring", &pins, &error));
  EXPECT_NE(error.find("OP one of allreduce, allgather, broadcast"), std::string::npos) << error;
  EXPECT_FALSE(ParseAlgorithmPins("hierarchical", &pins, &error));
  Config c;
  Status st = Config::Load({{"TFRING_ALGORITHM", "allgather=tree"}}, false, &c);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("TFRING_ALGORITHM='allgather=tree'"), std::string::npos) << st.ToString();
  TFRING_ASSERT_OK(Config::Load({{"TFRING_ALGORITHM", "allgather=ring"}}, false, &c));
}

}  // namespace
}  // namespace tfring
