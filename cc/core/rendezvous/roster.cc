#include "rendezvous/roster.h"

#include "base/wire.h"

namespace tfring {
namespace {

constexpr uint8_t kRosterOk = 1;
constexpr uint8_t kRosterFailed = 2;  // rank 0 could not gather it: a message follows
constexpr size_t kMaxMissingNamed = 16;
// The others wait this much longer than their own deadline for rank 0's roster, so that a
// rank missing at rank 0's deadline (which is theirs too) reaches them as rank 0's verdict
// naming it, not as a bare timeout of their own.
constexpr double kVerdictGraceS = 2.0;

std::string EntryKey(int rank) { return "roster/" + std::to_string(rank); }

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

std::string EncodeRoster(const std::vector<RosterEntry>& all) {
  WireWriter w;
  w.U8(kRosterOk);
  w.U32(static_cast<uint32_t>(all.size()));
  for (const auto& e : all) w.Str(e.Encode());
  return w.Take();
}

Status DecodeRoster(const std::string& bytes, int size, std::vector<RosterEntry>* all) {
  WireReader r(bytes);
  const uint8_t kind = r.U8();
  if (kind == kRosterFailed) {
    const std::string why = r.Str();
    return Status::Timeout("rank 0 could not gather the job's roster: " + why);
  }
  const uint32_t n = r.U32();
  if (!r.ok() || kind != kRosterOk || n != static_cast<uint32_t>(size)) {
    return Status::Internal("rank 0 published a malformed roster (a different tfring version?)");
  }
  all->assign(n, RosterEntry{});
  for (auto& e : *all) {
    if (!RosterEntry::Decode(r.Str(), &e)) {
      return Status::Internal("rank 0 published a malformed roster (a different tfring version?)");
    }
  }
  return Status::OK();
}

// Every rank checks every entry, so every rank fails alike, at once.
Status CheckSharedSettings(const std::vector<RosterEntry>& all) {
  for (size_t p = 1; p < all.size(); ++p) {
    if (all[p].must_match == all[0].must_match) continue;
    return Status::InvalidArgument("settings that every rank must share differ: rank " + std::to_string(p) +
                                   " has '" + all[p].must_match + "', rank 0 has '" + all[0].must_match +
                                   "'; set them alike on every rank (or leave them unset)");
  }
  return Status::OK();
}

}  // namespace

std::string RosterEntry::Encode() const {
  WireWriter w;
  w.Str(address);
  w.Str(host_id);
  w.Str(hostname);
  w.Str(must_match);
  w.U32(static_cast<uint32_t>(cpus.size()));
  for (int cpu : cpus) w.I32(cpu);
  w.Str(shm_token);
  w.U8(shm_cma ? (shm_cma_required ? 2 : 1) : 0);
  return w.Take();
}

bool RosterEntry::Decode(const std::string& bytes, RosterEntry* out) {
  WireReader r(bytes);
  out->address = r.Str();
  out->host_id = r.Str();
  out->hostname = r.Str();
  out->must_match = r.Str();
  const uint32_t n = r.U32();
  if (!r.ok() || n > bytes.size() / 4) return false;
  out->cpus.resize(n);
  for (auto& cpu : out->cpus) cpu = r.I32();
  out->shm_token = r.Str();
  const uint8_t cma = r.U8();
  out->shm_cma = cma >= 1;
  out->shm_cma_required = cma == 2;
  return r.ok() && r.AtEnd() && cma <= 2;
}

Status ExchangeRoster(int rank, int size, const RosterEntry& mine, Store& store, Deadline deadline,
                      std::vector<RosterEntry>* all) {
  if (rank == 0) {
    Status st = Gather(size, mine, store, deadline, all);
    if (!st.ok()) {
      WireWriter w;  // the others fail at once with the same cause instead of timing out
      w.U8(kRosterFailed);
      w.Str(st.message());
      (void)store.Set("roster", w.Take());
      return st;
    }
    TFRING_RETURN_IF_ERROR(store.Set("roster", EncodeRoster(*all)));
  } else {
    TFRING_RETURN_IF_ERROR(store.Set(EntryKey(rank), mine.Encode()));
    std::string bytes;
    TFRING_RETURN_IF_ERROR(store.Get("roster", deadline.SecondsLeft() + kVerdictGraceS, &bytes)
                               .WithContext("rank " + std::to_string(rank) +
                                            " waiting for rank 0 to gather every rank's address "
                                            "(rank 0 never started? TFRING_START_TIMEOUT_S)"));
    TFRING_RETURN_IF_ERROR(DecodeRoster(bytes, size, all));
  }
  return CheckSharedSettings(*all);
}

}  // namespace tfring
