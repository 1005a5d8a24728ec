#include "transport/communicator.h"

#include <utility>

#include "base/fd_limit.h"
#include "base/init_trace.h"
#include "base/logging.h"
#include "transport/mesh_bootstrap.h"

// The Communicator (communicator.h): Create puts together what MeshBootstrap and
// SharedMemorySetup return (and LazyConnections, with lazy data connections); the rest
// are the links' counters, abort and scratch.

namespace tfring {

Status Communicator::Create(const CommunicatorOptions& opt, std::shared_ptr<Store> store,
                            std::unique_ptr<Communicator>* out) {
  auto comm = std::unique_ptr<Communicator>(new Communicator());
  comm->rank_ = opt.rank;
  comm->size_ = opt.size;
  comm->timeout_s_ = opt.timeout_s;
  comm->control_tree_ = ControlTree(opt.rank, opt.size, opt.control_fanout);
  comm->spin_us_ = opt.spin_us;
  comm->facts_ = RosterFacts::Alone(opt);
  comm->data_.resize(opt.size);
  comm->control_.resize(opt.size);
  comm->control_shm_.resize(opt.size);
  comm->heartbeat_.resize(opt.size);
  if (opt.size == 1) {
    *out = std::move(comm);
    return Status::OK();
  }
  const bool lazy_data = opt.lazy_data;
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
  MeshBootstrap::Result mesh;
  TFRING_RETURN_IF_ERROR(MeshBootstrap(opt, comm->control_tree_, lazy_data).Run(listener, store, deadline, &mesh));
  comm->facts_ = std::move(mesh.facts);
  comm->directory_ = mesh.directory;
  comm->shm_inside_hosts_ = opt.shm && comm->facts_.shares_a_host();
  for (int p = 0; p < opt.size; ++p) {
    comm->data_[p].Connected(std::move(mesh.data[p]));
    comm->control_[p] = std::move(mesh.control[p]);
    comm->heartbeat_[p] = std::move(mesh.heartbeat[p]);
  }
  comm->SetSpinMicros(opt.spin_us);
  for (int p = 0; p < opt.size; ++p) comm->facts_.LabelData(p, comm->data_[p].socket());
  if (opt.shm) {
    SharedMemorySetup::Result shm;
    TFRING_RETURN_IF_ERROR(
        SharedMemorySetup(opt, comm->control_tree_, comm->facts_, *comm->directory_).Run(*store, deadline, &shm));
    for (int p = 0; p < opt.size; ++p) {
      Link& link = comm->data_[p];
      if (shm.data[p].tx != nullptr || shm.data[p].rx != nullptr) {
        link.AttachRings(std::move(shm.data[p].tx), std::move(shm.data[p].rx));
      }
      link.ReadPostsOf(shm.read_posts_of[p]);
      link.PostSendsFrom(shm.post_sends_from[p]);
    }
    comm->control_shm_ = std::move(shm.control);
    LogInitPhase("shm");
  }
  if (lazy_data) {
    PeerCard mine;  // this rank's own: from memory
    TFRING_RETURN_IF_ERROR(comm->directory_->Card(opt.rank, deadline, &mine));
    comm->lazy_ = std::make_unique<LazyConnections>(opt, PeerHandshake(opt, comm->directory_), comm->facts_, mine,
                                                    &comm->aborted_);
    comm->lazy_->Start(std::move(listener));
  }
  *out = std::move(comm);
  return Status::OK();
}

Communicator::~Communicator() = default;

int Communicator::data_connections() const {
  int n = 0;
  for (const auto& l : data_) n += l.socket().valid() ? 1 : 0;
  return n;
}

void Communicator::SetSpinMicros(int micros) {
  spin_us_ = micros;
  for (int p = 0; p < size_; ++p) {
    data_[p].socket().set_spin_us(micros);
    control_[p].set_spin_us(micros);
  }
}

std::vector<int> Communicator::HeartbeatPeers(int rank, int size) {
  return MeshBootstrap::HeartbeatPeers(rank, size);
}

uint64_t Communicator::bytes_sent() const {
  uint64_t n = 0;
  for (const auto& link : data_) n += link.bytes_sent();
  return n;
}

uint64_t Communicator::bytes_received() const {
  uint64_t n = 0;
  for (const auto& link : data_) n += link.bytes_received();
  return n;
}

int Communicator::shm_peers() const {
  int n = 0;
  for (const auto& l : data_) n += l.shm() ? 1 : 0;
  return n;
}

int Communicator::cma_peers() const {
  int n = 0;
  for (const auto& l : data_) n += l.cma_pid() > 0 ? 1 : 0;
  return n;
}

void Communicator::Abort() {
  if (shut_down_.exchange(true)) return;
  aborted_.store(true);
  if (lazy_ != nullptr) lazy_->Stop();
  WakeRingSleepers();
  for (auto& l : data_) l.socket().Shutdown();
  for (auto& s : control_) s.Shutdown();
  for (auto& s : heartbeat_) s.Shutdown();
}

void Communicator::AbortTransfers() {
  aborted_.store(true);
  WakeRingSleepers();
}

void Communicator::WakeRingSleepers() {
  for (auto& l : data_) {
    if (l.tx() != nullptr) l.tx()->WakeAll();
    if (l.rx() != nullptr) l.rx()->WakeAll();
  }
}

char* Communicator::Scratch(size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

}  // namespace tfring
