// ShmPairing (shm_pairing.h): one local pair's rings and single-copy facts over its data
// connection. Messages (length-prefixed, mesh::kHelloTimeoutS each):
//   D -> A  offer:  "" (no rings) or "<token>;<D takes part: 0|1>;<D requires: 0|1>"
//   A -> D  answer: "0" (A could not open them), "E<why>" (required single-copy refused),
//                   or "1<A reads D: 1|0, '-' not a single-copy pair>"
//   D -> A  (single-copy pairs only) "1" / "0": D reads A, or "E<why>"
#include "transport/shm_pairing.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "base/logging.h"
#include "transport/cma.h"
#include "transport/mesh_hello.h"
#include "transport/shm_setup.h"

namespace tfring {

namespace {

Deadline Step() { return Deadline::After(mesh::kHelloTimeoutS); }

}  // namespace

ShmPairing::ShmPairing(const CommunicatorOptions& options, const RosterFacts& facts, const PeerCard& mine)
    : opt_(options), facts_(facts), mine_(mine), takes_part_(TakesPartInSingleCopy(mine, facts)) {}

bool ShmPairing::Applies(int peer) const {
  return opt_.shm && peer != opt_.rank && facts_.host_ids[static_cast<size_t>(peer)] == opt_.host_id;
}

std::string ShmPairing::RingName(const std::string& token, int from, int to) const {
  return "/tfring-" + token + "-" + std::to_string(from) + "to" + std::to_string(to);
}

std::string ShmPairing::RequiredButRefused(int peer, bool peer_cma, bool peer_requires) const {
  PeerCard theirs;
  theirs.shm_cma = peer_cma;
  theirs.shm_cma_required = peer_requires;
  const bool peer_takes_part = TakesPartInSingleCopy(theirs, facts_);
  const std::string me = std::to_string(opt_.rank), them = std::to_string(peer);
  auto refusal = [&](const std::string& requirer, const std::string& refuser, bool refuser_cma) {
    if (refuser_cma) {
      return "TFRING_SHM_CMA=1 on rank " + requirer + " but rank " + refuser + " has TFRING_SHM_CMA=auto, which "
             "reads single-copy only where every rank has a CPU of its own, and " +
             std::to_string(facts_.machine_ranks) + " ranks share " + std::to_string(facts_.usable_cpus()) +
             " CPUs on this machine: set TFRING_SHM_CMA=1 on every rank, or auto or 0 on rank " + requirer;
    }
    return "TFRING_SHM_CMA=1 on rank " + requirer + " but rank " + refuser + " runs with single-copy reads off "
           "(TFRING_SHM_CMA=0 there), so it cannot read rank " + requirer + "'s memory: set TFRING_SHM_CMA=auto "
           "or 0, or the same on every rank";
  };
  if (mine_.shm_cma_required && !peer_takes_part) return refusal(me, them, peer_cma);
  if (peer_requires && !takes_part_) return refusal(them, me, mine_.shm_cma);
  return "";
}

// Why this rank cannot read `peer`'s memory where a pair requires it.
static std::string CannotRead(int reader, int writer, int err) {
  return "TFRING_SHM_CMA=1 but rank " + std::to_string(reader) + " cannot read rank " + std::to_string(writer) +
         "'s memory with process_vm_readv (" + CmaErrorText(err) + "; ptrace restrictions such as Yama "
         "ptrace_scope or a container without CAP_SYS_PTRACE): set TFRING_SHM_CMA=auto or 0";
}

Status ShmPairing::Offer(int peer, ParkedConnection* out) const {
  Socket& s = out->socket;
  const int rank = opt_.rank;
  Status made = ShmRing::Create(RingName(mine_.shm_token, peer, rank), opt_.shm_ring_bytes, &out->rx);
  if (made.ok()) made = ShmRing::Create(RingName(mine_.shm_token, rank, peer), opt_.shm_ring_bytes, &out->tx);
  if (!made.ok()) {
    TFRING_LOG(LogLevel::kWarning, "transport", "no shared-memory rings with rank " << peer << " (" << made.message()
                   << "): its data goes over TCP");
    out->rx.reset();
    out->tx.reset();
    return s.SendMessage("", Step());
  }
  if (takes_part_) out->tx->PublishWriter();  // before the offer: the peer probes after
  std::string answer;
  Status st = s.SendMessage(mine_.shm_token + ";" + (takes_part_ ? "1" : "0") + ";" +
                                (mine_.shm_cma_required ? "1" : "0"), Step());
  if (st.ok()) st = s.RecvMessage(&answer, 1 << 12, Step());
  out->rx->Unlink();  // the peer unlinked them once open; these are for an answer that never came
  out->tx->Unlink();
  if (!st.ok()) return st;
  if (!answer.empty() && answer[0] == 'E') return Status::Unimplemented(answer.substr(1));
  if (answer.size() < 2 || answer[0] != '1') {
    out->rx.reset();
    out->tx.reset();
    return Status::OK();  // the peer could not open them: TCP both ways
  }
  if (answer[1] == '-') return Status::OK();  // rings, no single-copy reads
  if (answer[1] == '1') out->post_sends_from = std::max<size_t>(opt_.cma_min_bytes, 1);
  const int err = out->rx->ProbeWriter(&out->read_posts_of);
  const bool required = opt_.cma == CmaMode::kOn || answer.size() > 2;  // the peer's "required" echo
  if (err != 0) {
    out->read_posts_of = 0;
    TFRING_LOG(LogLevel::kDebug, "transport", "single-copy reads from rank " << peer << " unavailable ("
                   << CmaErrorText(err) << "): its data comes through the shared-memory ring");
    if (required) {
      const std::string why = CannotRead(rank, peer, err);
      (void)s.SendMessage("E" + why, Step());
      return Status::Unimplemented(why);
    }
  }
  return s.SendMessage(err == 0 ? "1" : "0", Step());
}

Status ShmPairing::Answer(int peer, ParkedConnection* c) const {
  Socket& s = c->socket;
  const int rank = opt_.rank;
  std::string offer;
  TFRING_RETURN_IF_ERROR(s.RecvMessage(&offer, 1 << 12, Step()));
  if (offer.empty()) return Status::OK();  // the dialler made no rings: TCP
  const size_t a = offer.find(';'), b = offer.find(';', a == std::string::npos ? a : a + 1);
  if (a == std::string::npos || b == std::string::npos || b + 1 >= offer.size()) {
    return Status::InvalidArgument("rank " + std::to_string(peer) + " sent a malformed shared-memory offer");
  }
  const std::string token = offer.substr(0, a);
  const bool peer_cma = offer[a + 1] == '1', peer_requires = offer[b + 1] == '1';
  const std::string from_peer = RingName(token, peer, rank), to_peer = RingName(token, rank, peer);
  Status opened = ShmRing::Open(from_peer, &c->rx);
  if (opened.ok()) opened = ShmRing::Open(to_peer, &c->tx);
  shm_unlink(from_peer.c_str());  // both ends hold them now (or never will): nothing stays in /dev/shm
  shm_unlink(to_peer.c_str());
  if (!opened.ok()) {
    TFRING_LOG(LogLevel::kWarning, "transport", "could not open rank " << peer << "'s shared-memory rings ("
                   << opened.message() << "): its data goes over TCP");
    c->rx.reset();
    c->tx.reset();
    return s.SendMessage("0", Step());
  }
  const std::string refused = RequiredButRefused(peer, peer_cma, peer_requires);
  if (!refused.empty()) {
    (void)s.SendMessage("E" + refused, Step());
    return Status::Unimplemented(refused);
  }
  PeerCard theirs;
  theirs.shm_cma = peer_cma;
  theirs.shm_cma_required = peer_requires;
  if (!takes_part_ || !TakesPartInSingleCopy(theirs, facts_)) return s.SendMessage("1-", Step());
  c->tx->PublishWriter();  // before the answer: the dialler probes after
  const int err = c->rx->ProbeWriter(&c->read_posts_of);
  const bool required = opt_.cma == CmaMode::kOn || peer_requires;
  if (err != 0) {
    c->read_posts_of = 0;
    if (required) {
      const std::string why = CannotRead(rank, peer, err);
      (void)s.SendMessage("E" + why, Step());
      return Status::Unimplemented(why);
    }
  }
  TFRING_RETURN_IF_ERROR(s.SendMessage(std::string("1") + (err == 0 ? "1" : "0") + (required ? "R" : ""), Step()));
  std::string reads;
  TFRING_RETURN_IF_ERROR(s.RecvMessage(&reads, 1 << 12, Step()));
  if (!reads.empty() && reads[0] == 'E') return Status::Unimplemented(reads.substr(1));
  if (reads == "1") c->post_sends_from = std::max<size_t>(opt_.cma_min_bytes, 1);
  return Status::OK();
}

}  // namespace tfring
