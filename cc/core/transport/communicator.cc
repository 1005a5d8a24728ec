#include "transport/communicator.h"

#include <set>

#include "base/fd_limit.h"
#include "base/logging.h"
#include "rendezvous/roster.h"

// The Communicator's files, one concern each: this one builds it (Create, in steps) and
// holds its links' counters, abort and scratch; mesh_bootstrap.cc: the roster exchange and
// the TCP mesh (dial, accept, hello); lazy_connections.cc: data connections made on first
// use; shm_setup.cc: the shared-memory rings and single-copy reads; group.cc: Group.

namespace tfring {

Status Communicator::Create(const CommunicatorOptions& opt, Store& store,
                            std::unique_ptr<Communicator>* out) {
  auto comm = std::unique_ptr<Communicator>(new Communicator());
  comm->rank_ = opt.rank;
  comm->size_ = opt.size;
  comm->timeout_s_ = opt.timeout_s;
  comm->control_tree_ = ControlTree(opt.rank, opt.size, opt.control_fanout);
  comm->secret_ = opt.secret;
  comm->session_ = opt.session;
  comm->own_hostname_ = opt.hostname;
  comm->peer_timeout_s_ = opt.peer_timeout_s;
  comm->spin_us_ = opt.spin_us;
  comm->lazy_data_ = opt.lazy_data && opt.size > 1;
  comm->lazy_tried_.assign(opt.size, false);
  comm->data_.resize(opt.size);
  comm->control_.resize(opt.size);
  comm->control_shm_.resize(opt.size);
  comm->heartbeat_.resize(opt.size);
  comm->hostname_.resize(opt.size);
  comm->host_ids_.assign(opt.size, opt.host_id);
  comm->host_cpus_ = static_cast<int>(std::set<int>(opt.cpus.begin(), opt.cpus.end()).size());
  if (opt.size == 1) {
    *out = std::move(comm);
    return Status::OK();
  }
  Deadline deadline = Deadline::After(opt.start_timeout_s);
  // A data socket per peer, a control socket per control-tree neighbour, a heartbeat
  // socket per ring neighbour, and the listener.
  const long connections = (opt.size - 1) + static_cast<long>(comm->control_tree_.neighbours().size()) +
                           static_cast<long>(HeartbeatPeers(opt.rank, opt.size).size()) + 1;
  TFRING_RETURN_IF_ERROR(EnsureDescriptorLimit(
      connections, ("rank " + std::to_string(opt.rank) + " of a job of " + std::to_string(opt.size)).c_str()));
  Listener listener;
  const std::string& bind = opt.bind_host.empty() ? opt.advertise_host : opt.bind_host;
  TFRING_RETURN_IF_ERROR(Listener::Listen(bind, 0, &listener));
  TFRING_LOG(LogLevel::kDebug, "transport", "data listener on " << bind << ":" << listener.port()
                                                << ", advertised as " << opt.advertise_host << ":"
                                                << listener.port());
  std::vector<RosterEntry> roster;
  TFRING_RETURN_IF_ERROR(comm->ExchangeRoster(opt, listener.port(), store, deadline, &roster));
  TFRING_RETURN_IF_ERROR(comm->ConnectMesh(opt, roster, listener, deadline));
  comm->SetSpinMicros(opt.spin_us);
  for (int p = 0; p < opt.size; ++p) comm->LabelData(p);
  if (opt.shm) TFRING_RETURN_IF_ERROR(comm->ConnectSharedMemory(opt, roster, store, deadline));
  if (comm->lazy_data_) {
    Communicator* c = comm.get();
    comm->park_.Start(std::move(listener), [c](Socket& s) { return c->AdmitData(s); }, opt.rank);
  }
  *out = std::move(comm);
  return Status::OK();
}

int Communicator::data_connections() const {
  int n = 0;
  for (const auto& l : data_) n += l.socket.valid() ? 1 : 0;
  return n;
}

void Communicator::SetSpinMicros(int micros) {
  spin_us_ = micros;
  for (int p = 0; p < size_; ++p) {
    data_[p].socket.set_spin_us(micros);
    control_[p].set_spin_us(micros);
  }
}

std::vector<int> Communicator::HeartbeatPeers(int rank, int size) {
  std::vector<int> peers;
  if (size < 2) return peers;
  const int left = (rank + size - 1) % size, right = (rank + 1) % size;
  peers.push_back(std::min(left, right));
  if (right != left) peers.push_back(std::max(left, right));
  return peers;
}

std::string Communicator::DescribePeer(int peer) const {
  std::string out = "rank " + std::to_string(peer);
  if (peer < 0 || peer >= size_ || static_cast<int>(host_ids_.size()) != size_) return out;
  const std::string& id = host_ids_[peer];
  if (id.empty() || id == host_ids_[rank_]) return out;  // this host: nothing to tell apart
  const std::string& name = hostname_[peer];
  out += " (host " + (name.empty() ? id.substr(0, id.find('/')) : name);  // host id: hostname/boot id/cross rank
  constexpr int kMaxNamed = 8;
  int named = 0, more = 0;
  for (int p = 0; p < size_; ++p) {
    if (p == peer || host_ids_[p] != id) continue;
    if (named == kMaxNamed) {
      ++more;
      continue;
    }
    out += (named++ == 0 ? ", with rank " : ", ") + std::to_string(p);
  }
  if (more) out += " and " + std::to_string(more) + " more";
  return out + ")";
}

bool Communicator::homogeneous() const {
  std::map<std::string, int> ranks_per_host;
  for (const auto& id : host_ids_) ++ranks_per_host[id];
  for (const auto& [id, n] : ranks_per_host) {
    if (n != ranks_per_host.begin()->second) return false;
  }
  return true;
}

uint64_t Communicator::bytes_sent() const {
  uint64_t n = 0;
  for (const auto& link : data_) n += link.bytes_sent;
  return n;
}

uint64_t Communicator::bytes_received() const {
  uint64_t n = 0;
  for (const auto& link : data_) n += link.bytes_received;
  return n;
}

int Communicator::shm_peers() const {
  int n = 0;
  for (const auto& l : data_) n += l.shm() ? 1 : 0;
  return n;
}

int Communicator::cma_peers() const {
  int n = 0;
  for (const auto& l : data_) n += l.cma_pid > 0 ? 1 : 0;
  return n;
}

void Communicator::Abort() {
  if (shut_down_.exchange(true)) return;
  aborted_.store(true);
  park_.Stop();
  WakeRingSleepers();
  for (auto& l : data_) l.socket.Shutdown();
  for (auto& s : control_) s.Shutdown();
  for (auto& s : heartbeat_) s.Shutdown();
}

void Communicator::AbortTransfers() {
  aborted_.store(true);
  WakeRingSleepers();
}

void Communicator::WakeRingSleepers() {
  for (auto& l : data_) {
    if (l.tx) l.tx->WakeAll();
    if (l.rx) l.rx->WakeAll();
  }
}

char* Communicator::Scratch(size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

}  // namespace tfring
