// A CPU stand-in for libnccl.so.2, for tests only (tests/test_gpu_nccl.py), used with
// fake_cudart.cc ("device" memory is host memory). It behaves like a non-blocking NCCL
// communicator: creation and the first async-error queries report ncclInProgress, and only
// the calls tfring makes exist. Loaded only through TFRING_NCCL_LIBRARY.
//
// Ranks are processes. With one rank a collective copies (applying
// ncclRedOpCreatePreMulSum factors). With several, every call (or every ncclGroupStart/End
// group, executed at ncclGroupEnd) is one exchange through files in a directory named by
// the unique id: each rank writes what it contributes (`<seq>.<rank>`, written whole and
// renamed), waits for every other rank's file of the same sequence number, and computes
// its own result from all of them, as NCCL defines it (reductions in double or 64-bit
// integers). So every rank must make the same calls in the same order, as with NCCL;
// a rank that never does makes the others fail after FAKE_NCCL_TIMEOUT_S (default 60)
// with ncclRemoteError. Directory: $FAKE_NCCL_DIR, else $TMPDIR (or /tmp).
//
// Fault injection (environment): FAKE_NCCL_ASYNC_ERROR=1 makes ncclCommGetAsyncError report
// ncclRemoteError once a collective ran (a peer died), FAKE_NCCL_ASYNC_ERROR_DELAY_MS=n
// milliseconds after the first one (default 0); FAKE_NCCL_VERSION=n overrides the
// version (e.g. 21300 to test the "too old" refusal); FAKE_NCCL_FINALIZE_HANG=1 makes
// ncclCommFinalize never finish (the async state stays ncclInProgress). FAKE_NCCL_TEARDOWN_LOG
// names a file to which every ncclCommFinalize/Destroy/Abort appends a line ("finalize", ...).
// With FAKE_CUDA_EVENT_LOG (fake_cudart.cc), every collective call appends "<call> on S<n>"
// to that file, its stream numbered by fake_cudart.cc's handle.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

enum Result { kSuccess = 0, kInvalidArgument = 4, kInvalidUsage = 5, kRemoteError = 6, kInProgress = 7 };
enum Type { kInt8, kUint8, kInt32, kUint32, kInt64, kUint64, kFloat16, kFloat32, kFloat64, kBfloat16 };
enum RedOp { kSum, kProd, kMax, kMin, kAvg };
constexpr int kFirstCustomOp = 5;

struct Comm {
  int polls_left = 3;  // async-error queries answered "in progress" after creation
  bool finalizing = false;  // ncclCommFinalize was called
  int collectives = 0;
  std::chrono::steady_clock::time_point first_collective;
  int nranks = 1;
  int rank = 0;
  std::string dir;    // the exchange directory (nranks > 1)
  uint64_t seq = 0;   // exchanges done
};

struct Config {  // ncclConfig_t prefix
  size_t size;
  unsigned magic;
  unsigned version;
  int blocking;
};

std::mutex mu;
std::vector<double> premul_factors;  // custom op id - kFirstCustomOp
std::string last_error;

size_t TypeSize(int t) {
  switch (t) {
    case kInt8: case kUint8: return 1;
    case kFloat16: case kBfloat16: return 2;
    case kInt32: case kUint32: case kFloat32: return 4;
    default: return 8;
  }
}

float HalfToFloat(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v = exp == 0 ? std::ldexp(static_cast<float>(mant), -24)
            : exp == 31 ? (mant ? NAN : INFINITY)
                        : std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

uint16_t FloatToHalf(float f) {  // round to nearest (adequate for tests)
  uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  float a = std::fabs(f);
  if (a == 0) return sign;
  if (a >= 65520.f) return sign | 0x7c00;
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  if (e < -13) return sign | static_cast<uint16_t>(std::lrint(a / std::ldexp(1.f, -24)));
  uint32_t mant = static_cast<uint32_t>(std::lrint(std::ldexp(a, 11 - e))) - 0x400;
  uint32_t exp = static_cast<uint32_t>(e + 14);
  if (mant == 0x400) { mant = 0; ++exp; }
  return sign | static_cast<uint16_t>(exp << 10) | static_cast<uint16_t>(mant);
}

float Bf16ToFloat(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

double Read(const void* p, int t) {
  switch (t) {
    case kFloat16: return HalfToFloat(*static_cast<const uint16_t*>(p));
    case kBfloat16: return Bf16ToFloat(*static_cast<const uint16_t*>(p));
    case kFloat32: return *static_cast<const float*>(p);
    case kFloat64: return *static_cast<const double*>(p);
    default: return 0;
  }
}

void Scale(void* buf, size_t count, int t, double factor) {
  for (size_t i = 0; i < count; ++i) {
    switch (t) {
      case kFloat16: { auto* v = static_cast<uint16_t*>(buf) + i; *v = FloatToHalf(HalfToFloat(*v) * factor); break; }
      case kBfloat16: { auto* v = static_cast<uint16_t*>(buf) + i; *v = FloatToBf16(Bf16ToFloat(*v) * factor); break; }
      case kFloat32: static_cast<float*>(buf)[i] *= static_cast<float>(factor); break;
      case kFloat64: static_cast<double*>(buf)[i] *= factor; break;
      default: break;
    }
  }
}

void Write(void* p, int t, double v) {
  switch (t) {
    case kFloat16: *static_cast<uint16_t*>(p) = FloatToHalf(static_cast<float>(v)); break;
    case kBfloat16: *static_cast<uint16_t*>(p) = FloatToBf16(static_cast<float>(v)); break;
    case kFloat32: *static_cast<float*>(p) = static_cast<float>(v); break;
    case kFloat64: *static_cast<double*>(p) = v; break;
    default: break;
  }
}

bool IsFloat(int t) { return t == kFloat16 || t == kBfloat16 || t == kFloat32 || t == kFloat64; }

int64_t ReadInt(const void* p, int t) {
  switch (t) {
    case kInt8: return *static_cast<const int8_t*>(p);
    case kUint8: return *static_cast<const uint8_t*>(p);
    case kInt32: return *static_cast<const int32_t*>(p);
    case kUint32: return *static_cast<const uint32_t*>(p);
    default: return *static_cast<const int64_t*>(p);
  }
}

void WriteInt(void* p, int t, int64_t v) {
  switch (t) {
    case kInt8: *static_cast<int8_t*>(p) = static_cast<int8_t>(v); break;
    case kUint8: *static_cast<uint8_t*>(p) = static_cast<uint8_t>(v); break;
    case kInt32: *static_cast<int32_t*>(p) = static_cast<int32_t>(v); break;
    case kUint32: *static_cast<uint32_t*>(p) = static_cast<uint32_t>(v); break;
    default: *static_cast<int64_t*>(p) = v; break;
  }
}

// The premultiplier of a custom op, or 1; false for an unknown op.
bool PremulFactor(int op, double* factor) {
  *factor = 1.0;
  if (op < kFirstCustomOp) return op >= kSum && op <= kAvg;
  std::lock_guard<std::mutex> lock(mu);
  size_t index = static_cast<size_t>(op - kFirstCustomOp);
  if (index >= premul_factors.size()) return false;
  *factor = premul_factors[index];
  return true;
}

// recv[i] = op over ranks of inputs[r][i] (count elements of type t); custom ops are
// premultiplied sums.
int ReduceInto(const std::vector<const char*>& inputs, void* recv, size_t count, int t, int op) {
  double factor;
  if (!PremulFactor(op, &factor)) return kInvalidArgument;
  const size_t es = TypeSize(t);
  const int n = static_cast<int>(inputs.size());
  for (size_t i = 0; i < count; ++i) {
    char* out = static_cast<char*>(recv) + i * es;
    if (IsFloat(t)) {
      double acc = Read(inputs[0] + i * es, t) * factor;
      for (int r = 1; r < n; ++r) {
        double v = Read(inputs[r] + i * es, t) * factor;
        acc = op == kProd ? acc * v : op == kMax ? std::max(acc, v) : op == kMin ? std::min(acc, v) : acc + v;
      }
      Write(out, t, op == kAvg ? acc / n : acc);
    } else {
      int64_t acc = ReadInt(inputs[0] + i * es, t);
      for (int r = 1; r < n; ++r) {
        int64_t v = ReadInt(inputs[r] + i * es, t);
        acc = op == kProd ? acc * v : op == kMax ? std::max(acc, v) : op == kMin ? std::min(acc, v) : acc + v;
      }
      WriteInt(out, t, op == kAvg ? acc / n : acc);
    }
  }
  return kSuccess;
}

// One call as made by this rank. Calls between ncclGroupStart/End wait in `pending`.
struct Call {
  enum Kind : uint8_t { kAllReduce, kReduce, kReduceScatter, kAllGather, kBroadcast, kSend, kRecv } kind;
  const void* send;
  void* recv;
  size_t count;  // elements (per rank for ReduceScatter's output and AllGather's input)
  int type;
  int op;
  int peer;  // root (Reduce, Broadcast) or the other rank (Send, Recv)
  Comm* comm;

  size_t Bytes() const { return count * TypeSize(type); }
  bool PointToPoint() const { return kind == kSend || kind == kRecv; }
  // Bytes this rank puts into the exchange for this call.
  size_t Contributed() const {
    switch (kind) {
      case kReduceScatter: return Bytes() * static_cast<size_t>(comm->nranks);
      case kBroadcast: return comm->rank == peer ? Bytes() : 0;
      case kRecv: return 0;
      default: return Bytes();
    }
  }
};

thread_local int group_depth = 0;
thread_local std::vector<Call> pending;

double TimeoutS() {
  const char* v = std::getenv("FAKE_NCCL_TIMEOUT_S");
  return v ? std::atof(v) : 60.0;
}

std::string ExchangeFile(const Comm& c, uint64_t seq, int rank) {
  return c.dir + "/" + std::to_string(seq) + "." + std::to_string(rank);
}

// Writes `mine`, waits for every rank's contribution to the same exchange, returns them.
int Exchange(Comm* c, const std::string& mine, std::vector<std::string>* all) {
  const uint64_t seq = c->seq++;
  // Every rank has read exchange seq-2: each wrote seq-1 only after finishing it.
  if (seq >= 2) ::unlink(ExchangeFile(*c, seq - 2, c->rank).c_str());
  const std::string path = ExchangeFile(*c, seq, c->rank);
  {
    std::ofstream f(path + ".tmp", std::ios::binary);
    f.write(mine.data(), static_cast<std::streamsize>(mine.size()));
    if (!f) {
      last_error = "cannot write " + path + " (fake)";
      return kRemoteError;
    }
  }
  if (std::rename((path + ".tmp").c_str(), path.c_str()) != 0) return kRemoteError;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(TimeoutS());
  all->assign(static_cast<size_t>(c->nranks), "");
  for (int r = 0; r < c->nranks; ++r) {
    std::ifstream f;
    for (;;) {
      f.open(ExchangeFile(*c, seq, r), std::ios::binary);
      if (f) break;
      if (std::chrono::steady_clock::now() > deadline) {
        last_error = "rank " + std::to_string(r) + " never made call " + std::to_string(seq) + " (fake)";
        return kRemoteError;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    std::ostringstream bytes;
    bytes << f.rdbuf();
    (*all)[static_cast<size_t>(r)] = bytes.str();
  }
  return kSuccess;
}

// A rank's exchange: per call, [kind u8][peer i32][bytes u64][payload].
struct Record {
  uint8_t kind;
  int32_t peer;
  const char* data;
  uint64_t bytes;
};

std::vector<Record> Parse(const std::string& bundle) {
  std::vector<Record> out;
  size_t at = 0;
  while (at + 13 <= bundle.size()) {
    Record r;
    r.kind = static_cast<uint8_t>(bundle[at]);
    std::memcpy(&r.peer, bundle.data() + at + 1, 4);
    std::memcpy(&r.bytes, bundle.data() + at + 5, 8);
    r.data = bundle.data() + at + 13;
    at += 13 + r.bytes;
    out.push_back(r);
  }
  return out;
}

// Real NCCL (2.28.9, seen on an H200) runs a one-rank premultiplied sum or average in one
// kernel (oneRankReduce) whose min(32, ceil(bytes / 16 KiB)) blocks each take
// floor(n / blocks) elements rounded up to 16 bytes: the tail past blocks * that share is
// never written. Emulated, so that the CPU tests catch tfring handing NCCL such a call.
size_t OneRankKernelWrites(size_t n, size_t element_size) {
  const size_t bytes = n * element_size;
  if (bytes == 0) return 0;
  const size_t blocks = std::min<size_t>(32, (bytes + (16u << 10) - 1) / (16u << 10));
  const size_t pack = 16 / element_size;
  const size_t share = (n / blocks + pack - 1) / pack * pack;
  return std::min(n, blocks * share);
}

// One rank: every call is the identity on its own contribution (times a premul factor).
int RunAlone(const Call& k) {
  double factor;
  if (!PremulFactor(k.op, &factor)) return kInvalidArgument;
  if (k.PointToPoint()) return kInvalidUsage;  // no peers
  if ((k.kind == Call::kReduce || k.kind == Call::kBroadcast) && k.peer != 0) return kInvalidArgument;
  const bool reduction = k.kind == Call::kAllReduce || k.kind == Call::kReduce || k.kind == Call::kReduceScatter;
  const bool kernel = reduction && (factor != 1.0 || k.op == kAvg);
  const size_t written = kernel ? OneRankKernelWrites(k.count, TypeSize(k.type)) : k.count;
  if (written) std::memmove(k.recv, k.send, written * TypeSize(k.type));
  if (factor != 1.0) Scale(k.recv, written, k.type, factor);
  return kSuccess;
}

// Runs this rank's calls (one call, or one group) as one exchange.
int Run(std::vector<Call> calls) {
  if (calls.empty()) return kSuccess;
  Comm* c = calls[0].comm;
  if (c == nullptr) return kInvalidArgument;
  for (const Call& k : calls) {
    if (k.comm != c) return kInvalidUsage;  // one communicator per group (all tfring does)
    if (c->collectives++ == 0) c->first_collective = std::chrono::steady_clock::now();
  }
  if (c->nranks == 1) {
    for (const Call& k : calls) {
      int rc = RunAlone(k);
      if (rc != kSuccess) return rc;
    }
    return kSuccess;
  }
  std::string mine;
  for (const Call& k : calls) {
    const uint64_t bytes = k.Contributed();
    const int32_t peer = k.peer;
    mine.push_back(static_cast<char>(k.kind));
    mine.append(reinterpret_cast<const char*>(&peer), 4);
    mine.append(reinterpret_cast<const char*>(&bytes), 8);
    mine.append(static_cast<const char*>(k.send), bytes);
  }
  std::vector<std::string> bundles;
  int rc = Exchange(c, mine, &bundles);
  if (rc != kSuccess) return rc;
  // Collectives line up by position among each rank's collectives; a Recv takes the next
  // Send its peer addressed to this rank.
  const int n = c->nranks, me = c->rank;
  std::vector<std::vector<Record>> collectives(n), sends_to_me(n);
  for (int r = 0; r < n; ++r) {
    for (const Record& rec : Parse(bundles[static_cast<size_t>(r)])) {
      if (rec.kind == Call::kSend) {
        if (rec.peer == me) sends_to_me[r].push_back(rec);
      } else if (rec.kind != Call::kRecv) {
        collectives[r].push_back(rec);
      }
    }
  }
  std::vector<size_t> next_send(n, 0);
  size_t position = 0;
  for (const Call& k : calls) {
    if (k.kind == Call::kSend) continue;
    if (k.kind == Call::kRecv) {
      if (k.peer < 0 || k.peer >= n || next_send[k.peer] >= sends_to_me[k.peer].size()) return kInvalidUsage;
      const Record& rec = sends_to_me[k.peer][next_send[k.peer]++];
      if (rec.bytes != k.Bytes()) return kInvalidArgument;
      std::memcpy(k.recv, rec.data, rec.bytes);
      continue;
    }
    std::vector<const char*> inputs;
    for (int r = 0; r < n; ++r) {
      if (position >= collectives[r].size() || collectives[r][position].kind != k.kind) {
        last_error = "ranks made different calls (fake)";
        return kInvalidUsage;
      }
      inputs.push_back(collectives[r][position].data);
    }
    const size_t bytes = k.Bytes();
    switch (k.kind) {
      case Call::kAllReduce:
        rc = ReduceInto(inputs, k.recv, k.count, k.type, k.op);
        break;
      case Call::kReduce:
        if (me == k.peer) rc = ReduceInto(inputs, k.recv, k.count, k.type, k.op);
        break;
      case Call::kReduceScatter: {
        std::vector<const char*> mine_only;
        for (const char* in : inputs) mine_only.push_back(in + static_cast<size_t>(me) * bytes);
        rc = ReduceInto(mine_only, k.recv, k.count, k.type, k.op);
        break;
      }
      case Call::kAllGather:
        for (int r = 0; r < n; ++r) std::memcpy(static_cast<char*>(k.recv) + r * bytes, inputs[r], bytes);
        break;
      case Call::kBroadcast:
        if (k.peer < 0 || k.peer >= n) return kInvalidArgument;
        if (bytes) std::memmove(k.recv, inputs[k.peer], bytes);
        break;
      default:
        break;
    }
    if (rc != kSuccess) return rc;
    ++position;
  }
  return kSuccess;
}

int Submit(const Call& call) {
  if (group_depth > 0) {
    pending.push_back(call);
    return kSuccess;
  }
  return Run({call});
}

std::string RandomHex(size_t chars) {
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  std::string out;
  for (size_t i = 0; i < chars; ++i) out.push_back("0123456789abcdef"[static_cast<unsigned char>(urandom.get()) % 16]);
  return out;
}

}  // namespace

// fake_cudart.cc's stream handle (its number names the stream in the ordering log).
struct StreamHandle {
  char kind;
  int id;
};

void LogCollective(const char* call, void* stream) {
  const char* path = std::getenv("FAKE_CUDA_EVENT_LOG");
  if (path == nullptr) return;
  const int id = stream ? static_cast<const StreamHandle*>(stream)->id : 0;
  std::ofstream(path, std::ios::app) << call << " on S" << id << "\n";
}

extern "C" {

int ncclGetVersion(int* version) {
  const char* v = std::getenv("FAKE_NCCL_VERSION");
  *version = v ? std::atoi(v) : 21903;
  return kSuccess;
}
const char* ncclGetErrorString(int result) {
  switch (result) {
    case kSuccess: return "no error";
    case kRemoteError: return "remote process exited or there was a network error (fake)";
    case kInProgress: return "NCCL operation in progress";
    default: return "fake NCCL error";
  }
}
const char* ncclGetLastError(void*) { return last_error.c_str(); }
int ncclGetUniqueId(void* id) {
  std::memset(id, 0, 128);
  const std::string text = "fake-nccl:" + RandomHex(24);
  std::memcpy(id, text.data(), text.size());
  return kSuccess;
}
struct UniqueId {
  char internal[128];
};
int ncclCommInitRankConfig(Comm** comm, int nranks, UniqueId id, int rank, Config* config) {  // id by value
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    last_error = "invalid rank " + std::to_string(rank) + " of " + std::to_string(nranks);
    return kInvalidArgument;
  }
  if (config == nullptr || config->magic != 0xcafebeef || config->size < sizeof(Config)) {
    last_error = "ncclConfig_t not initialized";
    return kInvalidArgument;
  }
  auto* c = new Comm();
  c->nranks = nranks;
  c->rank = rank;
  if (nranks > 1) {
    const std::string text(id.internal, strnlen(id.internal, sizeof(id.internal)));
    if (text.rfind("fake-nccl:", 0) != 0) {
      delete c;
      last_error = "not a fake NCCL unique id";
      return kInvalidArgument;
    }
    const char* dir = std::getenv("FAKE_NCCL_DIR");
    if (dir == nullptr) dir = std::getenv("TMPDIR");
    c->dir = std::string(dir ? dir : "/tmp") + "/fake_nccl_" + text.substr(10);
    ::mkdir(c->dir.c_str(), 0700);  // every rank tries; one creates it
  }
  *comm = c;
  return config->blocking == 0 ? kInProgress : kSuccess;
}
static void LogTeardown(const char* call) {
  const char* path = std::getenv("FAKE_NCCL_TEARDOWN_LOG");
  if (path != nullptr) std::ofstream(path, std::ios::app) << call << "\n";
}
int ncclCommAbort(Comm* comm) {
  LogTeardown("abort");
  delete comm;
  return kSuccess;
}
int ncclCommFinalize(Comm* comm) {
  LogTeardown("finalize");
  if (comm->finalizing) return kInvalidArgument;
  comm->finalizing = true;
  comm->polls_left = 2;
  return kInProgress;
}
int ncclCommDestroy(Comm* comm) {
  LogTeardown("destroy");
  delete comm;
  return kSuccess;
}
int ncclCommGetAsyncError(Comm* comm, int* state) {
  if (comm->finalizing && std::getenv("FAKE_NCCL_FINALIZE_HANG")) {
    *state = kInProgress;
  } else if (comm->polls_left > 0) {
    --comm->polls_left;
    *state = kInProgress;
  } else if (std::getenv("FAKE_NCCL_ASYNC_ERROR") && comm->collectives > 0 &&
             std::chrono::steady_clock::now() - comm->first_collective >=
                 std::chrono::milliseconds(std::atoi(std::getenv("FAKE_NCCL_ASYNC_ERROR_DELAY_MS") ?: "0"))) {
    last_error = "peer 1 closed its connection (fake)";
    *state = kRemoteError;
  } else {
    *state = kSuccess;
  }
  return kSuccess;
}
int ncclRedOpCreatePreMulSum(int* op, void* scalar, int type, int residence, Comm*) {
  if (residence != 1) return kInvalidArgument;  // tfring passes host immediates
  std::lock_guard<std::mutex> lock(mu);
  premul_factors.push_back(Read(scalar, type));
  *op = kFirstCustomOp + static_cast<int>(premul_factors.size()) - 1;
  return kSuccess;
}
int ncclRedOpDestroy(int op, Comm*) { return op >= kFirstCustomOp ? kSuccess : kInvalidArgument; }
int ncclAllReduce(const void* s, void* r, size_t n, int t, int op, Comm* c, void* stream) {
  LogCollective("ncclAllReduce", stream);
  return Submit(Call{Call::kAllReduce, s, r, n, t, op, -1, c});
}
int ncclReduce(const void* s, void* r, size_t n, int t, int op, int root, Comm* c, void* stream) {
  LogCollective("ncclReduce", stream);
  return Submit(Call{Call::kReduce, s, r, n, t, op, root, c});
}
int ncclReduceScatter(const void* s, void* r, size_t n, int t, int op, Comm* c, void* stream) {
  LogCollective("ncclReduceScatter", stream);
  return Submit(Call{Call::kReduceScatter, s, r, n, t, op, -1, c});
}
int ncclAllGather(const void* s, void* r, size_t n, int t, Comm* c, void* stream) {
  LogCollective("ncclAllGather", stream);
  return Submit(Call{Call::kAllGather, s, r, n, t, kSum, -1, c});
}
int ncclBroadcast(const void* s, void* r, size_t n, int t, int root, Comm* c, void* stream) {
  LogCollective("ncclBroadcast", stream);
  return Submit(Call{Call::kBroadcast, s, r, n, t, kSum, root, c});
}
int ncclSend(const void* s, size_t n, int t, int peer, Comm* c, void* stream) {
  LogCollective("ncclSend", stream);
  return Submit(Call{Call::kSend, s, nullptr, n, t, kSum, peer, c});
}
int ncclRecv(void* r, size_t n, int t, int peer, Comm* c, void* stream) {
  LogCollective("ncclRecv", stream);
  return Submit(Call{Call::kRecv, nullptr, r, n, t, kSum, peer, c});
}
int ncclGroupStart() {
  ++group_depth;
  return kSuccess;
}
int ncclGroupEnd() {
  if (group_depth == 0) return kInvalidUsage;
  if (--group_depth > 0) return kSuccess;
  std::vector<Call> calls;
  calls.swap(pending);
  return Run(std::move(calls));
}

}  // extern "C"
