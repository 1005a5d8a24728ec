// The Communicator's TCP mesh (communicator.h, Create's steps): the roster exchange through
// the store, dialling lower ranks and control-tree parents, accepting the rest, and the hello
// each connection opens with (mesh_hello.h).
#include "transport/communicator.h"

#include <thread>

#include "base/logging.h"
#include "rendezvous/auth.h"
#include "rendezvous/roster.h"
#include "transport/mesh_hello.h"

namespace tfring {

using namespace mesh;  // NOLINT: the hello's vocabulary, transport's own

// Publishes this rank's roster entry and learns every rank's host id, hostname and (on
// this host) CPUs; the roster also carries the addresses ConnectMesh() dials.
Status Communicator::ExchangeRoster(const CommunicatorOptions& opt, int port, Store& store, Deadline deadline,
                                    std::vector<RosterEntry>* roster) {
  RosterEntry mine;
  mine.address = opt.advertise_host + ":" + std::to_string(port);
  mine.host_id = opt.host_id;
  mine.hostname = opt.hostname;
  mine.must_match = opt.must_match;
  mine.cpus = opt.cpus;
  if (opt.shm) mine.shm_token = RandomHex(8);
  mine.shm_cma = opt.shm && opt.cma != CmaMode::kOff;
  TFRING_RETURN_IF_ERROR(tfring::ExchangeRoster(rank_, size_, mine, store, deadline, roster)
                             .WithContext("tfring init on rank " + std::to_string(rank_)));
  // A host id is "hostname/boot id/cross rank" (communicator_options.cc): its first two
  // parts name the machine, which emulated hosts (network namespaces) share.
  auto machine_of = [](const std::string& id) { return id.substr(0, id.rfind('/')); };
  std::set<int> host_cpus, machine_cpus;
  machine_ranks_ = 0;
  for (int p = 0; p < size_; ++p) {
    const RosterEntry& e = (*roster)[static_cast<size_t>(p)];
    host_ids_[p] = e.host_id;
    hostname_[p] = e.hostname;
    if (e.host_id == opt.host_id) host_cpus.insert(e.cpus.begin(), e.cpus.end());
    if (machine_of(e.host_id) == machine_of(opt.host_id)) {
      ++machine_ranks_;
      machine_cpus.insert(e.cpus.begin(), e.cpus.end());
    }
  }
  host_cpus_ = static_cast<int>(host_cpus.size());
  machine_cpus_ = static_cast<int>(machine_cpus.size());
  return Status::OK();
}

// Every rank connects to every lower rank (data), to its lower ring neighbours
// (heartbeats) and to its control-tree parent, while a thread accepts the rest. Blocking, bounded by
// `deadline`; a timeout names the ranks whose connections never came.
Status Communicator::ConnectMesh(const CommunicatorOptions& opt, const std::vector<RosterEntry>& roster,
                                 Listener& listener, Deadline deadline) {
  addresses_.clear();
  for (const RosterEntry& e : roster) addresses_.push_back(e.address);
  Status accept_status;
  std::thread acceptor([&] { accept_status = AcceptPeers(opt, listener, deadline); });
  Status connect_status;
  for (int peer = 0; !lazy_data_ && peer < opt.rank && connect_status.ok(); ++peer) {
    connect_status = Dial(peer, kData, deadline, &data_[peer].socket);
  }
  const int parent = control_tree_.parent();
  if (connect_status.ok() && parent >= 0) connect_status = Dial(parent, kControl, deadline, &control_[parent]);
  for (int peer : HeartbeatPeers(opt.rank, opt.size)) {
    if (connect_status.ok() && peer < opt.rank) connect_status = Dial(peer, kHeartbeat, deadline, &heartbeat_[peer]);
  }
  if (!connect_status.ok()) listener.Shutdown();  // wake the acceptor
  acceptor.join();
  TFRING_RETURN_IF_ERROR(connect_status);
  TFRING_RETURN_IF_ERROR(accept_status);
  for (int p = 0; p < opt.size; ++p) {
    for (Socket* s : {&data_[p].socket, &control_[p], &heartbeat_[p]}) {
      if (s->valid()) s->SetPeerTimeout(opt.peer_timeout_s);
    }
  }
  return Status::OK();
}

// Accepts the data connections of higher ranks, the heartbeat connections of higher ring
// neighbours and the control connections of this rank's control-tree children. Strangers and hellos of
// another init session are refused (and logged); they do not count.
Status Communicator::AcceptPeers(const CommunicatorOptions& opt, Listener& listener, Deadline deadline) {
  std::vector<int> heartbeats_in;  // higher ring neighbours
  for (int peer : HeartbeatPeers(opt.rank, opt.size)) {
    if (peer > opt.rank) heartbeats_in.push_back(peer);
  }
  auto watches = [&](int peer) {
    return std::find(heartbeats_in.begin(), heartbeats_in.end(), peer) != heartbeats_in.end();
  };
  const std::vector<int> children = control_tree_.children();
  const int data_in = lazy_data_ ? 0 : opt.size - 1 - opt.rank;  // lazily: ConnectionPark, later
  const int expected = data_in + static_cast<int>(children.size()) + static_cast<int>(heartbeats_in.size());
  for (int accepted = 0; accepted < expected;) {
    Socket s;
    Status st = listener.Accept(deadline, &s);
    if (!st.ok()) {
      std::set<int> missing;  // peers whose connection never came
      for (int p = opt.rank + 1; !lazy_data_ && p < opt.size; ++p) {
        if (!data_[p].socket.valid()) missing.insert(p);
      }
      for (int p : children) {
        if (!control_[p].valid()) missing.insert(p);
      }
      for (int p : heartbeats_in) {
        if (!heartbeat_[p].valid()) missing.insert(p);
      }
      std::string ranks;
      for (int p : missing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(p);
      return st.WithContext("rank " + std::to_string(opt.rank) + " waited for " + std::to_string(expected - accepted) +
                            " more peer connection(s), from rank(s) " + ranks + " (TFRING_START_TIMEOUT_S)");
    }
    uint8_t channel = 0;
    int peer = -1;
    if (!ReadHello(s, &channel, &peer)) continue;
    const bool valid = peer >= 0;
    Socket* dest = nullptr;
    if (valid && channel == kData && !lazy_data_ && peer > opt.rank && !data_[peer].socket.valid()) {
      dest = &data_[peer].socket;
    } else if (valid && channel == kControl && control_tree_.ParentOf(peer) == opt.rank && !control_[peer].valid()) {
      dest = &control_[peer];
    } else if (valid && channel == kHeartbeat && watches(peer) && !heartbeat_[peer].valid()) {
      dest = &heartbeat_[peer];
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

// Connects one TCP socket to `peer` for `channel` and proves the job secret (auth.h);
// blocks until `deadline`.
Status Communicator::Dial(int peer, uint8_t channel, Deadline deadline, Socket* out) {
  const std::string& addr = addresses_[static_cast<size_t>(peer)];
  std::string host;
  int port = 0;
  TFRING_RETURN_IF_ERROR(ParseHostPort(addr, "address of rank " + std::to_string(peer), &host, &port));
  Socket s;
  TFRING_RETURN_IF_ERROR(Socket::Connect(host, port, deadline, &s));
  s.set_label("rank " + std::to_string(peer) + " (" + addr + Suffix(static_cast<Channel>(channel)));
  TFRING_RETURN_IF_ERROR(AuthenticateAsClient(s, secret_, Deadline::After(kHelloTimeoutS)));
  TFRING_RETURN_IF_ERROR(s.SendMessage(Hello(static_cast<Channel>(channel), rank_, session_, own_hostname_),
                                       Deadline::After(kHelloTimeoutS)));
  *out = std::move(s);
  return Status::OK();
}

// Errors on a data connection to another host name that host and its other ranks:
// "rank 5 (host h2, with rank 4; 10.0.0.4:41234)".
void Communicator::LabelData(int p) {
  Socket& s = data_[p].socket;
  const std::string peer = DescribePeer(p), label = s.label();
  const size_t open = label.find(" (");
  if (s.valid() && peer.back() == ')' && open != std::string::npos) {
    s.set_label(peer.substr(0, peer.size() - 1) + "; " + label.substr(open + 2));
  }
}

// The ConnectionPark's thread. Reads only what Create() fixed.
bool Communicator::ReadHello(Socket& s, uint8_t* channel, int* peer) {
  Status st = AuthenticateAsServer(s, secret_, Deadline::After(kHelloTimeoutS));
  std::string hello;
  if (st.ok()) st = s.RecvMessage(&hello, kMaxHelloBytes, Deadline::After(kHelloTimeoutS));
  if (!st.ok()) {
    TFRING_LOG(LogLevel::kWarning, "transport", "refused " << s.label() << ": " << st.message());
    return false;
  }
  WireReader r(hello);
  *channel = r.U8();
  *peer = r.I32();
  const std::string session = r.Str();
  if (*channel == kHeartbeat) r.Str();  // the hostname, known from the roster since
  if (r.ok() && session != session_) {
    TFRING_LOG(LogLevel::kWarning, "transport",
               "refused " << s.label() << ": hello from rank " << *peer << " of init session '" << session
                          << "', this is '" << session_ << "' (a process of an earlier generation of the job)");
    return false;
  }
  if (!r.ok() || !r.AtEnd() || *peer < 0 || *peer >= size_ || *peer == rank_) *peer = -1;
  return true;
}

}  // namespace tfring
