// SharedMemorySetup (shm_setup.h): data rings between the ranks of one host, control rings
// between control-tree neighbours there, and single-copy reads (cma.h) where TFRING_SHM_CMA
// allows them.
#include "transport/shm_setup.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string>

#include "base/logging.h"
#include "transport/cma.h"

namespace tfring {

namespace {

// Control messages are a few hundred bytes in steady state; a larger one (a first step's
// requests for thousands of tensors) takes the TCP connection instead (control_channel.h).
constexpr size_t kControlRingBytes = 256 << 10;

// One shared-memory ring pair with a local peer: this rank receives on `rx` (it creates it)
// and sends on `tx` (the peer created it).
struct RingSlot {
  int peer;
  bool control;  // a control ring (else data); its names and keys start with "c"
  std::unique_ptr<ShmRing>* rx;
  std::unique_ptr<ShmRing>* tx;
  size_t bytes;
};

// Each receiver creates its rings; each sender opens them and says so; the receiver then
// unlinks the names (nothing stays in /dev/shm after a crash). The receiver r of ring
// "from p to r" names it after its own card's token, so p knows the name; every rank says
// once that all its rings exist, then once that it opened its peers' (4 store requests).
// With single-copy reads (`cma`), each data ring's writer publishes its pid before
// "opened": the peer probes after. Blocking, bounded by `deadline`.
Status CreateAndOpenRings(const std::vector<RingSlot>& rings, const std::vector<int>& local,
                          const std::map<int, PeerCard>& cards, int rank, bool cma, Store& store,
                          Deadline deadline) {
  auto ring_name = [&](const RingSlot& r, int from, int to) {
    return "/tfring-" + cards.at(to).shm_token + "-" + (r.control ? "c" : "") +
           std::to_string(from) + "to" + std::to_string(to);
  };
  auto all_local = [&](const char* what) {
    std::vector<std::string> keys;
    for (int p : local) keys.push_back(std::string("shm/") + what + "/" + std::to_string(p));
    return keys;
  };
  const std::string me = std::to_string(rank);
  for (const RingSlot& r : rings) TFRING_RETURN_IF_ERROR(ShmRing::Create(ring_name(r, r.peer, rank), r.bytes, r.rx));
  TFRING_RETURN_IF_ERROR(store.Set("shm/created/" + me, "1"));
  TFRING_RETURN_IF_ERROR(store.Wait(all_local("created"), deadline.SecondsLeft())
                             .WithContext("rank " + me + " waiting for its host's ranks to create their "
                                          "shared-memory rings"));
  for (const RingSlot& r : rings) {
    TFRING_RETURN_IF_ERROR(ShmRing::Open(ring_name(r, rank, r.peer), r.tx));
    if (cma && !r.control) (*r.tx)->PublishWriter();  // before "opened": the peer probes after
  }
  TFRING_RETURN_IF_ERROR(store.Set("shm/opened/" + me, "1"));
  TFRING_RETURN_IF_ERROR(store.Wait(all_local("opened"), deadline.SecondsLeft())
                             .WithContext("rank " + me + " waiting for its host's ranks to open its "
                                          "shared-memory rings"));
  for (const RingSlot& r : rings) (*r.rx)->Unlink();
  return Status::OK();
}

}  // namespace

// Whether a rank whose card is `e` reads single-copy: TFRING_SHM_CMA=1 always (if
// the kernel lets it), auto only where every rank on the machine has a CPU of its own. A
// single-copy read is one copy by the receiver while the sender waits; the ring splits the
// two copies between both ranks' CPUs. With a CPU each, single-copy is faster end to end
// (np=2, 2 CPUs, 16 MiB: NumPy 8.7 against 5.9 GB/s, tf.function 6.6 against 5.3; 2-64 MiB
// never slower); with 3 ranks on 2 CPUs it was 12% slower at 4 and 16 MiB (docs/core.md).
// Every rank computes this for every local peer from its card and the layout, so the pairs agree
// without asking the store (the machine's counts are the same on each of its ranks).
bool TakesPartInSingleCopy(const PeerCard& e, const RosterFacts& facts) {
  return e.shm_cma && (e.shm_cma_required || !facts.Outnumbered(facts.machine_ranks));
}

SharedMemorySetup::SharedMemorySetup(const CommunicatorOptions& options, const ControlTree& tree,
                                     const RosterFacts& facts, PeerDirectory& directory)
    : opt_(options), tree_(tree), facts_(facts), directory_(directory) {}

// Every rank creates one incoming ring per peer on its host and publishes its name; then
// opens the peers' rings for its outgoing side (recording its pid for single-copy reads)
// and acknowledges; once every incoming ring is acknowledged, it unlinks the names (nothing
// is left in /dev/shm, even after a crash). Single-copy (TFRING_SHM_CMA): the local peers
// whose cards mark them as taking part (PeerCard::shm_cma) probe whether they can read each
// other's memory and publish the answer; a writer posts large sends only where the answer
// is yes.
//
// Store requests per rank with local peers: 4 (two "done" keys, two waits), whatever the
// number of local peers (with TFRING_SHM_CMA, 2 more per local peer), and a read of each
// local peer's card not read yet: ring names come from the cards' shm tokens. A peer that never gets there is named by the wait's timeout.
Status SharedMemorySetup::Run(Store& store, Deadline deadline, Result* out) {
  const CommunicatorOptions& opt = opt_;
  const int rank = opt.rank, size = opt.size;
  const size_t n = static_cast<size_t>(size);
  out->data.resize(n);
  out->control.resize(n);
  out->read_posts_of.assign(n, 0);
  out->post_sends_from.assign(n, SIZE_MAX);
  std::vector<int> local;
  for (int p = 0; p < size; ++p) {
    if (p != rank && facts_.host_ids[p] == opt.host_id) local.push_back(p);
  }
  const bool cma = opt.cma == CmaMode::kOn || (opt.cma == CmaMode::kAuto && !facts_.Outnumbered(facts_.machine_ranks));
  if (cma && !local.empty()) AllowCmaReaders();
  if (opt.cma == CmaMode::kAuto && !cma && !local.empty()) {
    TFRING_LOG(LogLevel::kDebug, "transport", facts_.machine_ranks << " ranks share " << facts_.usable_cpus()
                   << " CPUs: no single-copy reads (TFRING_SHM_CMA=auto), the rings carry every send");
  }
  // Data rings with every local peer (lazily: none here, shm_pairing.h); control rings
  // with control-tree neighbours only.
  std::vector<RingSlot> rings;
  std::vector<int> ring_peers;  // the local peers this rank shares a ring with, ascending
  for (int p : local) {
    if (!opt.lazy_data) rings.push_back(RingSlot{p, false, &out->data[p].rx, &out->data[p].tx, opt.shm_ring_bytes});
    if (opt.shm_control && tree_.IsNeighbour(p)) {
      rings.push_back(RingSlot{p, true, &out->control[p].rx, &out->control[p].tx, kControlRingBytes});
    }
    if (!rings.empty() && rings.back().peer == p) ring_peers.push_back(p);
  }
  if (rings.empty()) return Status::OK();
  std::map<int, PeerCard>& cards = local_cards_;
  for (int p : ring_peers) TFRING_RETURN_IF_ERROR(directory_.Card(p, deadline, &cards[p]));
  cards[rank] = PeerCard{};
  TFRING_RETURN_IF_ERROR(directory_.Card(rank, deadline, &cards[rank]));
  TFRING_RETURN_IF_ERROR(CreateAndOpenRings(rings, ring_peers, cards, rank, cma, store, deadline));
  if (!cma || opt.lazy_data) return Status::OK();  // no single-copy reads here
  return ExchangeCmaReadability(local, store, deadline, out);
}

// Readability is exchanged only with local peers that take part too (their cards say
// which); a pair with a rank that has single-copy off uses the rings both ways. Each reader
// probes its writers and publishes the answer (2 store requests per such peer); a writer
// posts large sends only where the answer is yes. With CmaMode::kOn, a pair that cannot
// read fails naming both ranks and the setting.
Status SharedMemorySetup::ExchangeCmaReadability(const std::vector<int>& local, Store& store, Deadline deadline,
                                                Result* out) {
  const CommunicatorOptions& opt = opt_;
  const int rank = opt.rank;
  auto key = [](int from, int to) { return "shm/" + std::to_string(from) + "to" + std::to_string(to); };
  std::vector<int> cma_local;
  Status required;  // CmaMode::kOn and a pair that cannot use it
  for (int p : local) {
    const PeerCard& peer = local_cards_.at(p);
    if (TakesPartInSingleCopy(peer, facts_)) {
      cma_local.push_back(p);
    } else if (peer.shm_cma && opt.cma == CmaMode::kOn && required.ok()) {
      required = Status::Unimplemented(
          "TFRING_SHM_CMA=1 but rank " + std::to_string(p) + " has TFRING_SHM_CMA=auto, which reads "
          "single-copy only where every rank has a CPU of its own, and " + std::to_string(facts_.machine_ranks) +
          " ranks share " + std::to_string(facts_.usable_cpus()) + " CPUs on this machine: set "
          "TFRING_SHM_CMA=1 on every rank, or auto or 0 here");
    } else if (opt.cma == CmaMode::kOn && required.ok()) {
      required = Status::Unimplemented("TFRING_SHM_CMA=1 but rank " + std::to_string(p) +
                                       " runs with single-copy reads off (TFRING_SHM_CMA=0 there), so it "
                                       "cannot read rank " + std::to_string(rank) +
                                       "'s memory: set TFRING_SHM_CMA=auto or 0, or the same on every rank");
    }
  }
  for (int p : cma_local) {
    const int err = out->data[p].rx->ProbeWriter(&out->read_posts_of[p]);
    if (err != 0) {
      TFRING_LOG(LogLevel::kDebug, "transport", "single-copy reads from rank " << p << " unavailable ("
                     << CmaErrorText(err) << "): its data comes through the shared-memory ring");
      if (opt.cma == CmaMode::kOn && required.ok()) {
        required = Status::Unimplemented(
            "TFRING_SHM_CMA=1 but rank " + std::to_string(rank) + " cannot read rank " +
            std::to_string(p) + "'s memory with process_vm_readv (" + CmaErrorText(err) +
            "; ptrace restrictions such as Yama ptrace_scope or a container without "
            "CAP_SYS_PTRACE): set TFRING_SHM_CMA=auto or 0");
      }
    }
    TFRING_RETURN_IF_ERROR(store.Set(key(p, rank) + "/cma", err == 0 ? "1" : "0"));
  }
  for (int p : cma_local) {
    std::string readable;
    TFRING_RETURN_IF_ERROR(store.Get(key(rank, p) + "/cma", deadline.SecondsLeft(), &readable));
    if (readable == "1") out->post_sends_from[p] = std::max<size_t>(opt.cma_min_bytes, 1);
    if (readable != "1" && opt.cma == CmaMode::kOn && required.ok()) {
      required = Status::Unimplemented("TFRING_SHM_CMA=1 but rank " + std::to_string(p) +
                                       " cannot read rank " + std::to_string(rank) +
                                       "'s memory with process_vm_readv: set TFRING_SHM_CMA=auto or 0");
    }
  }
  const auto readers = std::count_if(out->read_posts_of.begin(), out->read_posts_of.end(), [](pid_t p) { return p > 0; });
  TFRING_LOG(LogLevel::kDebug, "transport", "single-copy reads from " << readers << " of "
                 << local.size() << " local peer(s), for sends of at least " << opt.cma_min_bytes
                 << " bytes");
  return required;
}

}  // namespace tfring
