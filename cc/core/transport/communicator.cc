#include "transport/communicator.h"

#include <algorithm>
#include <cerrno>
#include <map>
#include <set>
#include <thread>

#include "rendezvous/auth.h"
#include "transport/cma.h"
#include "base/fd_limit.h"
#include "base/logging.h"
#include "rendezvous/roster.h"
#include "base/wire.h"

namespace tfring {
namespace {

enum Channel : uint8_t { kData = 1, kControl = 2, kHeartbeat = 3 };
constexpr double kHelloTimeoutS = 10.0;
// Control messages are a few hundred bytes in steady state; a larger one (a first step's
// requests for thousands of tensors) takes the TCP connection instead (control_channel.h).
constexpr size_t kControlRingBytes = 256 << 10;

constexpr size_t kMaxHelloBytes = 1024;

// Every hello names the init session it belongs to (CommunicatorOptions::session), so a
// process of an earlier session (an elastic job's previous generation) that reaches a new
// listener is refused instead of being mixed into the new mesh. A heartbeat hello also
// carries the hostname, for the messages that name a lost rank.
std::string Hello(Channel channel, int rank, const std::string& session, const std::string& hostname) {
  WireWriter w;
  w.U8(channel);
  w.I32(rank);
  w.Str(session);
  if (channel == kHeartbeat) w.Str(hostname);
  return w.Take();
}

const char* Suffix(Channel channel) {
  return channel == kControl ? ", control)" : channel == kHeartbeat ? ", heartbeat)" : ")";
}

}  // namespace

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

void Communicator::ConnectLazily(int peer) {
  if (peer == rank_ || peer < 0 || peer >= size_ || lazy_tried_[peer] || aborted_.load()) return;
  lazy_tried_[peer] = true;
  const Deadline deadline = Deadline::After(timeout_s_);
  Socket s;
  Status st;
  if (park_.BeginDial(peer, &s)) {  // not parked yet: dial it (connection_park.h)
    st = Dial(peer, kData, deadline, &s);
    std::string verdict;
    if (st.ok()) st = s.RecvMessage(&verdict, 1, Deadline::After(kHelloTimeoutS), &aborted_);
    if (st.ok() && verdict != std::string(1, ConnectionPark::kAccept)) {
      s = Socket();  // declined: the peer dialled too, and the lower rank's connection wins
      st = verdict == std::string(1, ConnectionPark::kDecline)
               ? park_.Take(peer, deadline, &aborted_, &s)
               : Status::Internal("rank " + std::to_string(peer) + " answered a data connection with '" + verdict + "'");
    }
  }
  Link& link = data_[peer];
  if (!st.ok()) {
    TFRING_LOG(LogLevel::kDebug, "transport", "no data connection with rank " << peer << ": " << st.message());
    link.socket.set_label(DescribePeer(peer) + " (no data connection: " + st.message() + ")");
    return;
  }
  s.SetPeerTimeout(peer_timeout_s_);
  s.set_spin_us(spin_us_);
  link.socket = std::move(s);
  LabelData(peer);
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

int Communicator::AdmitData(Socket& s) {
  uint8_t channel = 0;
  int peer = -1;
  if (!ReadHello(s, &channel, &peer)) return -1;
  if (peer < 0 || channel != kData) {
    TFRING_LOG(LogLevel::kWarning, "transport",
               "refused " << s.label() << ": unexpected data hello (channel " << int(channel) << ", rank " << peer << ")");
    return -1;
  }
  s.set_label("rank " + std::to_string(peer) + " (" + s.PeerAddress() + ")");
  return peer;
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

// Every rank creates one incoming ring per peer on its host and publishes its name; then
// opens the peers' rings for its outgoing side (recording its pid for single-copy reads)
// and acknowledges; once every incoming ring is acknowledged, it unlinks the names (nothing
// is left in /dev/shm, even after a crash). Single-copy (TFRING_SHM_CMA): the local peers
// the roster marks as taking part (RosterEntry::shm_cma) probe whether they can read each
// other's memory and publish the answer; a writer posts large sends only where the answer
// is yes.
//
// Store requests per rank with local peers: 4 (two "done" keys, two waits), whatever the
// number of local peers (with TFRING_SHM_CMA, 2 more per local peer); ring names come from the
// roster's shm tokens. A peer that never gets there is named by the wait's timeout.
Status Communicator::ConnectSharedMemory(const CommunicatorOptions& opt, const std::vector<RosterEntry>& roster,
                                         Store& store, Deadline deadline) {
  std::vector<int> local;
  for (int p = 0; p < size_; ++p) {
    if (p != rank_ && host_ids_[p] == opt.host_id) local.push_back(p);
  }
  auto key = [](int from, int to) { return "shm/" + std::to_string(from) + "to" + std::to_string(to); };
  const bool cma = opt.cma != CmaMode::kOff;
  if (cma && !local.empty()) AllowCmaReaders();
  // Each receiver creates its rings; each sender opens them and says so; the receiver then
  // unlinks the names (nothing stays in /dev/shm after a crash). Control rings exist
  // between control-tree neighbours on this host only.
  struct Ring {
    int peer;
    bool control;  // a control ring (else data); its names and keys start with "c"
    std::unique_ptr<ShmRing>* rx;
    std::unique_ptr<ShmRing>* tx;
    size_t bytes;
  };
  std::vector<Ring> rings;
  for (int p : local) {
    rings.push_back(Ring{p, false, &data_[p].rx, &data_[p].tx, opt.shm_ring_bytes});
    if (opt.shm_control && control_tree_.IsNeighbour(p)) {
      rings.push_back(Ring{p, true, &control_shm_[p].rx, &control_shm_[p].tx, kControlRingBytes});
    }
  }
  if (rings.empty()) return Status::OK();
  // The receiver r of ring "from p to r" names it after its own roster token, so p knows
  // the name; every rank says once that all its rings exist, then once that it opened its
  // peers' (the receivers then unlink the names).
  auto ring_name = [&](const Ring& r, int from, int to) {
    return "/tfring-" + roster[static_cast<size_t>(to)].shm_token + "-" + (r.control ? "c" : "") +
           std::to_string(from) + "to" + std::to_string(to);
  };
  auto all_local = [&](const char* what) {
    std::vector<std::string> keys;
    for (int p : local) keys.push_back(std::string("shm/") + what + "/" + std::to_string(p));
    return keys;
  };
  const std::string me = std::to_string(rank_);
  for (const Ring& r : rings) TFRING_RETURN_IF_ERROR(ShmRing::Create(ring_name(r, r.peer, rank_), r.bytes, r.rx));
  TFRING_RETURN_IF_ERROR(store.Set("shm/created/" + me, "1"));
  TFRING_RETURN_IF_ERROR(store.Wait(all_local("created"), deadline.SecondsLeft())
                             .WithContext("rank " + me + " waiting for its host's ranks to create their "
                                          "shared-memory rings"));
  for (const Ring& r : rings) {
    TFRING_RETURN_IF_ERROR(ShmRing::Open(ring_name(r, rank_, r.peer), r.tx));
    if (cma && !r.control) (*r.tx)->PublishWriter();  // before "opened": the peer probes after
  }
  TFRING_RETURN_IF_ERROR(store.Set("shm/opened/" + me, "1"));
  TFRING_RETURN_IF_ERROR(store.Wait(all_local("opened"), deadline.SecondsLeft())
                             .WithContext("rank " + me + " waiting for its host's ranks to open its "
                                          "shared-memory rings"));
  for (const Ring& r : rings) (*r.rx)->Unlink();
  if (!cma) return Status::OK();  // nothing below applies: no single-copy reads

  // Readability is exchanged only with local peers that take part too (the roster says
  // which); a pair with a rank that has single-copy off uses the rings both ways.
  std::vector<int> cma_local;
  Status required;  // CmaMode::kOn and a pair that cannot use it
  for (int p : local) {
    if (roster[static_cast<size_t>(p)].shm_cma) {
      cma_local.push_back(p);
    } else if (opt.cma == CmaMode::kOn && required.ok()) {
      required = Status::Unimplemented("TFRING_SHM_CMA=1 but rank " + std::to_string(p) +
                                       " runs with single-copy reads off (TFRING_SHM_CMA=0 there), so it "
                                       "cannot read rank " + std::to_string(rank_) +
                                       "'s memory: set TFRING_SHM_CMA=auto or 0, or the same on every rank");
    }
  }
  for (int p : cma_local) {
    const int err = data_[p].rx->ProbeWriter(&data_[p].cma_pid);
    if (err != 0) {
      TFRING_LOG(LogLevel::kDebug, "transport", "single-copy reads from rank " << p << " unavailable ("
                     << CmaErrorText(err) << "): its data comes through the shared-memory ring");
      if (opt.cma == CmaMode::kOn && required.ok()) {
        required = Status::Unimplemented(
            "TFRING_SHM_CMA=1 but rank " + std::to_string(rank_) + " cannot read rank " +
            std::to_string(p) + "'s memory with process_vm_readv (" + CmaErrorText(err) +
            "; ptrace restrictions such as Yama ptrace_scope or a container without "
            "CAP_SYS_PTRACE): set TFRING_SHM_CMA=auto or 0");
      }
    }
    TFRING_RETURN_IF_ERROR(store.Set(key(p, rank_) + "/cma", err == 0 ? "1" : "0"));
  }
  for (int p : cma_local) {
    std::string readable;
    TFRING_RETURN_IF_ERROR(store.Get(key(rank_, p) + "/cma", deadline.SecondsLeft(), &readable));
    if (readable == "1") data_[p].cma_min_bytes = std::max<size_t>(opt.cma_min_bytes, 1);
    if (readable != "1" && opt.cma == CmaMode::kOn && required.ok()) {
      required = Status::Unimplemented("TFRING_SHM_CMA=1 but rank " + std::to_string(p) +
                                       " cannot read rank " + std::to_string(rank_) +
                                       "'s memory with process_vm_readv: set TFRING_SHM_CMA=auto or 0");
    }
  }
  TFRING_LOG(LogLevel::kDebug, "transport", "single-copy reads from " << cma_peers() << " of "
                 << local.size() << " local peer(s), for sends of at least " << opt.cma_min_bytes
                 << " bytes");
  return required;
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

Group::Group(Communicator& comm, const std::vector<int32_t>& members)
    : comm_(&comm), members_(&members), rank_(-1), size_(static_cast<int>(members.size())) {
  rank_ = local_index(comm.rank());
}

int Group::local_index(int global) const {
  if (members_ == nullptr) return global >= 0 && global < size_ ? global : -1;
  for (size_t i = 0; i < members_->size(); ++i) {
    if ((*members_)[i] == global) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace tfring
