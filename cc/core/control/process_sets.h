// ProcessSetTable: the process sets (Horovod's hvd.ProcessSet) known to one runtime.
//
// A process set is a sorted list of distinct global ranks under an integer id; id 0 is the
// global set (every rank) and is never stored. Collectives name their set by
// Request::process_set_id; only the members submit them, and they run on a Group of the
// members' links (communicator.h). Registration is collective at the Python level
// (tfring/_basics/process_sets.py: every rank registers the same set under the same id and then
// meets at a global barrier), so the table is identical on every rank before any
// collective uses a new id.
// Thread-safety: every method takes the table's own mutex; user threads register, the
// enqueue path and rank 0's coordinator look up. Lookups happen only for ids != 0: the
// global set's path costs an integer compare.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"

namespace tfring {

class ProcessSetTable {
 public:
  // kInvalidArgument for id <= 0, an id in use, an empty list, a rank outside
  // [0, world_size), or a repeated rank. `ranks` need not be sorted (it is stored sorted).
  Status Add(int32_t id, std::vector<int32_t> ranks, int world_size);
  // kInvalidArgument for id 0 or an unknown id.
  Status Remove(int32_t id);
  // The members of `id` (sorted global ranks); false for an unknown id. id 0 is not stored:
  // callers treat it as "every rank" before calling.
  bool Members(int32_t id, std::vector<int32_t>* ranks) const;
  std::vector<int32_t> Ids() const;  // registered ids, increasing (0 not included)
  void Clear();

 private:
  mutable std::mutex mu_;
  std::map<int32_t, std::vector<int32_t>> sets_;
};

// "[0, 2]" for messages.
std::string RanksList(const std::vector<int32_t>& ranks);

}  // namespace tfring
