// Cache ids: how a steady-state training step negotiates in a few bytes per tensor.
//
// A training loop submits the same tensors with the same parameters every step. Without a
// cache every rank sends rank 0 each request in full (name, dtype, shape, ...: ~100 bytes)
// and rank 0 answers with every name. With it:
//   * Rank 0 (CacheAssigner, inside the Coordinator) gives a tensor an id the first time it
//     validates successfully, keeping every rank's request under it, and the response
//     announces the id next to the name.
//   * Every rank (RequestCache), executing that response, remembers its own request under
//     the id. When it later submits a request equal in every field to that one, it sends
//     the id instead: one bit in a bit vector (messages.h).
//   * Rank 0 expands the id back into exactly the request that rank sent, so validation,
//     fusion and error messages are unchanged, and names the tensor by id alone in the
//     response.
// Ids are never reused or changed, so an id in flight always means what its sender meant.
// A tensor whose requests change (another shape, say) gets a new id; once `capacity` ids
// are assigned, new tensors negotiate in full (TFRING_CACHE_CAPACITY; 0 turns caching off).
// Rank 0 holds capacity x world size requests (~150 bytes each).
// Thread-safety: not thread-safe; each lives on the runtime's background thread.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "control/messages.h"
#include "base/status.h"

namespace tfring {

// Every field equal (name and process set included).
bool SameRequest(const Request& a, const Request& b);

// Rank 0's side: which ids exist, and every rank's request under each.
class CacheAssigner {
 public:
  explicit CacheAssigner(size_t capacity) : capacity_(capacity) {}

  // For `name`, validated successfully with `by_rank` (one request per rank): the id to
  // name it by in the response, -1 for none (full name). *is_new: the id was assigned
  // now, so the response must announce it.
  int32_t Assign(const std::string& name, const std::vector<Request>& by_rank, bool* is_new);

  // `rank`'s request under `id`, or null for an id never assigned.
  const Request* Expand(int32_t id, int rank) const;

  size_t size() const { return by_id_.size(); }

 private:
  size_t capacity_;
  std::vector<std::vector<Request>> by_id_;       // id -> request of each rank
  std::unordered_map<std::string, int32_t> newest_;  // name -> its newest id
};

// Every rank's side: its own request under each id it has been told about.
class RequestCache {
 public:
  // The id to send instead of `request`: the newest id announced for its name, when this
  // rank's request under it equals `request` in every field. -1 otherwise.
  int32_t Lookup(const Request& request) const;

  // A response announced `id` for `request.name`. kInternal if the id is already known
  // under another request (rank 0 and this rank disagree: a protocol bug).
  Status Remember(int32_t id, const Request& request);

  // The tensor name under `id`, or null for an id never announced.
  const std::string* NameOf(int32_t id) const;

 private:
  std::vector<Request> by_id_;  // index = id; an empty name marks an id not announced yet
  std::unordered_map<std::string, int32_t> newest_;
};

}  // namespace tfring
