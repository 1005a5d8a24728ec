// CommunicatorOptions::FromConfig: every transport setting comes from the loaded Config
// (no process globals), and SetSpinMicros reaches the connections on a collective's path.
#include <gtest/gtest.h>

#include "transport/communicator.h"
#include "base/config.h"
#include "test_util.h"

namespace tfring {
namespace {

using testing_util::MakeMesh;
using testing_util::Mesh;
using testing_util::MeshOptions;

TEST(CommunicatorOptionsTest, FromConfigTakesEveryTransportSetting) {
  Config c;
  TFRING_ASSERT_OK(Config::Load({{"TFRING_RANK", "2"}, {"TFRING_SIZE", "4"}, {"TFRING_CROSS_RANK", "1"}, {"TFRING_CROSS_SIZE", "2"}, {"TFRING_STORE_ADDR", "127.0.0.1:1"}, {"TFRING_SECRET", "s"},
                                 {"TFRING_SPIN_US", "37"}, {"TFRING_SHM_CMA", "auto"}, {"TFRING_SHM", "0"},
                                 {"TFRING_TIMEOUT_S", "12"}, {"TFRING_PEER_TIMEOUT_S", "7"},
                                 {"TFRING_HIERARCHICAL_BROADCAST", "0"}, {"TFRING_HIERARCHICAL_BLOCK_BYTES", "4096"}},
                                false, &c));
  const CommunicatorOptions opt = CommunicatorOptions::FromConfig(c);
  EXPECT_EQ(opt.rank, 2);
  EXPECT_EQ(opt.size, 4);
  EXPECT_EQ(opt.spin_us, 37);
  EXPECT_EQ(opt.cma, CmaMode::kAuto);
  EXPECT_FALSE(opt.shm);
  EXPECT_EQ(opt.timeout_s, 12);
  EXPECT_EQ(opt.peer_timeout_s, 7);
  EXPECT_EQ(opt.host_id.substr(opt.host_id.rfind('/')), "/1") << "the cross rank tells launcher hosts apart";
  EXPECT_NE(opt.must_match.find("TFRING_HIERARCHICAL_BROADCAST=0"), std::string::npos) << opt.must_match;
  EXPECT_NE(opt.must_match.find("TFRING_SHM=0"), std::string::npos) << opt.must_match;
  EXPECT_NE(opt.must_match.find("TFRING_HIERARCHICAL_BLOCK_BYTES=4096"), std::string::npos) << opt.must_match;
  Config on;
  TFRING_ASSERT_OK(Config::Load({{"TFRING_SHM_CMA", "true"}}, false, &on));
  EXPECT_EQ(CommunicatorOptions::FromConfig(on).cma, CmaMode::kOn);
}

TEST(CommunicatorOptionsTest, SpinReachesTheDataAndControlConnectionsOnly) {
  MeshOptions o;
  o.size = 3;
  Mesh mesh;
  TFRING_ASSERT_OK(MakeMesh(o, &mesh));
  EXPECT_EQ(mesh[1].data(2).socket().spin_us(), 0) << "never spins unless told";
  for (int r = 0; r < 3; ++r) mesh[r].SetSpinMicros(25);
  EXPECT_EQ(mesh[0].data(1).socket().spin_us(), 25);
  EXPECT_EQ(mesh[2].data(0).socket().spin_us(), 25);
  EXPECT_EQ(mesh[1].control(0).spin_us(), 25);
  EXPECT_EQ(mesh[0].control(2).spin_us(), 25);
  EXPECT_EQ(mesh[0].heartbeat(1).spin_us(), 0) << "the liveness thread never spins";
  mesh[1].SetSpinMicros(0);
  EXPECT_EQ(mesh[1].data(0).socket().spin_us(), 0);
}

}  // namespace
}  // namespace tfring
