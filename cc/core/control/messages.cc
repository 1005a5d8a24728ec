#include "control/messages.h"

#include <cmath>
#include <sstream>

#include "base/wire.h"
#include "control/tunables.h"

namespace tfring {
namespace {

constexpr uint32_t kMagic = 0x54465243;  // "TFRC"
constexpr size_t kMaxDims = 64;
constexpr size_t kMaxNameBytes = 4096;
constexpr size_t kMaxCacheIdBytes = 1u << 21;  // 16 M ids

// How one name of a response travels.
enum NameForm : uint8_t { kNameOnly = 0, kNameAndNewId = 1, kIdOnly = 2 };

// The attributes every rank agrees on (collective_attrs.h), in requests and responses alike.
void EncodeAttrs(WireWriter& w, const CollectiveAttrs& a) {
  w.U8(static_cast<uint8_t>(a.op));
  w.U8(static_cast<uint8_t>(a.dtype));
  w.U8(static_cast<uint8_t>(a.reduce_op));
  w.I32(a.root);
  w.I32(a.device);
  w.F64(a.prescale);
  w.F64(a.postscale);
  w.I32(a.process_set_id);
}

// False for a value out of its table, a root that is no rank of the job, a scale factor
// that is not finite or a negative process set id.
bool DecodeAttrs(WireReader& rd, int world_size, CollectiveAttrs* a) {
  const int op = rd.U8(), dtype = rd.U8(), reduce = rd.U8();
  a->root = rd.I32();
  a->device = rd.I32();
  a->prescale = rd.F64();
  a->postscale = rd.F64();
  a->process_set_id = rd.I32();
  if (!rd.ok() || !IsValidOpType(op) || !IsValidDataType(dtype) || !IsValidReduceOp(reduce)) return false;
  a->op = static_cast<OpType>(op);
  a->dtype = static_cast<DataType>(dtype);
  a->reduce_op = static_cast<ReduceOp>(reduce);
  return a->root >= 0 && a->root < world_size && std::isfinite(a->prescale) && std::isfinite(a->postscale) &&
         a->process_set_id >= 0;
}

void EncodeRequest(WireWriter& w, const Request& r) {
  w.Str(r.name);
  EncodeAttrs(w, r.attrs);
  w.I64s(r.shape);
  w.I64s(r.splits);
}

void EncodeIdBits(WireWriter& w, const std::vector<int32_t>& ids) {
  std::string bits;
  for (int32_t id : ids) {
    const size_t byte = static_cast<size_t>(id) / 8;
    if (bits.size() <= byte) bits.resize(byte + 1, '\0');
    bits[byte] = static_cast<char>(bits[byte] | (1 << (id % 8)));
  }
  w.Str(bits);
}

bool DecodeIdBits(WireReader& rd, std::vector<int32_t>* ids) {
  const std::string bits = rd.Str();
  ids->clear();
  if (bits.size() > kMaxCacheIdBytes) return false;
  for (size_t byte = 0; byte < bits.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      if (bits[byte] & (1 << bit)) ids->push_back(static_cast<int32_t>(byte * 8 + bit));
    }
  }
  return rd.ok();
}

bool DecodeRequest(WireReader& rd, int world_size, Request* r) {
  r->name = rd.Str();
  const bool attrs_ok = DecodeAttrs(rd, world_size, &r->attrs);
  r->shape = rd.I64s();
  r->splits = rd.I64s();
  if (!rd.ok() || !attrs_ok) return false;
  if (r->name.empty() || r->name.size() > kMaxNameBytes || r->shape.size() > kMaxDims) return false;
  for (int64_t d : r->shape) if (d < 0) return false;
  for (int64_t s : r->splits) if (s < 0) return false;
  return true;
}

void EncodeResponse(WireWriter& w, const Response& r) {
  w.U8(static_cast<uint8_t>(r.kind));
  w.U32(static_cast<uint32_t>(r.tensors.size()));
  for (const auto& t : r.tensors) {
    if (t.cache_id < 0) {
      w.U8(kNameOnly);
      w.Str(t.name);
    } else if (t.cache_id_is_new) {
      w.U8(kNameAndNewId);
      w.I32(t.cache_id);
      w.Str(t.name);
    } else {
      w.U8(kIdOnly);
      w.I32(t.cache_id);
    }
  }
  EncodeAttrs(w, r.attrs);
  w.I64s(r.sizes);
  w.F64s(r.ready_wait_s);
  w.U32(static_cast<uint32_t>(r.members.size()));
  for (int32_t m : r.members) w.I32(m);
  w.U8(static_cast<uint8_t>(r.error_code));
  w.Str(r.error_message);
}

// One tensor of a response: its name, its name and new id, or its id alone (name left empty).
bool DecodeResponseTensor(WireReader& rd, Response::Tensor* t) {
  const int form = rd.U8();
  if (!rd.ok() || form > kIdOnly) return false;
  t->cache_id = -1;
  if (form != kNameOnly) {
    t->cache_id = rd.I32();
    if (t->cache_id < 0) return false;
  }
  t->cache_id_is_new = form == kNameAndNewId;
  t->name.clear();
  if (form != kIdOnly) {
    t->name = rd.Str();
    if (rd.ok() && t->name.empty()) return false;
  }
  return rd.ok();
}

bool DecodeResponse(WireReader& rd, int world_size, Response* r) {
  const int kind = rd.U8();
  const uint32_t n = rd.Count(5);
  if (!rd.ok() || kind > 1 || n == 0) return false;
  r->tensors.resize(n);
  for (auto& t : r->tensors) {
    if (!DecodeResponseTensor(rd, &t)) return false;
  }
  const bool attrs_ok = DecodeAttrs(rd, world_size, &r->attrs);
  r->sizes = rd.I64s();
  r->ready_wait_s = rd.F64s();
  const uint32_t members = rd.Count(4);
  r->members.clear();
  for (uint32_t i = 0; i < members && rd.ok(); ++i) {
    r->members.push_back(rd.I32());
    // sorted, distinct ranks of the job
    if (r->members.back() < 0 || r->members.back() >= world_size) return false;
    if (i > 0 && r->members[i] <= r->members[i - 1]) return false;
  }
  const int code = rd.U8();
  r->error_message = rd.Str();
  if (!rd.ok() || !attrs_ok || code > static_cast<int>(ErrorCode::kAborted)) return false;
  // A collective on a set names its members; an error may not (an unknown set).
  const int32_t set = r->attrs.process_set_id;
  if ((set == 0 && !r->members.empty()) || (kind == 0 && set != 0 && r->members.empty())) return false;
  if (!r->ready_wait_s.empty() && r->ready_wait_s.size() != static_cast<size_t>(world_size)) return false;
  for (double w : r->ready_wait_s) if (!std::isfinite(w) || w < 0) return false;
  r->kind = static_cast<Response::Kind>(kind);
  r->error_code = static_cast<ErrorCode>(code);
  return true;
}

}  // namespace

int64_t Request::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t Request::Bytes() const { return static_cast<size_t>(NumElements()) * DataTypeSize(attrs.dtype); }

size_t Request::RowBytes() const {
  size_t n = DataTypeSize(attrs.dtype);
  for (size_t i = 1; i < shape.size(); ++i) n *= static_cast<size_t>(shape[i]);
  return n;
}

int64_t ReducescatterRows(int64_t dim0, int size, int rank) {
  return dim0 / size + (rank < dim0 % size ? 1 : 0);
}

std::string Request::Describe() const {
  std::ostringstream os;
  os << OpTypeName(attrs.op) << " " << DataTypeName(attrs.dtype) << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? "," : "") << shape[i];
  os << "]";
  if (attrs.op == OpType::kAllreduce || attrs.op == OpType::kReducescatter) os << " " << ReduceOpName(attrs.reduce_op);
  if (attrs.op == OpType::kBroadcast) os << " root=" << attrs.root;
  return os.str();
}

bool Response::Includes(int rank) const {
  if (members.empty()) return true;
  for (int32_t m : members) {
    if (m == rank) return true;
  }
  return false;
}

ControlMessage AbortMessage(int origin, ErrorCode code, const std::string& message) {
  ControlMessage m;
  m.kind = ControlKind::kAbort;
  m.abort_origin = origin;
  m.abort_code = code;
  m.abort_message = message;
  return m;
}

ControlMessage DepartureMessage(int rank) {
  return AbortMessage(rank, ErrorCode::kPrecondition,
                      "rank " + std::to_string(rank) +
                          " has shut down (it called shutdown() or its script ended); collectives need every rank");
}

std::string EncodeControl(const ControlMessage& m) {
  WireWriter w;
  w.U32(kMagic);
  w.U8(static_cast<uint8_t>(m.kind));
  switch (m.kind) {
    case ControlKind::kRequests:
      w.U32(static_cast<uint32_t>(m.requests.size()));
      for (const auto& r : m.requests) EncodeRequest(w, r);
      EncodeIdBits(w, m.cached_requests);
      w.U32(static_cast<uint32_t>(m.relayed.size()));
      for (const auto& from : m.relayed) {
        w.I32(from.rank);
        w.U32(static_cast<uint32_t>(from.requests.size()));
        for (const auto& r : from.requests) EncodeRequest(w, r);
        EncodeIdBits(w, from.cached);
      }
      EncodeIdBits(w, m.subtree_cached);
      break;
    case ControlKind::kResponses:
      w.U32(static_cast<uint32_t>(m.responses.size()));
      for (const auto& r : m.responses) EncodeResponse(w, r);
      if (!m.tuning.empty()) w.F64s(m.tuning);  // absent, not empty: no byte when not tuning
      break;
    case ControlKind::kShutdown:
    case ControlKind::kHello:
      break;
    case ControlKind::kAbort:
      w.I32(m.abort_origin);
      w.U8(static_cast<uint8_t>(m.abort_code));
      w.Str(m.abort_message);
      break;
  }
  return w.Take();
}

Status DecodeControl(const std::string& bytes, int world_size, ControlMessage* m) {
  WireReader rd(bytes);
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("malformed coordinator message (" + std::to_string(bytes.size()) +
                                   " bytes): " + why);
  };
  if (rd.U32() != kMagic) return bad("bad magic");
  int kind = rd.U8();
  if (!rd.ok() || kind < 1 || kind > 5) return bad("unknown kind");
  m->kind = static_cast<ControlKind>(kind);
  m->requests.clear();
  m->cached_requests.clear();
  m->relayed.clear();
  m->subtree_cached.clear();
  m->responses.clear();
  m->tuning.clear();
  switch (m->kind) {
    case ControlKind::kRequests: {
      uint32_t n = rd.Count(40);
      m->requests.resize(n);
      for (auto& r : m->requests) {
        if (!DecodeRequest(rd, world_size, &r)) return bad("invalid request");
      }
      if (!DecodeIdBits(rd, &m->cached_requests)) return bad("cache id bit vector too long");
      m->relayed.resize(rd.Count(12));  // rank, count, bit vector length
      for (auto& from : m->relayed) {
        from.rank = rd.I32();
        if (!rd.ok() || from.rank < 0 || from.rank >= world_size) return bad("invalid relayed rank");
        from.requests.resize(rd.Count(40));
        for (auto& r : from.requests) {
          if (!DecodeRequest(rd, world_size, &r)) return bad("invalid request");
        }
        if (!DecodeIdBits(rd, &from.cached)) return bad("cache id bit vector too long");
      }
      if (!DecodeIdBits(rd, &m->subtree_cached)) return bad("cache id bit vector too long");
      break;
    }
    case ControlKind::kResponses: {
      uint32_t n = rd.Count(40);
      m->responses.resize(n);
      for (auto& r : m->responses) {
        if (!DecodeResponse(rd, world_size, &r)) return bad("invalid response");
      }
      if (!rd.AtEnd()) {
        m->tuning = rd.F64s();
        if (!rd.ok()) return bad("truncated or trailing bytes");
        if (m->tuning.size() != Tunables().size()) return bad("invalid tuning");
      }
      for (double v : m->tuning) {
        if (!std::isfinite(v) || v < 0) return bad("invalid tuning");
      }
      break;
    }
    case ControlKind::kShutdown:
    case ControlKind::kHello:
      break;
    case ControlKind::kAbort: {
      m->abort_origin = rd.I32();
      int code = rd.U8();
      m->abort_message = rd.Str();
      if (!rd.ok() || code < 1 || code > static_cast<int>(ErrorCode::kAborted) ||
          m->abort_origin < 0 || m->abort_origin >= world_size) {
        return bad("invalid abort");
      }
      m->abort_code = static_cast<ErrorCode>(code);
      break;
    }
  }
  if (!rd.ok() || !rd.AtEnd()) return bad("truncated or trailing bytes");
  return Status::OK();
}

}  // namespace tfring
