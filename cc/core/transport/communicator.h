// Communicator: this rank's authenticated connections to every other rank of the job.
//
//   * data(peer): one Link per peer carrying only collective payloads, in the order the
//     coordinator fixed for every rank: TCP, plus shared-memory rings when the peer is on
//     the same host (same host id) and shared memory is enabled. A full mesh made at
//     Create(), or (lazy_data) each TCP connection made when a collective first uses it:
//     a rank then holds sockets only to the peers its algorithms talk to (ring neighbours,
//     recursive-doubling partners, its host's ranks...), not n-1 (connection_park.h).
//     Between local ranks, large sends can be single-copy (cma.h, link.h): the receiver reads
//     them from the sender's buffer. Each direction is probed once; a pair where the
//     kernel refuses (EPERM: Yama ptrace_scope, containers) stays on the rings. With
//     lazy_data a local pair's rings, and its probe, are made with its data connection, on
//     first use (shm_pairing.h), so a rank holds rings only with the local peers it uses.
//   * control: the edges of the control tree (control_tree.h: each rank to its parent and
//     its children, TFRING_CONTROL_FANOUT of them at most) carrying coordinator messages
//     (requests up, responses down), kept apart from data so a request never interleaves
//     with a payload. Between tree neighbours on one host, a pair of shared-memory message
//     rings as well (control_shm_tx/rx; control_channel.h decides what goes where).
//   * heartbeat: a ring (each rank and its two neighbours), owned by the liveness thread
//     (liveness.h), so beats never wait behind a payload or the background thread. Every TCP connection also
//     carries kernel keepalives and a user timeout of peer_timeout_s (a cut network is
//     noticed inside a transfer too).
//
// Built by Create(), blocking and bounded by start_timeout_s, from classes one per concern
// whose results it then owns: MeshBootstrap (mesh_bootstrap.h: the roster through the
// store, O(n) requests and bytes in all; every rank dials every lower rank, its
// control-tree parent and its lower heartbeat neighbours and accepts the rest; every
// connection authenticated with the job secret, strangers logged and refused; a timeout
// names the ranks that never connected) returns the sockets, the roster's facts
// (roster_facts.h) and the directory of peers' cards (peer_directory.h: a peer's address
// read from the store when this rank first dials it, which keeps the store alive);
// SharedMemorySetup (shm_setup.h) returns the rings and the single-copy facts;
// LazyConnections (lazy_connections.h), kept for the communicator's life with lazy_data,
// makes data connections on first use. The Communicator itself holds the links, the roster
// facts, the abort flag and the scratch memory.
// Thread-safety: only the runtime's background thread uses the sockets; Abort() may be
// called from any thread and wakes every blocked transfer.
// Files: communicator.cc (Create, counters, abort, scratch), group.cc (Group).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/socket.h"
#include "rendezvous/store.h"
#include "transport/communicator_options.h"
#include "transport/control_tree.h"
#include "transport/host_layout.h"
#include "transport/lazy_connections.h"
#include "transport/link.h"
#include "transport/peer_directory.h"
#include "transport/roster_facts.h"
#include "transport/shm_setup.h"

namespace tfring {

class Communicator {
 public:
  // `store`: the init session's; the communicator keeps it to read peers' cards later
  // (lazy data connections), so it must stay reachable while the communicator is used.
  static Status Create(const CommunicatorOptions& options, std::shared_ptr<Store> store,
                       std::unique_ptr<Communicator>* out);
  ~Communicator();

  int rank() const { return rank_; }
  int size() const { return size_; }
  int right() const { return (rank_ + 1) % size_; }
  int left() const { return (rank_ + size_ - 1) % size_; }
  double timeout_s() const { return timeout_s_; }

  // With lazy_data, the first call for a peer makes its TCP connection (this rank dials it,
  // or takes the one the peer dialled from its ConnectionPark), bounded by timeout_s; a connection
  // that cannot be made leaves the link without a socket, labelled with why, and the
  // transfer on it fails naming the peer. Background thread only.
  Link& data(int peer) {
    Link& link = data_[peer];
    if (lazy_ != nullptr && !link.socket().valid()) lazy_->Connect(peer, link, spin_us_);
    return link;
  }
  // The link to `peer` as it stands, never connecting it: for questions about a link (its
  // counters, whether it is shared memory) that must not open a lazy connection.
  const Link& peek(int peer) const { return data_[peer]; }
  // Data connections open now (TCP sockets; tests and the scale lab).
  int data_connections() const;
  // Peers' cards (addresses) this rank has read from the store so far. Any thread.
  int peer_cards_read() const { return directory_ == nullptr ? 0 : directory_->cards_read(); }
  // How many peers are reached through shared memory so far (lazily: those used so far;
  // shm_inside_hosts() is the job-wide fact).
  int shm_peers() const;
  int cma_peers() const;  // how many of them this rank reads single-copy from
  // Payload bytes sent to / received from all peers so far (sum of the links' counters).
  // Background thread only, like the links.
  uint64_t bytes_sent() const;
  uint64_t bytes_received() const;
  // The control tree (control_tree.h). Const after Create(); any thread.
  const ControlTree& control_tree() const { return control_tree_; }
  // The control connection to a control-tree neighbour (parent or child).
  Socket& control(int peer) { return control_[peer]; }
  // The shared-memory control rings to / from `peer` (a control-tree neighbour on this
  // host, with shm and shm_control on), else null. Background thread only.
  ShmRing* control_shm_tx(int peer) { return control_shm_[peer].tx.get(); }
  ShmRing* control_shm_rx(int peer) { return control_shm_[peer].rx.get(); }
  // heartbeat(p) for each p of HeartbeatPeers(rank, size). Liveness thread only.
  Socket& heartbeat(int peer) { return heartbeat_[peer]; }
  // The ranks a rank exchanges heartbeats with: its two neighbours on the ring of ranks
  // (one at 2 ranks, none alone), in increasing order. A ring, not a star around rank 0:
  // every rank watches and is watched by two, whatever the job's size (liveness.h).
  static std::vector<int> HeartbeatPeers(int rank, int size);
  // Hostname of any rank (from the roster). Const after Create(); any thread.
  const std::string& hostname_of(int peer) const { return facts_.hostnames[peer]; }
  // "rank P", and for a peer on another host than this rank's " (host H, with ranks A, B)"
  // naming its host and the other ranks there (a lost host takes them all; at most 8 named).
  // From the roster exchanged at Create(); any thread.
  std::string DescribePeer(int peer) const { return facts_.DescribePeer(peer); }
  // Every host has the same number of ranks (host = CommunicatorOptions::host_id). Const
  // after Create(); any thread.
  bool homogeneous() const { return facts_.homogeneous(); }
  // The ranks on this kernel (same hostname and boot id, whatever their TFRING_CROSS_RANK:
  // emulated hosts share one), and the roster's facts about their CPUs (usable_cpus,
  // Outnumbered: roster_facts.h). Const after Create(); any thread.
  int machine_ranks() const { return facts_.machine_ranks; }
  const RosterFacts& facts() const { return facts_; }
  // The host id of every rank (CommunicatorOptions::host_id, exchanged at Create()). Const
  // after Create(); any thread.
  const std::vector<std::string>& host_ids() const { return facts_.host_ids; }
  // How many hosts the job runs on (distinct host ids). Const after Create(); any thread.
  int host_count() const { return facts_.hosts; }
  // Two ranks of the job share a host (RosterFacts::shares_a_host) and shared memory is on
  // (CommunicatorOptions::shm): the same on every rank, unlike shm_peers(). Const after
  // Create(); any thread.
  bool shm_inside_hosts() const { return shm_inside_hosts_; }

  // A deadline for one collective's transfers.
  Deadline TransferDeadline() const { return Deadline::After(timeout_s_); }
  const std::atomic<bool>* abort_flag() const { return &aborted_; }

  // Wakes every blocked transfer and makes later ones fail. Any thread; idempotent.
  void Abort();
  // The same within ~kAbortPollMs, but leaves the connections open so that this rank can
  // still tell its peers why (Abort() closes them). Any thread; idempotent.
  void AbortTransfers();
  bool aborted() const { return aborted_.load(); }

  // Sets how long waits on the data and control connections spin before they sleep
  // (Socket::spin_us; CommunicatorOptions::spin_us at Create). Before any transfer: not
  // thread-safe with one.
  void SetSpinMicros(int micros);

  // Scratch memory for collectives (grown on demand, reused; background thread only).
  char* Scratch(size_t bytes);

 private:
  Communicator() = default;
  void WakeRingSleepers();  // ends transfers asleep on a shared-memory ring (link.cc)

  int rank_ = 0;
  int size_ = 1;
  double timeout_s_ = 30;
  ControlTree control_tree_{0, 1, 0};
  RosterFacts facts_;  // const after Create()
  std::shared_ptr<PeerDirectory> directory_;  // null alone; thread-safe
  bool shm_inside_hosts_ = false;
  std::vector<Link> data_;
  std::vector<Socket> control_;
  std::vector<ShmRingPair> control_shm_;  // by peer
  std::vector<Socket> heartbeat_;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> shut_down_{false};  // Abort() closed the connections
  std::vector<char> scratch_;
  int spin_us_ = 0;
  // With lazy_data; last: its park's thread runs until it is destroyed.
  std::unique_ptr<LazyConnections> lazy_;
};

// Group: the ranks a collective runs on, as the algorithms (collectives.h, adasum.h) see
// them: rank()/size()/left()/right()/data(i) in set-local indices 0..size()-1, mapped onto
// the parent Communicator's links. Built implicitly from a Communicator (the whole job,
// identity mapping: one pointer test per data() call, no allocation), or over a process
// set's sorted global ranks (`members`, which must contain comm.rank() and outlive the
// Group), or as a Subgroup of another (owning its members). A group may carry its
// HostLayout (host_layout.h; WithHostLayout), in its own indices: the hierarchical
// algorithms run on any group that carries one, the whole job or a process set.
// Cheap to copy; background thread only, like the links.
class Group {
 public:
  Group(Communicator& comm) : comm_(&comm), rank_(comm.rank()), size_(comm.size()) {}  // NOLINT
  Group(Communicator& comm, const std::vector<int32_t>& members);

  int rank() const { return rank_; }
  int size() const { return size_; }
  int right() const { return (rank_ + 1) % size_; }
  int left() const { return (rank_ + size_ - 1) % size_; }
  // The global rank of set-local index i.
  int global_rank(int i) const { return members_ == nullptr ? i : (*members_)[static_cast<size_t>(i)]; }
  // Set-local index of a global rank, -1 when it is not a member.
  int local_index(int global) const;
  Link& data(int i) const { return comm_->data(global_rank(i)); }
  const Link& peek(int i) const { return comm_->peek(global_rank(i)); }  // never connects
  Deadline TransferDeadline() const { return comm_->TransferDeadline(); }
  const std::atomic<bool>* abort_flag() const { return comm_->abort_flag(); }
  char* Scratch(size_t bytes) const { return comm_->Scratch(bytes); }

  // The host id of member i, as exchanged at init ("" where the job has none).
  const std::string& host_id(int i) const;
  // The group of this group's members at `indices` (this group's indices, ascending), in
  // that order; it carries no host layout. This rank must be among them.
  Group Subgroup(const std::vector<int32_t>& indices) const;
  // The groups of this group's host layout (which it must carry): the ranks on this rank's
  // host, this rank's peers across hosts (one per host), the first rank of every host.
  // No allocation: they are the layout's *_ranks, which HostLayoutOf filled.
  // The returned group points into the layout: it must not outlive this group.
  Group Local() const;
  Group Cross() const;
  Group Leaders() const;
  // This group carrying `layout` (null: none), which must be this group's (HostLayoutOf).
  Group WithHostLayout(std::shared_ptr<const HostLayout> layout) const;
  // The layout of this group's ranks on hosts, or null: then no hierarchical algorithm runs.
  const HostLayout* host_layout() const { return host_layout_.get(); }
  // What the algorithm selection reads of this group (host_layout.h): the one place a
  // Topology is derived, from size(), host_layout() and the job's shm_inside_hosts().
  Topology topology() const;

 private:
  Communicator* comm_;
  const std::vector<int32_t>* members_ = nullptr;  // null: every rank, identity
  std::shared_ptr<const std::vector<int32_t>> owned_members_;  // a Subgroup's, members_ points here
  std::shared_ptr<const HostLayout> host_layout_;
  int rank_;
  int size_;
};

// The layout of `group`'s members on hosts (MakeHostLayout over their host ids), or null
// where none applies (one host, one rank per host, unequal hosts, no host ids).
std::shared_ptr<const HostLayout> HostLayoutOf(const Group& group);

}  // namespace tfring
