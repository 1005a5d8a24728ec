#include "runtime.h"

#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "cpu_backend.h"
#include "logging.h"
#include "memory_store.h"
#include "runtime_state.h"
#include "socket_tuning.h"

namespace tfring {
namespace {

// The CPUs this process may run on (its affinity mask); empty when it cannot be read.
std::vector<int> AffinityCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}


std::string HostOf(const std::string& host_port) {
  auto colon = host_port.rfind(':');
  std::string h = host_port.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[') h = h.substr(1, h.size() - 2);
  return h;
}

// Ranks share memory when they run on the same kernel (hostname and boot id) and the
// launcher placed them on the same host (cross rank): network-namespace "hosts" in tests
// share a kernel but must talk TCP.
std::string Hostname() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}

std::string HostId(int cross_rank) {
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  return Hostname() + "/" + boot + "/" + std::to_string(cross_rank);
}

}  // namespace

Runtime::Runtime() = default;

Runtime::~Runtime() { Shutdown(); }

Runtime& Runtime::Global() {
  // Leaked on purpose: the background thread may still run during static destruction.
  static Runtime* runtime = new Runtime();
  return *runtime;
}

Runtime::State::~State() {
  if (liveness) liveness->Stop();  // its callback writes wake_fd
  if (wake_fd >= 0) ::close(wake_fd);
}

Status Runtime::Init(const std::map<std::string, std::string>& overrides, bool read_env) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_) {
    return Status::Precondition("tfring is already initialized (rank " +
                                std::to_string(state_->rank) +
                                "); call shutdown() before initializing again");
  }
  auto st = std::make_shared<State>();
  TFRING_RETURN_IF_ERROR(Config::Load(overrides, read_env, &st->config));
  const Config& c = st->config;
  LogSpec log_spec;
  std::string log_error;
  ParseLogSpec(c.String("TFRING_LOG_LEVEL"), &log_spec, &log_error);  // validated by Config::Load
  SetLogSpec(log_spec);
  st->rank = static_cast<int>(c.Int("TFRING_RANK"));
  st->size = static_cast<int>(c.Int("TFRING_SIZE"));
  st->local_rank = static_cast<int>(c.Int("TFRING_LOCAL_RANK"));
  st->local_size = static_cast<int>(c.Int("TFRING_LOCAL_SIZE"));
  st->cross_rank = static_cast<int>(c.Int("TFRING_CROSS_RANK"));
  st->cross_size = static_cast<int>(c.Int("TFRING_CROSS_SIZE"));
  st->timeout_s = c.Float("TFRING_TIMEOUT_S");
  st->cycle_s = c.Float("TFRING_CYCLE_TIME_MS") / 1000.0;
  SetLogRank(st->rank);
  st->spin_us = static_cast<int>(c.Int("TFRING_SPIN_US"));
  SetSocketSpinMicros(st->spin_us);
  for (const char* library : {"TFRING_NCCL_LIBRARY", "TFRING_CUDA_RUNTIME_LIBRARY"}) {
    SetGpuLibraryPath(library, c.String(library));  // init(nccl_library=...) reaches the loader
  }

  CommunicatorOptions opt;
  opt.rank = st->rank;
  opt.size = st->size;
  opt.secret = c.String("TFRING_SECRET");
  opt.start_timeout_s = c.Float("TFRING_START_TIMEOUT_S");
  opt.timeout_s = st->timeout_s;
  opt.shm = c.Bool("TFRING_SHM");
  opt.shm_ring_bytes = static_cast<size_t>(c.Int("TFRING_SHM_RING_BYTES"));
  opt.shm_control = c.Bool("TFRING_SHM_CONTROL");
  const std::string& cma = c.String("TFRING_SHM_CMA");
  opt.cma = cma == "auto" ? CmaMode::kAuto : (cma == "1" || cma == "true") ? CmaMode::kOn : CmaMode::kOff;
  opt.cma_min_bytes = static_cast<size_t>(c.Int("TFRING_SHM_CMA_MIN_BYTES"));
  opt.host_id = HostId(st->cross_rank);
  opt.cpus = AffinityCpus();
  // A rank that creates shared-memory rings waits at init for its peers to open them.
  opt.must_match = "TFRING_FUSION_IN_PLACE_BYTES=" + std::to_string(c.Int("TFRING_FUSION_IN_PLACE_BYTES")) +
                   ";TFRING_RECURSIVE_DOUBLING_BYTES=" + std::to_string(c.Int("TFRING_RECURSIVE_DOUBLING_BYTES")) +
                   ";TFRING_HIERARCHICAL_ALLREDUCE=" + std::to_string(c.Bool("TFRING_HIERARCHICAL_ALLREDUCE")) +
                   ";TFRING_HIERARCHICAL_ALLGATHER=" + std::to_string(c.Bool("TFRING_HIERARCHICAL_ALLGATHER")) +
                   ";TFRING_HIERARCHICAL_BROADCAST=" + std::to_string(c.Bool("TFRING_HIERARCHICAL_BROADCAST")) +
                   ";TFRING_HIERARCHICAL_REDUCESCATTER=" + std::to_string(c.Bool("TFRING_HIERARCHICAL_REDUCESCATTER")) +
                   ";TFRING_ALGORITHM=" + c.String("TFRING_ALGORITHM") +
                   ";TFRING_SHM=" + std::to_string(opt.shm) +
                   ";TFRING_SHM_CONTROL=" + std::to_string(opt.shm && opt.shm_control);
  opt.peer_timeout_s = c.Float("TFRING_PEER_TIMEOUT_S");
  opt.hostname = Hostname();
  if (st->size > 1) {
    std::string host;
    int port = 0;
    TFRING_RETURN_IF_ERROR(
        ParseHostPort(c.String("TFRING_STORE_ADDR"), "TFRING_STORE_ADDR", &host, &port));
    if (st->rank == 0 && c.Bool("TFRING_STORE_SERVE")) {
      // No launcher: rank 0 serves the store the others were told about. IPv4 wildcard
      // unless the address is an IPv6 literal (dual stack then takes IPv4 too).
      const std::string bind = c.IsSet("TFRING_BIND_ADDR") ? c.String("TFRING_BIND_ADDR")
                               : host.find(':') != std::string::npos ? "::" : "0.0.0.0";
      st->store_server = std::make_unique<TcpStoreServer>();
      TFRING_RETURN_IF_ERROR(st->store_server->Start(bind, port, opt.secret)
                                 .WithContext("rank 0 serving the job's store on " + bind + ":" +
                                              std::to_string(port) + " (TFRING_STORE_SERVE=1)"));
      TFRING_LOG(LogLevel::kInfo, "store", "rank 0 serves the job's store on " << bind << ":" << port);
    }
    TFRING_RETURN_IF_ERROR(TcpStoreClient::Connect(host, port, opt.secret, opt.start_timeout_s,
                                                   st->timeout_s, &st->store));
    // The data listener binds TFRING_BIND_ADDR when set. Other ranks are told that address,
    // except for a wildcard (0.0.0.0, ::), which nobody can connect to: then they are told
    // the local address that reached the store, as without the setting.
    const std::string bind = c.IsSet("TFRING_BIND_ADDR") ? c.String("TFRING_BIND_ADDR") : "";
    const bool wildcard = bind == "0.0.0.0" || bind == "::" || bind == "[::]";
    opt.bind_host = bind;
    opt.advertise_host = (bind.empty() || wildcard) ? HostOf(st->store->LocalAddress()) : bind;
    // Each Init of the job gets its own key space, so init/shutdown/init works. The count
    // lives under the job id: an elastic job gives each generation its own id, so ranks
    // that were different processes (or none) before still agree on the count.
    const std::string& job_id = c.String("TFRING_JOB_ID");
    int64_t generation = 0;
    TFRING_RETURN_IF_ERROR(st->store->Add(job_id + "/generation/rank" + std::to_string(st->rank), 1,
                                          &generation));
    opt.session = job_id + "/init" + std::to_string(generation);
    PrefixStore prefixed(opt.session + "/", std::shared_ptr<Store>(st->store.get(), [](Store*) {}));
    TFRING_RETURN_IF_ERROR(Communicator::Create(opt, prefixed, &st->comm)
                               .WithContext("tfring init on rank " + std::to_string(st->rank)));
  } else {
    MemoryStore local;  // size 1: no peers, nothing to exchange
    TFRING_RETURN_IF_ERROR(Communicator::Create(opt, local, &st->comm));
  }
  // More ranks on this host than CPUs they may run on (the union of their affinity masks):
  // a spinning rank holds the core that the rank it waits for needs (measured, 3 ranks on
  // 2 cores: 8-byte allreduce 348 us spinning, 142 us not). Ranks bound to a core each do
  // spin: the peer waited for has its own core (np=2 bound: 94 us not spinning, 26 us).
  if (!c.IsSet("TFRING_SPIN_US") && st->comm->host_cpus() > 0 && st->local_size > st->comm->host_cpus()) {
    TFRING_LOG(LogLevel::kInfo, "runtime", "TFRING_LOCAL_SIZE=" << st->local_size << " ranks share "
                                               << st->comm->host_cpus() << " CPUs: waits do not spin "
                                               << "(TFRING_SPIN_US=0; set it to override)");
    st->spin_us = 0;
    SetSocketSpinMicros(0);
  }
  st->control = std::make_unique<ControlChannel>(st->rank, st->size, st->comm.get(), st->timeout_s, &st->stats);
  // Rank 0 returns only once every rank is done with the store: with TFRING_STORE_SERVE the
  // store lives in rank 0, and a rank 0 that finished init and exited at once would cut off
  // ranks still waiting for a store reply (a key written in the store is not yet a reply
  // received, so the hello travels on the control channel).
  TFRING_RETURN_IF_ERROR(st->control->Greet(c.Float("TFRING_START_TIMEOUT_S"))
                             .WithContext("tfring init on rank " + std::to_string(st->rank)));
  if (st->rank == 0) {
    st->coordinator = std::make_unique<Coordinator>(st->size, c.Int("TFRING_FUSION_THRESHOLD"),
                                                    static_cast<size_t>(c.Int("TFRING_CACHE_CAPACITY")),
                                                    &st->process_sets);
    st->stall_inspector = std::make_unique<StallInspector>(
        c.Float("TFRING_STALL_WARNING_S"), c.Float("TFRING_STALL_SHUTDOWN_S"), &st->stats);
  }
  st->cpu_backend = std::make_unique<CpuBackend>(st->MakeBackendContext());
  st->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (st->wake_fd < 0) return Status::Internal("eventfd failed");
  if (st->rank == 0 && !c.String("TFRING_TIMELINE").empty()) {
    TFRING_RETURN_IF_ERROR(st->timeline.Start(c.String("TFRING_TIMELINE")));
  }
  State* raw = st.get();
  std::vector<LivenessPeer> watched;
  for (int p = 0; p < st->size; ++p) {
    if (p != st->rank && (st->rank == 0 || p == 0)) {
      watched.push_back(LivenessPeer{p, st->comm->hostname_of(p), &st->comm->heartbeat(p)});
    }
  }
  st->liveness = std::make_unique<PeerLiveness>(st->rank, std::move(watched), opt.peer_timeout_s,
                                                [raw](int, const Status& lost) { raw->OnPeerLost(lost); });
  st->liveness->Start();
  st->thread = std::thread([raw] { raw->Loop(); });
  TFRING_LOG(LogLevel::kInfo, "runtime", "initialized rank " << st->rank << " of " << st->size);
  state_ = std::move(st);
  return Status::OK();
}

Status Runtime::Shutdown(const std::string& reason) {
  std::shared_ptr<State> st;
  {
    std::lock_guard<std::mutex> lock(mu_);
    st.swap(state_);
  }
  if (!st) return Status::OK();
  {
    std::lock_guard<std::mutex> lock(st->mu);
    st->stop_reason = reason;
  }
  st->RequestStop();
  double limit = st->config.Float("TFRING_SHUTDOWN_TIMEOUT_S");
  {
    std::unique_lock<std::mutex> lock(st->mu);
    st->stopped_cv.wait_for(lock, std::chrono::duration<double>(limit),
                            [&] { return st->stopped.load(); });
  }
  if (st->stopped.load()) {
    st->thread.join();
    return Status::OK();
  }
  // The background thread is stuck (e.g. inside a transfer): abort its sockets and give it
  // one more moment; never hang the caller.
  if (st->comm) st->comm->Abort();
  {
    std::unique_lock<std::mutex> lock(st->mu);
    st->stopped_cv.wait_for(lock, std::chrono::seconds(2), [&] { return st->stopped.load(); });
  }
  if (st->stopped.load()) {
    st->thread.join();
    return Status::OK();
  }
  st->thread.detach();
  // Keep the state alive for the detached thread.
  new std::shared_ptr<State>(st);
  return Status::Timeout("tfring background thread did not stop within " + std::to_string(limit) +
                         " s (TFRING_SHUTDOWN_TIMEOUT_S); it was detached");
}

bool Runtime::initialized() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_ != nullptr;
}

#define TFRING_STATE_GETTER(name, field, fallback) \
  int Runtime::name() const {                      \
    std::lock_guard<std::mutex> lock(mu_);         \
    return state_ ? state_->field : fallback;      \
  }
TFRING_STATE_GETTER(rank, rank, -1)
TFRING_STATE_GETTER(size, size, -1)
TFRING_STATE_GETTER(local_rank, local_rank, -1)
TFRING_STATE_GETTER(local_size, local_size, -1)
TFRING_STATE_GETTER(cross_rank, cross_rank, -1)
TFRING_STATE_GETTER(cross_size, cross_size, -1)
TFRING_STATE_GETTER(spin_us, spin_us, 0)
#undef TFRING_STATE_GETTER

int Runtime::homogeneous() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!state_) return -1;
  return !state_->comm || state_->comm->homogeneous() ? 1 : 0;
}

std::map<std::string, ParamValue> Runtime::config_values() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_ ? state_->config.values() : std::map<std::string, ParamValue>{};
}

std::shared_ptr<Runtime::State> Runtime::CurrentState() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

RuntimeStats Runtime::stats() const {
  std::shared_ptr<State> st = CurrentState();
  if (!st) return RuntimeStats{};
  return st->stats.Snapshot();
}

Status Runtime::Health() const {
  std::shared_ptr<State> st = CurrentState();
  if (!st) return Status::Precondition("tfring is not initialized (or was shut down)");
  std::lock_guard<std::mutex> lock(st->mu);
  if (st->broken) return st->fatal;
  if (!st->peer_lost.ok()) return st->peer_lost;  // the background thread is about to fail with it
  return Status::OK();
}

Status Runtime::AddProcessSet(int32_t id, const std::vector<int32_t>& ranks) {
  std::shared_ptr<State> st = CurrentState();
  if (!st) return Status::Precondition("tfring is not initialized: call tfring.init() first");
  return st->process_sets.Add(id, ranks, st->size);
}

Status Runtime::RemoveProcessSet(int32_t id) {
  std::shared_ptr<State> st = CurrentState();
  if (!st) return Status::Precondition("tfring is not initialized: call tfring.init() first");
  return st->process_sets.Remove(id);
}

Status Runtime::ProcessSetMembers(int32_t id, std::vector<int32_t>* ranks) const {
  std::shared_ptr<State> st = CurrentState();
  if (!st) return Status::Precondition("tfring is not initialized: call tfring.init() first");
  if (id == 0) {
    ranks->resize(static_cast<size_t>(st->size));
    for (int r = 0; r < st->size; ++r) (*ranks)[static_cast<size_t>(r)] = r;
    return Status::OK();
  }
  if (!st->process_sets.Members(id, ranks)) {
    return Status::InvalidArgument("process set id " + std::to_string(id) + " is not registered");
  }
  return Status::OK();
}

Status Runtime::ProcessSetPosition(int32_t id, int* rank, int* size) const {
  std::vector<int32_t> members;
  TFRING_RETURN_IF_ERROR(ProcessSetMembers(id, &members));
  const int me = this->rank();
  const auto it = std::find(members.begin(), members.end(), me);
  *rank = it == members.end() ? -1 : static_cast<int>(it - members.begin());
  *size = static_cast<int>(members.size());
  return Status::OK();
}

Status Runtime::StartTimeline(const std::string& path) {
  std::shared_ptr<State> st = CurrentState();
  if (!st) return Status::Precondition("tfring is not initialized: call tfring.init() first");
  return st->rank == 0 ? st->timeline.Start(path) : Status::OK();
}

Status Runtime::StopTimeline() {
  std::shared_ptr<State> st = CurrentState();
  if (st) st->timeline.Stop();
  return Status::OK();
}

Status Runtime::Enqueue(Submission submission) {
  std::vector<Submission> group;
  group.push_back(std::move(submission));
  return EnqueueGroup(std::move(group));
}

Status Runtime::EnqueueGroup(std::vector<Submission> group) {
  std::shared_ptr<State> st = CurrentState();
  if (!st) {
    return Status::Precondition(
        "tfring is not initialized (or was shut down): call tfring.init() (hvd.init()) first");
  }
  return st->Submit(std::move(group));
}

Status Runtime::State::Submit(std::vector<Submission> group) {
  for (auto& s : group) TFRING_RETURN_IF_ERROR(ValidateSubmission(s, rank, size, process_sets));
  {
    std::lock_guard<std::mutex> lock(mu);
    if (broken) return fatal;
    if (stop_requested.load()) return Status::Precondition("tfring is shutting down");
    std::set<std::string> names;
    for (const auto& s : group) {
      const std::string& name = s.request.name;
      if (in_flight.count(name) || !names.insert(name).second) {
        return Status::InvalidArgument(
            "a collective named '" + name + "' is already in flight on rank " +
            std::to_string(rank) +
            "; concurrent collectives need distinct names (pass name=...)");
      }
    }
    for (auto& s : group) {
      in_flight.insert(s.request.name);
      queue.push_back(std::move(s));
    }
    queued.store(queue.size(), std::memory_order_seq_cst);
  }
  if (!spinning.load(std::memory_order_seq_cst)) Wake();
  return Status::OK();
}

void Runtime::State::Wake() {
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd, &one, sizeof(one));
  (void)ignored;
}

void Runtime::State::OnPeerLost(const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (broken || !peer_lost.ok()) return;
    peer_lost = status;
  }
  // Wakes a transfer blocked on the lost rank; Loop() then fails with `status` and tells the
  // other ranks on the still open control channel.
  comm->AbortTransfers();
  Wake();
}

void Runtime::State::RequestStop() {
  stop_requested.store(true);
  Wake();
}

}  // namespace tfring
