// CommunicatorOptions::FromConfig: the one place where settings become transport options.
#include <sched.h>
#include <unistd.h>

#include <fstream>

#include "transport/communicator_options.h"

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

}  // namespace

CommunicatorOptions CommunicatorOptions::FromConfig(const Config& c) {
  const Settings& s = c.settings();
  CommunicatorOptions opt;
  opt.rank = static_cast<int>(s.rank);
  opt.size = static_cast<int>(s.size);
  opt.secret = s.secret;
  opt.start_timeout_s = s.start_timeout_s;
  opt.timeout_s = s.timeout_s;
  opt.shm = s.shm;
  opt.shm_ring_bytes = static_cast<size_t>(s.shm_ring_bytes);
  opt.shm_control = s.shm_control;
  opt.cma = CmaModeOf(s.shm_cma);
  opt.cma_min_bytes = static_cast<size_t>(s.shm_cma_min_bytes);
  opt.host_id = HostId(s.cross_rank);
  opt.cpus = AffinityCpus();
  // What changes what goes on the wire, as every rank must have it (a rank that creates
  // shared-memory rings waits at init for its peers to open them): the table's MATCH column.
  opt.must_match = s.MustMatchText();
  opt.peer_timeout_s = s.peer_timeout_s;
  opt.hostname = Hostname();
  opt.spin_us = static_cast<int>(s.spin_us);
  opt.control_fanout = static_cast<int>(s.control_fanout);
  const std::string& connections = s.data_connections;
  opt.lazy_data = connections == "lazy" || (connections == "auto" && opt.size > kFullMeshUpToRanks);
  return opt;
}

}  // namespace tfring
