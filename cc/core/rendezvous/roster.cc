#include "rendezvous/roster.h"

#include "base/wire.h"

namespace tfring {
namespace {

constexpr uint8_t kLayoutOk = 1;
constexpr uint8_t kLayoutFailed = 2;  // rank 0 could not make it: an error code and message follow
constexpr size_t kMaxMissingNamed = 16;
constexpr char kLayoutKey[] = "layout";
// The others wait this much longer than their own deadline for rank 0's layout, so that a
// rank missing at rank 0's deadline (which is theirs too) reaches them as rank 0's verdict
// naming it, not as a bare timeout of their own.
constexpr double kVerdictGraceS = 2.0;

std::string EntryKey(int rank) { return "roster/" + std::to_string(rank); }
std::string CardKey(int rank) { return "peer/" + std::to_string(rank); }

// Rank 0: every entry, in rank order. On a timeout, which ranks never published.
Status Gather(int size, const RosterEntry& mine, Store& store, Deadline deadline, std::vector<RosterEntry>* all) {
  all->assign(static_cast<size_t>(size), RosterEntry{});
  (*all)[0] = mine;
  for (int r = 1; r < size; ++r) {
    std::string bytes;
    Status st = store.Get(EntryKey(r), deadline.SecondsLeft(), &bytes);
    if (st.code() == ErrorCode::kTimeout) {
      std::string missing = std::to_string(r);
      size_t named = 1, unnamed = 0;
      for (int q = r + 1; q < size; ++q) {
        std::string ignored;
        if (store.Get(EntryKey(q), 0, &ignored).ok()) continue;
        if (named++ < kMaxMissingNamed) {
          missing += ", " + std::to_string(q);
        } else {
          ++unnamed;
        }
      }
      if (unnamed > 0) missing += " and " + std::to_string(unnamed) + " more";
      return Status::Timeout("no roster entry from rank(s) " + missing + ": never started or never reached the "
                             "job's store (" + std::to_string(size) + " ranks expected; TFRING_START_TIMEOUT_S)");
    }
    TFRING_RETURN_IF_ERROR(st);
    if (!RosterEntry::Decode(bytes, &(*all)[static_cast<size_t>(r)])) {
      return Status::Internal("rank " + std::to_string(r) + " published a malformed roster entry (a different tfring version?)");
    }
  }
  return Status::OK();
}

// Rank 0 checks every entry once, and tells the others its verdict.
Status CheckSharedSettings(const std::vector<RosterEntry>& all) {
  for (size_t p = 1; p < all.size(); ++p) {
    if (all[p].must_match == all[0].must_match) continue;
    return Status::InvalidArgument("settings that every rank must share differ: rank " + std::to_string(p) +
                                   " has '" + all[p].must_match + "', rank 0 has '" + all[0].must_match +
                                   "'; set them alike on every rank (or leave them unset)");
  }
  return Status::OK();
}

Status RankZeroPublishes(int size, const RosterEntry& mine, Store& store, Deadline deadline, JobLayout* layout) {
  std::vector<RosterEntry> all;
  Status st = Gather(size, mine, store, deadline, &all);
  if (st.ok()) st = CheckSharedSettings(all);
  if (!st.ok()) {
    WireWriter w;  // the others fail at once with the same cause instead of timing out
    w.U8(kLayoutFailed);
    w.U8(static_cast<uint8_t>(st.code()));
    w.Str(st.message());
    (void)store.Set(kLayoutKey, w.Take());
    return st;
  }
  *layout = JobLayout::FromEntries(all);
  WireWriter w;
  w.U8(kLayoutOk);
  w.Str(layout->Encode());
  return store.Set(kLayoutKey, w.Take());
}

Status DecodeLayout(const std::string& bytes, int size, JobLayout* layout) {
  WireReader r(bytes);
  const uint8_t kind = r.U8();
  if (kind == kLayoutFailed) {
    const auto code = static_cast<ErrorCode>(r.U8());
    const std::string why = r.Str();
    if (r.ok() && code != ErrorCode::kOk) return Status(code, "rank 0 could not form the job: " + why);
  }
  if (kind != kLayoutOk || !JobLayout::Decode(r.Str(), size, layout) || !r.ok() || !r.AtEnd()) {
    return Status::Internal("rank 0 published a malformed job layout (a different tfring version?)");
  }
  return Status::OK();
}

}  // namespace

std::string RosterEntry::Encode() const {
  WireWriter w;
  w.Str(host_id);
  w.Str(hostname);
  w.Str(must_match);
  w.U32(static_cast<uint32_t>(cpus.size()));
  for (int cpu : cpus) w.I32(cpu);
  return w.Take();
}

bool RosterEntry::Decode(const std::string& bytes, RosterEntry* out) {
  WireReader r(bytes);
  out->host_id = r.Str();
  out->hostname = r.Str();
  out->must_match = r.Str();
  out->cpus.resize(r.Count(4));
  for (auto& cpu : out->cpus) cpu = r.I32();
  return r.ok() && r.AtEnd();
}

std::string PeerCard::Encode() const {
  WireWriter w;
  w.Str(address);
  w.Str(shm_token);
  w.U8(shm_cma ? (shm_cma_required ? 2 : 1) : 0);
  return w.Take();
}

bool PeerCard::Decode(const std::string& bytes, PeerCard* out) {
  WireReader r(bytes);
  out->address = r.Str();
  out->shm_token = r.Str();
  const uint8_t cma = r.U8();
  out->shm_cma = cma >= 1;
  out->shm_cma_required = cma == 2;
  return r.ok() && r.AtEnd() && cma <= 2;
}

Status ExchangeRoster(int rank, int size, const RosterEntry& entry, const PeerCard& card, Store& store,
                      Deadline deadline, JobLayout* layout) {
  // The card first: once rank 0 has this rank's entry, its card is there for any peer.
  TFRING_RETURN_IF_ERROR(store.Set(CardKey(rank), card.Encode()));
  if (rank == 0) return RankZeroPublishes(size, entry, store, deadline, layout);
  TFRING_RETURN_IF_ERROR(store.Set(EntryKey(rank), entry.Encode()));
  std::string bytes;
  TFRING_RETURN_IF_ERROR(store.Get(kLayoutKey, deadline.SecondsLeft() + kVerdictGraceS, &bytes)
                             .WithContext("rank " + std::to_string(rank) +
                                          " waiting for rank 0 to gather every rank's roster entry "
                                          "(rank 0 never started? TFRING_START_TIMEOUT_S)"));
  return DecodeLayout(bytes, size, layout);
}

Status FetchPeerCard(Store& store, int peer, double timeout_s, PeerCard* out) {
  std::string bytes;
  TFRING_RETURN_IF_ERROR(store.Get(CardKey(peer), timeout_s, &bytes)
                             .WithContext("reading the address of rank " + std::to_string(peer) + " from the job's store"));
  if (!PeerCard::Decode(bytes, out)) {
    return Status::Internal("rank " + std::to_string(peer) + " published a malformed card (a different tfring version?)");
  }
  return Status::OK();
}

}  // namespace tfring
