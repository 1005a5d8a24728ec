// MeshBootstrap (mesh_bootstrap.h): the roster exchange through the store, dialling lower
// ranks and control-tree parents, accepting the rest.
#include "transport/mesh_bootstrap.h"

#include <algorithm>
#include <set>
#include <string>
#include <thread>

#include "base/init_trace.h"
#include "base/logging.h"
#include "rendezvous/auth.h"
#include "transport/mesh_hello.h"

namespace tfring {

using namespace mesh;  // NOLINT: the hello's vocabulary, transport's own

MeshBootstrap::MeshBootstrap(const CommunicatorOptions& options, const ControlTree& tree, bool lazy_data)
    : opt_(options), tree_(tree), lazy_data_(lazy_data) {}

Status MeshBootstrap::Run(Listener& listener, std::shared_ptr<Store> store, Deadline deadline, Result* out) {
  out->facts = RosterFacts::Alone(opt_);
  const size_t n = static_cast<size_t>(opt_.size);
  out->data.resize(n);
  out->control.resize(n);
  out->heartbeat.resize(n);
  TFRING_RETURN_IF_ERROR(ExchangeRoster(listener.port(), std::move(store), deadline, out));
  LogInitPhase("layout");
  const PeerHandshake handshake(opt_, out->directory);
  TFRING_RETURN_IF_ERROR(ConnectMesh(handshake, listener, deadline, out));
  LogInitPhase("mesh");
  return Status::OK();
}

std::vector<int> MeshBootstrap::HeartbeatPeers(int rank, int size) {
  std::vector<int> peers;
  if (size < 2) return peers;
  const int left = (rank + size - 1) % size, right = (rank + 1) % size;
  peers.push_back(std::min(left, right));
  if (right != left) peers.push_back(std::max(left, right));
  return peers;
}

// Publishes this rank's card and roster entry, and learns every rank's host id and
// hostname and this host's and machine's CPUs from the layout rank 0 publishes.
Status MeshBootstrap::ExchangeRoster(int port, std::shared_ptr<Store> store, Deadline deadline, Result* out) {
  const CommunicatorOptions& opt = opt_;
  RosterEntry entry;
  entry.host_id = opt.host_id;
  entry.hostname = opt.hostname;
  entry.must_match = opt.must_match;
  entry.cpus = opt.cpus;
  PeerCard card;
  card.address = opt.advertise_host + ":" + std::to_string(port);
  if (opt.shm) card.shm_token = RandomHex(8);
  card.shm_cma = opt.shm && opt.cma != CmaMode::kOff;
  card.shm_cma_required = opt.shm && opt.cma == CmaMode::kOn;
  JobLayout layout;
  TFRING_RETURN_IF_ERROR(tfring::ExchangeRoster(opt.rank, opt.size, entry, card, *store, deadline, &layout)
                             .WithContext("tfring init on rank " + std::to_string(opt.rank)));
  out->facts = RosterFacts::FromLayout(opt, layout);
  out->directory = std::make_shared<PeerDirectory>(opt.rank, std::move(store), std::move(card));
  return Status::OK();
}

// Every rank connects to every lower rank (data), to its lower ring neighbours
// (heartbeats) and to its control-tree parent, while a thread accepts the rest. Blocking, bounded by
// `deadline`; a timeout names the ranks whose connections never came.
Status MeshBootstrap::ConnectMesh(const PeerHandshake& handshake, Listener& listener, Deadline deadline,
                                  Result* out) {
  const CommunicatorOptions& opt = opt_;
  Status accept_status;
  std::thread acceptor([&] { accept_status = AcceptPeers(handshake, listener, deadline, out); });
  Status connect_status;
  for (int peer = 0; !lazy_data_ && peer < opt.rank && connect_status.ok(); ++peer) {
    connect_status = handshake.Dial(peer, kData, deadline, &out->data[peer]);
  }
  const int parent = tree_.parent();
  if (connect_status.ok() && parent >= 0) {
    connect_status = handshake.Dial(parent, kControl, deadline, &out->control[parent]);
  }
  for (int peer : HeartbeatPeers(opt.rank, opt.size)) {
    if (connect_status.ok() && peer < opt.rank) {
      connect_status = handshake.Dial(peer, kHeartbeat, deadline, &out->heartbeat[peer]);
    }
  }
  if (!connect_status.ok()) listener.Shutdown();  // wake the acceptor
  acceptor.join();
  TFRING_RETURN_IF_ERROR(connect_status);
  TFRING_RETURN_IF_ERROR(accept_status);
  for (int p = 0; p < opt.size; ++p) {
    for (Socket* s : {&out->data[p], &out->control[p], &out->heartbeat[p]}) {
      if (s->valid()) s->SetPeerTimeout(opt.peer_timeout_s);
    }
  }
  return Status::OK();
}

// Accepts the data connections of higher ranks, the heartbeat connections of higher ring
// neighbours and the control connections of this rank's control-tree children. Strangers and hellos of
// another init session are refused (and logged); they do not count.
Status MeshBootstrap::AcceptPeers(const PeerHandshake& handshake, Listener& listener, Deadline deadline,
                                  Result* out) {
  const CommunicatorOptions& opt = opt_;
  std::vector<Socket>& data = out->data;
  std::vector<Socket>& control = out->control;
  std::vector<Socket>& heartbeat = out->heartbeat;
  std::vector<int> heartbeats_in;  // higher ring neighbours
  for (int peer : HeartbeatPeers(opt.rank, opt.size)) {
    if (peer > opt.rank) heartbeats_in.push_back(peer);
  }
  auto watches = [&](int peer) {
    return std::find(heartbeats_in.begin(), heartbeats_in.end(), peer) != heartbeats_in.end();
  };
  const std::vector<int> children = tree_.children();
  const int data_in = lazy_data_ ? 0 : opt.size - 1 - opt.rank;  // lazily: ConnectionPark, later
  const int expected = data_in + static_cast<int>(children.size()) + static_cast<int>(heartbeats_in.size());
  for (int accepted = 0; accepted < expected;) {
    Socket s;
    Status st = listener.Accept(deadline, &s);
    if (!st.ok()) {
      std::set<int> missing;  // peers whose connection never came
      for (int p = opt.rank + 1; !lazy_data_ && p < opt.size; ++p) {
        if (!data[p].valid()) missing.insert(p);
      }
      for (int p : children) {
        if (!control[p].valid()) missing.insert(p);
      }
      for (int p : heartbeats_in) {
        if (!heartbeat[p].valid()) missing.insert(p);
      }
      std::string ranks;
      for (int p : missing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(p);
      return st.WithContext("rank " + std::to_string(opt.rank) + " waited for " + std::to_string(expected - accepted) +
                            " more peer connection(s), from rank(s) " + ranks + " (TFRING_START_TIMEOUT_S)");
    }
    uint8_t channel = 0;
    int peer = -1;
    if (!handshake.ReadHello(s, &channel, &peer)) continue;
    const bool valid = peer >= 0;
    Socket* dest = nullptr;
    if (valid && channel == kData && !lazy_data_ && peer > opt.rank && !data[peer].valid()) {
      dest = &data[peer];
    } else if (valid && channel == kControl && tree_.ParentOf(peer) == opt.rank && !control[peer].valid()) {
      dest = &control[peer];
    } else if (valid && channel == kHeartbeat && watches(peer) && !heartbeat[peer].valid()) {
      dest = &heartbeat[peer];
    }
    if (dest == nullptr) {
      TFRING_LOG(LogLevel::kWarning, "transport",
                 "refused " << s.label() << ": unexpected hello (channel " << int(channel) << ", rank " << peer << ")");
      continue;
    }
    s.set_label("rank " + std::to_string(peer) + " (" + s.PeerAddress() + Suffix(static_cast<Channel>(channel)));
    *dest = std::move(s);
    ++accepted;
  }
  return Status::OK();
}

}  // namespace tfring
