#include "base/config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>

#include "base/logging.h"

namespace tfring {

namespace {

bool CheckLogLevel(const std::string& text, std::string* error) {
  LogSpec spec;
  return ParseLogSpec(text, &spec, error);
}

std::map<std::string, ParamCheck>& RegisteredChecks() {
  static std::map<std::string, ParamCheck> checks;
  return checks;
}

}  // namespace

bool RegisterParamCheck(const char* name, ParamCheck check) {
  RegisteredChecks()[name] = check;
  return true;
}

// A table, not logic: one entry per setting (its length is the number of settings).
const std::vector<ParamSpec>& ParamTable() {
  static const std::vector<ParamSpec> kTable = {
      // Identity of this process in the job (set by tfringrun or a scheduler).
      {"TFRING_RANK", ParamType::kInt, "0", 0, 1 << 24, "Global rank of this process."},
      {"TFRING_SIZE", ParamType::kInt, "1", 1, 1 << 24, "Number of processes in the job."},
      {"TFRING_LOCAL_RANK", ParamType::kInt, "0", 0, 1 << 24, "Rank among the processes on this host."},
      {"TFRING_LOCAL_SIZE", ParamType::kInt, "1", 1, 1 << 24, "Number of processes on this host."},
      {"TFRING_CROSS_RANK", ParamType::kInt, "0", 0, 1 << 24, "Index of this host among the job's hosts."},
      {"TFRING_CROSS_SIZE", ParamType::kInt, "1", 1, 1 << 24, "Number of hosts in the job."},
      {"TFRING_STORE_ADDR", ParamType::kString, "", 0, 0,
       "host:port of the job's rendezvous store (served by tfringrun). Required when TFRING_SIZE > 1."},
      {"TFRING_STORE_SERVE", ParamType::kBool, "0", 0, 0,
       "Rank 0 serves the job's store itself, on the port of TFRING_STORE_ADDR (every interface, "
       "or TFRING_BIND_ADDR): N processes started without a launcher (Kubernetes Indexed Jobs, "
       "Spark barrier tasks, srun) form a job from TFRING_STORE_ADDR=<rank 0's host>:<port>, "
       "TFRING_SECRET, TFRING_RANK and TFRING_SIZE alone. The others wait for it up to "
       "TFRING_START_TIMEOUT_S (a name that does not resolve yet is retried)."},
      {"TFRING_SECRET", ParamType::kString, "", 0, 0,
       "Per-job secret that authenticates every connection (hex; set by tfringrun, never logged)."},
      {"TFRING_JOB_ID", ParamType::kString, "default", 0, 0,
       "Namespace of this job's keys in the store."},
      // Time limits.
      {"TFRING_TIMEOUT_S", ParamType::kFloat, "30", 0.1, 1e6,
       "Limit for any single network wait once the job runs (store request, connect, transfer)."},
      {"TFRING_START_TIMEOUT_S", ParamType::kFloat, "120", 0.1, 1e6,
       "How long init() waits for every rank to reach the rendezvous."},
      {"TFRING_SHUTDOWN_TIMEOUT_S", ParamType::kFloat, "10", 0, 1e6,
       "How long shutdown() waits for the background thread to finish; half of it bounds the "
       "finalize of NCCL communicators after a clean job (then they are aborted)."},
      {"TFRING_PEER_TIMEOUT_S", ParamType::kFloat, "30", 0, 1e6,
       "A peer whose tfring runtime has not answered heartbeats for this long (a frozen "
       "process, a paused VM, a cut network) is lost: every collective fails naming it "
       "(0 = never; heartbeats run on their own thread, so slow user code never trips it). "
       "Also the TCP keepalive / user timeout of every connection."},
      {"TFRING_STALL_WARNING_S", ParamType::kFloat, "60", 0, 1e6,
       "Warn when a tensor submitted by some ranks waits this long for the others (0 = never)."},
      {"TFRING_STALL_SHUTDOWN_S", ParamType::kFloat, "0", 0, 1e6,
       "Fail a tensor with a timeout error when it stalls this long (0 = never)."},
      // Performance.
      {"TFRING_FUSION_THRESHOLD", ParamType::kInt, "67108864", 0, 1LL << 40,
       "Largest fused buffer in bytes; tensors of one dtype/op are packed up to this size (0 = no fusion)."},
      {"TFRING_FUSION_IN_PLACE_BYTES", ParamType::kInt, "-1", -1, 1LL << 40,
       "Tensors of at least this many bytes in a fused group are reduced where they are (a "
       "ring each) instead of being copied into the fusion buffer and back: the copies cost "
       "more than one ring's start-up beyond this size. -1 (default): 256 KiB when all the "
       "group's ranks are on one host (shared memory), 4 MiB otherwise (TCP). Must be the "
       "same on every rank (init fails naming the rank otherwise)."},
      {"TFRING_CACHE_CAPACITY", ParamType::kInt, "1024", 0, 1LL << 24,
       "How many tensors get a cache id, so that repeating them (a training step) negotiates "
       "one bit per tensor instead of the whole request (0 = no cache). Rank 0 keeps each "
       "rank's request per id (~150 bytes)."},
      {"TFRING_DATA_CONNECTIONS", ParamType::kEnum, "auto", 0, 0,
       "When ranks open their TCP data connections. all: a full mesh at init (n-1 sockets per "
       "rank); lazy: each pair when a collective first needs it, so a rank holds sockets only "
       "to the peers its algorithms use (ring neighbours, recursive-doubling partners, ...): "
       "fewer descriptors and a faster init on large jobs, a connection's cost on the first "
       "collective with each peer. auto (default): all up to 8 ranks, lazy beyond. Every rank "
       "must use the same value.",
       "auto|all|lazy"},
      {"TFRING_CONTROL_FANOUT", ParamType::kInt, "4", 0, 1 << 20,
       "Children per rank in the control tree that carries negotiation (requests up to rank 0, "
       "responses down): rank 0 exchanges messages with this many ranks per step whatever the "
       "job's size, and a cached step costs every rank one message each way. 0: a star, every "
       "rank talks to rank 0 directly. Every rank must use the same value."},
      {"TFRING_CONTROL_HOLD_US", ParamType::kFloat, "200", 0, 1e6,
       "How long a rank other than 0 first holds new requests back while its last message to "
       "its control parent is unanswered, to send them up as one message (microseconds). A "
       "message goes up at once when nothing is unanswered (a lone collective waits for "
       "nothing); held requests go up when the parent's responses arrive or the hold ends. "
       "Each hold that ends unanswered doubles the next, up to TFRING_CONTROL_HOLD_MAX_US. "
       "0: every batch of submissions goes up at once."},
      {"TFRING_CONTROL_HOLD_MAX_US", ParamType::kFloat, "3200", 0, 1e7,
       "The longest hold of TFRING_CONTROL_HOLD_US after holds that ended unanswered "
       "(microseconds; at least TFRING_CONTROL_HOLD_US)."},
      {"TFRING_CYCLE_TIME_MS", ParamType::kFloat, "1", 0, 10000,
       "While more tensors are still arriving, how long the coordinator waits to fuse them "
       "with those already ready (ms)."},
      {"TFRING_SPIN_US", ParamType::kInt, "50", 0, 1000000,
       "How long a waiting thread spins, yielding its core, before it sleeps: a transfer, the background "
       "thread between collectives, a NumPy call waiting for its result (microseconds; latency vs CPU). "
       "Unset, with more ranks on this host than CPUs, it is 0."},
      {"TFRING_CHUNK_BYTES", ParamType::kInt, "262144", 1024, 1LL << 32,
       "Granularity at which received data is reduced while the rest is still in flight."},
      {"TFRING_RECURSIVE_DOUBLING_BYTES", ParamType::kInt, "65536", 0, 1LL << 40,
       "Host-memory allreduces of at most this many bytes (a fused group counts as one) run by "
       "recursive doubling (log2 n steps, each moving the whole buffer) instead of the ring "
       "(2(n-1) steps moving 1/n of it): the latency of small tensors. 0: always the ring. "
       "Every rank must use the same value."},
      {"TFRING_RABENSEIFNER_BYTES", ParamType::kInt, "1048576", 0, 1LL << 40,
       "Host-memory allreduces larger than TFRING_RECURSIVE_DOUBLING_BYTES and of at most this many "
       "bytes, on 8 or more ranks (a power of two) that reach each other by TCP only (one rank per "
       "host, or TFRING_SHM=0) and not hierarchical, run Rabenseifner's algorithm (reduce-scatter by "
       "recursive halving, allgather by recursive doubling: 2 log2 n steps moving the ring's bytes) "
       "instead of the ring (2(n-1) steps). 0: never. Every rank must use the same value."},
      {"TFRING_HIERARCHICAL_ALLREDUCE", ParamType::kBool, "1", 0, 0,
       "On several hosts with the same number of ranks each, host-memory allreduces above "
       "TFRING_RECURSIVE_DOUBLING_BYTES reduce inside each host first, then across hosts on "
       "1/L of the buffer per local rank, then gather inside the host: each host's link "
       "carries 2(H-1)/H of the buffer instead of the flat ring's 2(N-1)/N. 0: the flat ring. "
       "Every rank must use the same value."},
      {"TFRING_HIERARCHICAL_BLOCK_BYTES", ParamType::kInt, "2097152", 0, 1LL << 40,
       "Hierarchical allreduces of at least twice this many bytes are cut into blocks of about "
       "this size (at most 16), and the cross-host phase of each block overlaps the phases "
       "inside the host of the others (a helper thread), so the network link does not wait for "
       "shared memory. 0: the three phases one after the other. Every rank must use the same value."},
      {"TFRING_HIERARCHICAL_ALLGATHER", ParamType::kBool, "1", 0, 0,
       "On several hosts with the same number of ranks each, host-memory allgathers over every "
       "rank gather across hosts first (the ranks of each local index at once, each with its own "
       "block), then inside each host: each host's link carries (H-1)/H of the output instead of "
       "the flat ring's (N-1)/N. 0: the flat ring. Every rank must use the same value."},
      {"TFRING_HIERARCHICAL_BROADCAST", ParamType::kBool, "1", 0, 0,
       "On several hosts with the same number of ranks each, host-memory broadcasts over every "
       "rank larger than TFRING_RECURSIVE_DOUBLING_BYTES scatter the buffer inside the root's host, "
       "broadcast each local rank's 1/L across hosts (L chains at once), and allgather inside each "
       "host. 0: the flat chain. Every rank must use the same value."},
      {"TFRING_HIERARCHICAL_REDUCESCATTER", ParamType::kBool, "1", 0, 0,
       "On several hosts with the same number of ranks each, host-memory reduce-scatters over "
       "every rank reduce inside each host first (local rank l: the blocks of local index l of "
       "every host), then across hosts among the ranks of each local index: each host's link "
       "carries (H-1)/H of the buffer instead of the flat ring's (N-1)/N. 0: the flat ring. "
       "Every rank must use the same value."},
      {"TFRING_ALGORITHM", ParamType::kString, "auto", 0, 0,
       "Pins the algorithm of host-memory collectives for the whole job, to compare them: auto "
       "(the selection table, docs/scaling.md) or comma-separated OP=ALGORITHM, e.g. "
       "'allreduce=ring,broadcast=hierarchical' (allreduce: ring, recursive_doubling, rabenseifner, hierarchical_doubling, "
       "hierarchical; allgather and reducescatter: ring, hierarchical; broadcast: chain, "
       "hierarchical; each also auto). A pin that cannot run on the job (hierarchical on one host, on a process set) "
       "leaves the choice to the table. Every rank must use the same value.",
       nullptr},  // syntax: collectives/algorithm.cc registers its check
      {"TFRING_SHM", ParamType::kBool, "1", 0, 0,
       "Move data between ranks on the same host through shared memory (0 = always TCP)."},
      {"TFRING_SHM_CONTROL", ParamType::kBool, "1", 0, 0,
       "Negotiation messages between rank 0 and the ranks on its host go through shared memory "
       "as well (with TFRING_SHM; 0 = always TCP). Every rank must set it alike."},
      {"TFRING_SHM_RING_BYTES", ParamType::kInt, "4194304", 4096, 1LL << 31,
       "Size of each shared-memory ring (one per direction per local pair); a power of two."},
      {"TFRING_SHM_CMA", ParamType::kEnum, "0", 0, 0,
       "Single-copy sends between ranks on the same host: the receiver reads large sends "
       "straight from the sender's buffer with process_vm_readv (Cross Memory Attach). 0: "
       "never (default: not faster end to end here, see docs/core.md); auto: where a probe at "
       "start shows the kernel allows it (else the rings, silently); 1: required (init fails "
       "where it is not allowed).",
       "auto|0|1|true|false"},
      {"TFRING_SHM_CMA_MIN_BYTES", ParamType::kInt, "1048576", 1, 1LL << 40,
       "Smallest send (one ring step's segment) that goes single-copy under TFRING_SHM_CMA."},
      // Networking and diagnostics.
      {"TFRING_BIND_ADDR", ParamType::kString, "", 0, 0,
       "Address the data listener binds and advertises (default: the local address that "
       "reached the store). A wildcard (0.0.0.0, ::) binds every interface and advertises "
       "the address that reached the store."},
      {"TFRING_TIMELINE", ParamType::kString, "", 0, 0,
       "Rank 0 writes a Chrome-trace/Perfetto JSON timeline of every collective to this path."},
      {"TFRING_LOG_LEVEL", ParamType::kString, "warning", 0, 0,
       "Log level: trace, debug, info, warning, error (any case; fatal reads as error); per subsystem as LEVEL,SUBSYSTEM=LEVEL,... "
       "(subsystems: runtime, transport, store, stall, cpu, gpu, nccl), e.g. warning,transport=debug.",
       nullptr, CheckLogLevel},
      // GPU (NCCL backend; read from the environment when the libraries are first loaded).
      {"TFRING_NCCL_LIBRARY", ParamType::kString, "", 0, 0,
       "Path of libnccl.so.2 for GPU tensors (default: an already loaded copy, the pip package "
       "nvidia-nccl-cu12/cu13 under site-packages, then the system loader path)."},
      {"TFRING_CUDA_RUNTIME_LIBRARY", ParamType::kString, "", 0, 0,
       "Path of the CUDA runtime (libcudart.so.12) for GPU tensors (default: an already loaded "
       "copy, the pip package nvidia-cuda-runtime-cu12 under site-packages, then the system "
       "loader path)."},
  };
  return kTable;
}

std::vector<std::string> ParamChoices(const ParamSpec& spec) {
  std::vector<std::string> out;
  if (spec.type != ParamType::kEnum || spec.choices == nullptr) return out;
  std::string all = spec.choices;
  size_t start = 0;
  for (size_t bar = all.find('|'); ; bar = all.find('|', start)) {
    out.push_back(all.substr(start, bar == std::string::npos ? std::string::npos : bar - start));
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  return out;
}

namespace {

const ParamSpec* FindSpec(const std::string& name) {
  for (const auto& spec : ParamTable()) {
    if (name == spec.name) return &spec;
  }
  return nullptr;
}

Status Validate(const ParamSpec& spec, const std::string& text, const std::string& source) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(std::string(spec.name) + "='" + text + "' (from " + source +
                                   ") is invalid: " + why + ". " + spec.description);
  };
  switch (spec.type) {
    case ParamType::kInt: {
      errno = 0;
      char* end = nullptr;
      long long v = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || errno != 0) return bad("expected an integer");
      if (v < spec.min_value || v > spec.max_value) {
        return bad("expected a value in [" + std::to_string(static_cast<long long>(spec.min_value)) +
                   ", " + std::to_string(static_cast<long long>(spec.max_value)) + "]");
      }
      return Status::OK();
    }
    case ParamType::kFloat: {
      errno = 0;
      char* end = nullptr;
      double v = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || errno != 0 || !std::isfinite(v)) {
        return bad("expected a number");
      }
      if (v < spec.min_value || v > spec.max_value) {
        return bad("expected a value in [" + std::to_string(spec.min_value) + ", " +
                   std::to_string(spec.max_value) + "]");
      }
      return Status::OK();
    }
    case ParamType::kBool:
      if (text == "0" || text == "1" || text == "true" || text == "false") return Status::OK();
      return bad("expected 0, 1, true or false");
    case ParamType::kEnum: {
      const std::vector<std::string> choices = ParamChoices(spec);
      if (std::find(choices.begin(), choices.end(), text) != choices.end()) return Status::OK();
      std::string expected;
      for (size_t i = 0; i < choices.size(); ++i) {
        expected += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
      }
      return bad("expected " + expected);
    }
    case ParamType::kString: {
      std::string error;
      ParamCheck check = spec.check;
      if (check == nullptr) {
        auto registered = RegisteredChecks().find(spec.name);
        if (registered != RegisteredChecks().end()) check = registered->second;
      }
      if (check != nullptr && !check(text, &error)) return bad(error);
      return Status::OK();
    }
  }
  return Status::OK();
}

}  // namespace

Status Config::Load(const std::map<std::string, std::string>& overrides, bool read_env,
                    Config* out) {
  for (const auto& kv : overrides) {
    if (FindSpec(kv.first) == nullptr) {
      return Status::InvalidArgument("unknown tfring setting '" + kv.first +
                                     "'; see tfring.config_table() for the known ones");
    }
  }
  Config config;
  for (const auto& spec : ParamTable()) {
    ParamValue value{spec.default_value, "default"};
    if (read_env) {
      const char* env = std::getenv(spec.name);
      if (env != nullptr && env[0] != '\0') value = {env, "env"};
    }
    auto it = overrides.find(spec.name);
    if (it != overrides.end()) value = {it->second, "argument"};
    TFRING_RETURN_IF_ERROR(Validate(spec, value.text, value.source));
    config.values_[spec.name] = value;
  }
  int64_t rank = config.Int("TFRING_RANK"), size = config.Int("TFRING_SIZE");
  if (rank >= size) {
    return Status::InvalidArgument("TFRING_RANK=" + std::to_string(rank) +
                                   " must be below TFRING_SIZE=" + std::to_string(size));
  }
  int64_t ring = config.Int("TFRING_SHM_RING_BYTES");
  if ((ring & (ring - 1)) != 0) {
    return Status::InvalidArgument("TFRING_SHM_RING_BYTES=" + std::to_string(ring) +
                                   " must be a power of two");
  }
  if (config.Int("TFRING_LOCAL_RANK") >= config.Int("TFRING_LOCAL_SIZE")) {
    return Status::InvalidArgument("TFRING_LOCAL_RANK must be below TFRING_LOCAL_SIZE");
  }
  if (config.Int("TFRING_CROSS_RANK") >= config.Int("TFRING_CROSS_SIZE")) {
    return Status::InvalidArgument("TFRING_CROSS_RANK must be below TFRING_CROSS_SIZE");
  }
  if (size > 1 && config.String("TFRING_STORE_ADDR").empty()) {
    return Status::InvalidArgument(
        "TFRING_SIZE=" + std::to_string(size) +
        " but TFRING_STORE_ADDR is not set: start the job with tfringrun, or set the store "
        "address and TFRING_SECRET yourself");
  }
  if (size > 1 && config.String("TFRING_SECRET").empty()) {
    return Status::InvalidArgument("TFRING_SIZE > 1 needs TFRING_SECRET (the job secret)");
  }
  *out = std::move(config);
  return Status::OK();
}

int64_t Config::Int(const std::string& name) const {
  return std::strtoll(values_.at(name).text.c_str(), nullptr, 10);
}
double Config::Float(const std::string& name) const {
  return std::strtod(values_.at(name).text.c_str(), nullptr);
}
bool Config::Bool(const std::string& name) const {
  const auto& t = values_.at(name).text;
  return t == "1" || t == "true";
}
const std::string& Config::String(const std::string& name) const { return values_.at(name).text; }
bool Config::IsSet(const std::string& name) const { return values_.at(name).source != "default"; }

}  // namespace tfring
