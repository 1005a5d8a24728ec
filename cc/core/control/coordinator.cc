#include "control/coordinator.h"

#include <algorithm>
#include <cstring>
#include <sstream>

namespace tfring {
namespace {

std::string ShapeString(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << "]";
  return os.str();
}

std::string RanksString(const std::vector<int>& ranks) {
  std::ostringstream os;
  for (size_t i = 0; i < ranks.size(); ++i) os << (i ? ", " : "") << ranks[i];
  return os.str();
}

// Compares one attribute across the ranks that submitted the tensor (`present`: all but
// ranks that joined without it); returns an error message for the first disagreement.
template <typename T, typename Fmt>
std::string Disagreement(const std::string& name, const char* what, const std::vector<Request>& reqs,
                         const std::vector<bool>& present, T (*get)(const Request&), Fmt fmt) {
  const size_t ref = static_cast<size_t>(std::find(present.begin(), present.end(), true) - present.begin());
  for (size_t r = ref + 1; r < reqs.size(); ++r) {
    if (present[r] && !(get(reqs[r]) == get(reqs[ref]))) {
      std::ostringstream os;
      os << "tensor '" << name << "': ranks disagree on " << what << ": rank " << ref << " has "
         << fmt(get(reqs[ref])) << ", rank " << r << " has " << fmt(get(reqs[r]))
         << ". Every rank must submit the same collective under the same name.";
      return os.str();
    }
  }
  return "";
}

}  // namespace

void Coordinator::Add(int rank, const Request& request, Clock::time_point now) {
  // A set's tensors are keyed apart: disjoint sets may use the same names at once. The
  // global set's key is the name itself (no copy).
  std::string set_key;
  if (request.attrs.process_set_id != 0) set_key = request.name + '\0' + std::to_string(request.attrs.process_set_id);
  const std::string& key = request.attrs.process_set_id == 0 ? request.name : set_key;
  auto it = pending_.find(key);
  if (it == pending_.end()) {
    Pending p;
    p.by_rank.resize(size_);
    p.submitted.assign(size_, false);
    p.arrived.resize(size_);
    p.first_seen = now;
    p.name = request.name;
    p.set_id = request.attrs.process_set_id;
    if (p.set_id != 0 && (sets_ == nullptr || !sets_->Members(p.set_id, &p.members))) {
      p.set_error = "tensor '" + request.name + "': process set id " + std::to_string(p.set_id) +
                    " is not registered on rank 0; add_process_set() must be called on every rank, "
                    "in the same order";
    }
    it = pending_.emplace(key, std::move(p)).first;
  }
  Pending& p = it->second;
  if (p.set_id != 0 && p.set_error.empty() &&
      !std::binary_search(p.members.begin(), p.members.end(), rank)) {
    p.set_error = "tensor '" + request.name + "': rank " + std::to_string(rank) + " is not a member of process set " +
                  std::to_string(p.set_id) + " " + RanksList(p.members);
  }
  if (p.submitted[rank]) {
    p.duplicate_error = "tensor '" + request.name + "': rank " + std::to_string(rank) +
                        " submitted it twice while the first was still in flight; names of "
                        "in-flight collectives must be unique";
    return;
  }
  p.submitted[rank] = true;
  p.by_rank[rank] = request;
  p.arrived[rank] = now;
  ++p.count;
  if (request.attrs.op == OpType::kJoin && !joined_[rank]) {
    // From now on this rank adds zeros to the others' tensors: some may be complete now.
    joined_[rank] = true;
    ++joined_count_;
    last_joined_ = rank;
    std::vector<std::string> names;
    for (const auto& kv : pending_) names.push_back(kv.first);
    for (const auto& n : names) MaybeReady(pending_.find(n), now);
    return;
  }
  MaybeReady(it, now);
}

bool Coordinator::Complete(const Pending& p) const {
  if (!p.set_error.empty()) return true;  // an error response at once
  if (!p.members.empty()) {
    // Every member submitted it, or a member joined without it (then an error response).
    bool all = true;
    for (int32_t m : p.members) {
      if (!p.submitted[m] && joined_[m]) return true;
      all = all && p.submitted[m];
    }
    return all;
  }
  const bool is_join = std::any_of(p.by_rank.begin(), p.by_rank.end(),
                                   [](const Request& r) { return r.attrs.op == OpType::kJoin; });
  for (int r = 0; r < size_; ++r) {
    if (!p.submitted[r] && (is_join || !joined_[r])) return false;
  }
  return true;
}

void Coordinator::MaybeReady(std::map<std::string, Pending>::iterator it, Clock::time_point now) {
  const Pending& p = it->second;
  if (!Complete(p)) return;
  Response resp = Validate(p.name, p);
  // No cache ids while ranks have joined: a joined rank's missing request is no request to
  // remember, and it must learn every name in full.
  if (resp.kind == Response::Kind::kCollective && joined_count_ == 0 && p.set_id == 0) {
    bool is_new = false;
    resp.tensors[0].cache_id = cache_.Assign(resp.tensors[0].name, p.by_rank, &is_new);
    resp.tensors[0].cache_id_is_new = is_new;
  }
  resp.ready_wait_s.resize(size_);
  for (int r = 0; r < size_; ++r) {
    resp.ready_wait_s[r] =
        p.submitted[r] ? std::max(0.0, std::chrono::duration<double>(now - p.arrived[r]).count()) : 0.0;
  }
  if (resp.attrs.op == OpType::kJoin && resp.kind == Response::Kind::kCollective) {
    // Every rank has joined: the join completes with the last one, and the job is whole again.
    resp.attrs.root = last_joined_;
    joined_.assign(static_cast<size_t>(size_), false);
    joined_count_ = 0;
    last_joined_ = -1;
  }
  ready_.push_back(std::move(resp));
  pending_.erase(it);
}

Status Coordinator::AddCached(int rank, int32_t id, Clock::time_point now) {
  const Request* request = cache_.Expand(id, rank);
  if (request == nullptr) {
    return Status::Internal("rank " + std::to_string(rank) + " sent cache id " + std::to_string(id) +
                            ", which rank 0 never assigned (" + std::to_string(cache_.size()) + " assigned)");
  }
  Add(rank, *request, now);
  return Status::OK();
}

Response Coordinator::Validate(const std::string& name, const Pending& p) const {
  const auto& reqs = p.by_rank;
  const auto& present = p.submitted;  // every rank, but ranks that joined without this tensor
  const Request& first = reqs[static_cast<size_t>(std::find(present.begin(), present.end(), true) - present.begin())];
  Response resp;
  resp.tensors = {Response::Tensor{name}};
  // Errors too carry the process set: a rank completes only its own set's tensor.
  resp.attrs = first.attrs;
  resp.members = p.members;
  auto fail = [&](ErrorCode code, const std::string& message) {
    resp.kind = Response::Kind::kError;
    resp.error_code = code;
    resp.error_message = message;
    return resp;
  };
  if (!p.duplicate_error.empty()) return fail(ErrorCode::kInvalidArgument, p.duplicate_error);
  if (!p.set_error.empty()) return fail(ErrorCode::kInvalidArgument, p.set_error);
  std::string err = JoinedSetMembers(name, p);
  if (!err.empty()) return fail(ErrorCode::kPrecondition, err);
  err = FirstDisagreement(name, reqs, present);
  if (!err.empty()) return fail(ErrorCode::kMismatch, err);
  ErrorCode code = ErrorCode::kOk;
  err = JoinConflict(name, p, first, &code);
  if (!err.empty()) return fail(code, err);
  if (first.attrs.op == OpType::kAllgather && first.shape.empty()) {
    return fail(ErrorCode::kInvalidArgument, "tensor '" + name + "': allgather needs a tensor of rank >= 1");
  }
  FillSizes(p, first, &resp);
  return resp;
}

// A tensor on a process set none of whose members may have joined (join runs on the
// global set only): the message, or "".
std::string Coordinator::JoinedSetMembers(const std::string& name, const Pending& p) const {
  if (p.set_id == 0) return "";
  std::vector<int> joined_members;
  for (int32_t m : p.members) {
    if (joined_[m]) joined_members.push_back(m);
  }
  if (joined_members.empty()) return "";
  return "tensor '" + name + "': rank(s) " + RanksString(joined_members) + " of process set " +
         std::to_string(p.set_id) + " " + RanksList(p.members) +
         " have joined; join (hvd.join()) is supported on the global process set only";
}

// The first attribute the submitting ranks disagree on, as the error every rank gets ("":
// they agree): operation, dtype, host or GPU, the reduction and its scale factors, the
// root, the shape (after the first dimension for allgather and alltoall).
std::string Coordinator::FirstDisagreement(const std::string& name, const std::vector<Request>& reqs,
                                           const std::vector<bool>& present) {
  const size_t ref = static_cast<size_t>(std::find(present.begin(), present.end(), true) - present.begin());
  const Request& first = reqs[ref];
  auto op_name = [](OpType o) { return std::string(OpTypeName(o)); };
  auto dtype_name = [](DataType d) { return std::string(DataTypeName(d)); };
  auto reduce_name = [](ReduceOp o) { return std::string(ReduceOpName(o)); };
  auto num = [](auto v) { std::ostringstream os; os << v; return os.str(); };
  auto device_name = [](int32_t d) { return d < 0 ? std::string("CPU") : "GPU:" + std::to_string(d); };
  std::string err = Disagreement(name, "the operation", reqs, present, +[](const Request& r) { return r.attrs.op; }, op_name);
  if (err.empty()) err = Disagreement(name, "the dtype", reqs, present, +[](const Request& r) { return r.attrs.dtype; }, dtype_name);
  // Host memory or GPU must agree; GPU ordinals may differ (each rank drives its own GPU;
  // the response carries rank 0's as the label of the communicator every rank uses).
  for (size_t r = ref + 1; err.empty() && r < reqs.size(); ++r) {
    if (present[r] && (reqs[r].attrs.device >= 0) != (first.attrs.device >= 0)) {
      err = "tensor '" + name + "': ranks disagree on the device: rank " + std::to_string(ref) + " has " +
            device_name(first.attrs.device) + ", rank " + std::to_string(r) + " has " + device_name(reqs[r].attrs.device) +
            ". Every rank must submit the same collective under the same name.";
    }
  }
  if (err.empty() && (first.attrs.op == OpType::kAllreduce || first.attrs.op == OpType::kReducescatter)) {
    err = Disagreement(name, "the reduce op", reqs, present, +[](const Request& r) { return r.attrs.reduce_op; }, reduce_name);
    if (err.empty()) err = Disagreement(name, "prescale_factor", reqs, present, +[](const Request& r) { return r.attrs.prescale; }, num);
    if (err.empty()) err = Disagreement(name, "postscale_factor", reqs, present, +[](const Request& r) { return r.attrs.postscale; }, num);
  }
  if (err.empty() && first.attrs.op == OpType::kBroadcast) {
    err = Disagreement(name, "the root rank", reqs, present, +[](const Request& r) { return r.attrs.root; }, num);
  }
  if (!err.empty()) return err;
  if (first.attrs.op == OpType::kAllgather || first.attrs.op == OpType::kAlltoall) {
    // first dimension may differ; the rest must agree
    auto tail = +[](const Request& r) {
      return r.shape.empty() ? std::vector<int64_t>{-1} : std::vector<int64_t>(r.shape.begin() + 1, r.shape.end());
    };
    return Disagreement(name, "the shape after the first dimension", reqs, present, tail, ShapeString);
  }
  if (first.attrs.op != OpType::kBarrier) {
    return Disagreement(name, "the shape", reqs, present, +[](const Request& r) { return r.shape; }, ShapeString);
  }
  return "";
}

// Ranks of the global set that joined without this tensor add zeros to host allreduces
// and take part in barriers; anything else cannot run (the message and its code, or "").
std::string Coordinator::JoinConflict(const std::string& name, const Pending& p, const Request& first,
                                      ErrorCode* code) const {
  std::vector<int> absent;
  for (int r = 0; r < size_ && p.set_id == 0; ++r) {
    if (!p.submitted[r]) absent.push_back(r);
  }
  if (absent.empty()) return "";
  if (first.attrs.op != OpType::kAllreduce && first.attrs.op != OpType::kBarrier) {
    *code = ErrorCode::kPrecondition;
    return "tensor '" + name + "': " + OpTypeName(first.attrs.op) + " cannot run while rank(s) " + RanksString(absent) +
           " have joined (hvd.join(): a joined rank has no more data and adds zeros to allreduces only); "
           "run it on every rank before they join";
  }
  if (first.attrs.device >= 0) {
    *code = ErrorCode::kUnimplemented;
    return "tensor '" + name + "': a GPU allreduce while rank(s) " + RanksString(absent) +
           " have joined is not supported; join with CPU tensors, or give every rank the same number of steps";
  }
  return "";
}

// Response::sizes (messages.h): an allreduce's bytes, every member's first dimension for
// an allgather, every member's splits for an alltoall.
void Coordinator::FillSizes(const Pending& p, const Request& first, Response* resp) {
  const auto& reqs = p.by_rank;
  if (first.attrs.op == OpType::kAllreduce) {
    resp->sizes = {first.NumElements() * static_cast<int64_t>(DataTypeSize(first.attrs.dtype))};
  } else if (first.attrs.op == OpType::kAllgather) {
    for (size_t r = 0; r < reqs.size(); ++r) {
      if (p.set_id == 0 || p.submitted[r]) resp->sizes.push_back(reqs[r].shape[0]);  // set members only
    }
  } else if (first.attrs.op == OpType::kAlltoall) {
    for (size_t r = 0; r < reqs.size(); ++r) {
      if (p.set_id != 0 && !p.submitted[r]) continue;
      for (int64_t s : reqs[r].splits) resp->sizes.push_back(s);
    }
  }
}

namespace {

// What allreduces must share to travel in one fused response: the response carries one set
// of attributes for all its tensors. Compared exactly (the scale factors bit for bit): two
// factors that print alike are still different factors.
struct FusionKey {
  DataType dtype;
  ReduceOp reduce_op;
  double prescale, postscale;
  int32_t device, process_set_id;

  explicit FusionKey(const CollectiveAttrs& a)
      : dtype(a.dtype), reduce_op(a.reduce_op), prescale(a.prescale), postscale(a.postscale),
        device(a.device), process_set_id(a.process_set_id) {}
  bool operator==(const FusionKey& o) const {
    return dtype == o.dtype && reduce_op == o.reduce_op && std::memcmp(&prescale, &o.prescale, sizeof prescale) == 0 &&
           std::memcmp(&postscale, &o.postscale, sizeof postscale) == 0 && device == o.device &&
           process_set_id == o.process_set_id;
  }
};

// A fused response still open to more tensors in this batch: its key, its index in the
// batch, the bytes it holds.
struct OpenFusion {
  FusionKey key;
  size_t index;
  int64_t bytes;
};

}  // namespace

// Per call on rank 0's background thread: no formatting, no map; the open responses of a
// batch are few (one per distinct key), so a linear search.
std::vector<Response> Coordinator::TakeReady() {
  std::vector<Response> out;
  out.reserve(ready_.size());
  std::vector<OpenFusion> open;
  for (auto& r : ready_) {
    bool fusible = r.kind == Response::Kind::kCollective && r.attrs.op == OpType::kAllreduce &&
                   fusion_threshold_ > 0;
    if (!fusible) {
      out.push_back(std::move(r));
      continue;
    }
    // Fused tensors need the byte size, which only the request knew; carry it in sizes.
    int64_t bytes = r.sizes.empty() ? 0 : r.sizes[0];
    const FusionKey key(r.attrs);
    auto it = std::find_if(open.begin(), open.end(), [&](const OpenFusion& f) { return f.key == key; });
    if (it != open.end() && it->bytes + bytes <= fusion_threshold_) {
      Response& target = out[it->index];
      target.tensors.push_back(std::move(r.tensors[0]));
      target.sizes.push_back(bytes);
      for (size_t i = 0; i < target.ready_wait_s.size() && i < r.ready_wait_s.size(); ++i) {
        target.ready_wait_s[i] += r.ready_wait_s[i];
      }
      it->bytes += bytes;
      continue;
    }
    // Later tensors of this key fuse into the newest response of it.
    if (it != open.end()) {
      it->index = out.size();
      it->bytes = bytes;
    } else {
      open.push_back(OpenFusion{key, out.size(), bytes});
    }
    out.push_back(std::move(r));
  }
  ready_.clear();
  return out;
}

std::vector<StalledTensor> Coordinator::Stalled(double min_wait_s, Clock::time_point now) const {
  std::vector<StalledTensor> out;
  for (const auto& kv : pending_) {
    double waited = std::chrono::duration<double>(now - kv.second.first_seen).count();
    if (waited < min_wait_s) continue;
    const auto& reqs = kv.second.by_rank;
    if (std::any_of(reqs.begin(), reqs.end(), [](const Request& r) { return r.attrs.op == OpType::kJoin; })) {
      continue;  // a join waits for the ranks that still have data: that is no stall
    }
    StalledTensor s;
    s.name = kv.second.name;
    if (kv.second.set_id != 0) s.name += " (process set " + std::to_string(kv.second.set_id) + ")";
    s.waited_s = waited;
    const auto& members = kv.second.members;  // a process set: its missing members only
    for (int r = 0; r < size_; ++r) {
      if (!members.empty() && !std::binary_search(members.begin(), members.end(), r)) continue;
      (kv.second.submitted[r] ? s.submitted_ranks : s.missing_ranks).push_back(r);
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string DescribeStall(const StalledTensor& s) {
  return "'" + s.name + "' waited " + std::to_string(static_cast<int>(s.waited_s)) +
         " s: submitted by rank(s) " + RanksString(s.submitted_ranks) + ", missing from rank(s) " +
         RanksString(s.missing_ranks);
}

}  // namespace tfring
