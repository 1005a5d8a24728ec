// CommunicatorOptions::FromConfig: the one place where settings become transport options.
#include <sched.h>
#include <unistd.h>

#include <fstream>

#include "transport/communicator.h"

namespace tfring {
namespace {

// The CPUs this process may run on (its affinity mask); empty when it cannot be read.
std::vector<int> AffinityCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

std::string Hostname() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}

// Ranks share memory when they run on the same kernel (hostname and boot id) and the
// launcher placed them on the same host (cross rank): network-namespace "hosts" in tests
// share a kernel but must talk TCP.
std::string HostId(int64_t cross_rank) {
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  return Hostname() + "/" + boot + "/" + std::to_string(cross_rank);
}

// TFRING_DATA_CONNECTIONS=auto: a full mesh up to this many ranks (its n-1 sockets cost
// little there, and every collective's first call pays no connection), lazily beyond.
constexpr int kFullMeshUpToRanks = 8;

CmaMode CmaModeOf(const std::string& value) {  // the accepted values: config.cc
  if (value == "auto") return CmaMode::kAuto;
  return value == "1" || value == "true" ? CmaMode::kOn : CmaMode::kOff;
}

// Settings that change what goes on the wire, as every rank must have them (a rank that
// creates shared-memory rings waits at init for its peers to open them).
std::string MustMatch(const Config& c, bool shm, bool shm_control) {
  std::string out;
  for (const char* name : {"TFRING_FUSION_IN_PLACE_BYTES", "TFRING_RECURSIVE_DOUBLING_BYTES",
                           "TFRING_HIERARCHICAL_BLOCK_BYTES", "TFRING_RABENSEIFNER_BYTES"}) {
    out += std::string(name) + "=" + std::to_string(c.Int(name)) + ";";
  }
  for (const char* name : {"TFRING_HIERARCHICAL_ALLREDUCE", "TFRING_HIERARCHICAL_ALLGATHER",
                           "TFRING_HIERARCHICAL_BROADCAST", "TFRING_HIERARCHICAL_REDUCESCATTER"}) {
    out += std::string(name) + "=" + std::to_string(c.Bool(name)) + ";";
  }
  out += "TFRING_ALGORITHM=" + c.String("TFRING_ALGORITHM") + ";";
  out += "TFRING_CONTROL_FANOUT=" + std::to_string(c.Int("TFRING_CONTROL_FANOUT")) + ";";
  out += "TFRING_DATA_CONNECTIONS=" + c.String("TFRING_DATA_CONNECTIONS") + ";";
  out += "TFRING_SHM=" + std::to_string(shm) + ";";
  out += "TFRING_SHM_CONTROL=" + std::to_string(shm && shm_control);
  return out;
}

}  // namespace

CommunicatorOptions CommunicatorOptions::FromConfig(const Config& c) {
  CommunicatorOptions opt;
  opt.rank = static_cast<int>(c.Int("TFRING_RANK"));
  opt.size = static_cast<int>(c.Int("TFRING_SIZE"));
  opt.secret = c.String("TFRING_SECRET");
  opt.start_timeout_s = c.Float("TFRING_START_TIMEOUT_S");
  opt.timeout_s = c.Float("TFRING_TIMEOUT_S");
  opt.shm = c.Bool("TFRING_SHM");
  opt.shm_ring_bytes = static_cast<size_t>(c.Int("TFRING_SHM_RING_BYTES"));
  opt.shm_control = c.Bool("TFRING_SHM_CONTROL");
  opt.cma = CmaModeOf(c.String("TFRING_SHM_CMA"));
  opt.cma_min_bytes = static_cast<size_t>(c.Int("TFRING_SHM_CMA_MIN_BYTES"));
  opt.host_id = HostId(c.Int("TFRING_CROSS_RANK"));
  opt.cpus = AffinityCpus();
  opt.must_match = MustMatch(c, opt.shm, opt.shm_control);
  opt.peer_timeout_s = c.Float("TFRING_PEER_TIMEOUT_S");
  opt.hostname = Hostname();
  opt.spin_us = static_cast<int>(c.Int("TFRING_SPIN_US"));
  opt.control_fanout = static_cast<int>(c.Int("TFRING_CONTROL_FANOUT"));
  const std::string& connections = c.String("TFRING_DATA_CONNECTIONS");
  opt.lazy_data = connections == "lazy" || (connections == "auto" && opt.size > kFullMeshUpToRanks);
  return opt;
}

}  // namespace tfring
