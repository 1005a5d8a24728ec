#include "runtime/job.h"

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

#include "base/init_trace.h"
#include "base/logging.h"
#include "base/malloc_policy.h"
#include "base/spin_budget.h"
#include "base/thread_name.h"
#include "rendezvous/memory_store.h"
#include "runtime/validate_submission.h"

namespace tfring {
namespace {

constexpr double kRefineCauseWindowS = 0.3;
constexpr int kIdleWakeMs = 1000;  // the stall inspector's period
// The longest the background thread keeps spinning while the CPU it yields is busy with
// other threads (SpinBudget; at least TFRING_SPIN_US): longer than a tf.function call's
// own overhead (~100 us), shorter than a training step's compute.
constexpr auto kMaxYieldingSpin = std::chrono::milliseconds(1);

std::string HostOf(const std::string& host_port) {
  auto colon = host_port.rfind(':');
  std::string h = host_port.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[') h = h.substr(1, h.size() - 2);
  return h;
}

// How long a relay may hold a cache id that part of its subtree submitted before rank 0
// hears rank by rank who did (RequestRelay): a second, or a quarter of the stall limits,
// so that the stall inspector always knows the missing ranks in time.
double RelayDetailAfter(const Settings& s) {
  double after = 1.0;
  for (double limit : {s.stall_warning_s, s.stall_shutdown_s}) {
    if (limit > 0) after = std::min(after, limit / 4);
  }
  return after;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Start: the rendezvous, as a list of steps.

Status Job::Start(Config config, std::shared_ptr<Job>* out) {
  std::shared_ptr<Job> job(new Job());
  job->config_ = std::move(config);
  job->ReadIdentity();
  LogInitPhase("start");
  job->ApplyMallocPolicy();
  TFRING_RETURN_IF_ERROR(job->ConnectCommunicator());
  job->TuneSpinning();
  TFRING_RETURN_IF_ERROR(job->BuildWorkers());
  LogInitPhase("greeted");
  job->StartLivenessWatch();
  Job* raw = job.get();
  job->thread_ = std::thread([raw] {
    NameThisThread("tfring-loop");
    raw->Loop();
  });
  TFRING_LOG(LogLevel::kInfo, "runtime", "initialized rank " << job->id_.rank << " of " << job->id_.size);
  *out = std::move(job);
  return Status::OK();
}

Job::~Job() {
  if (liveness_) liveness_->Stop();  // its callback writes wake_fd_, closed after this
}

void Job::ApplyMallocPolicy() {
  if (!config_.settings().keep_freed_memory) return;
  const MallocPolicyResult result = KeepFreedMemory(kKeepFreedTrimBytes, kKeepFreedMmapBytes);
  TFRING_LOG(LogLevel::kDebug, "runtime", "malloc: " << result.reason << " (TFRING_KEEP_FREED_MEMORY)");
}

void Job::ReadIdentity() {
  const Settings& s = config_.settings();
  LogSpec log_spec;
  std::string log_error;
  ParseLogSpec(s.log_level, &log_spec, &log_error);  // validated by Config::Load
  SetLogSpec(log_spec);
  id_.rank = static_cast<int>(s.rank);
  id_.size = static_cast<int>(s.size);
  id_.local_rank = static_cast<int>(s.local_rank);
  id_.local_size = static_cast<int>(s.local_size);
  id_.cross_rank = static_cast<int>(s.cross_rank);
  id_.cross_size = static_cast<int>(s.cross_size);
  cycle_s_ = s.cycle_time_ms / 1000.0;
  SetLogRank(id_.rank);
  spin_us_ = static_cast<int>(s.spin_us);
  // init(nccl_library=...) reaches the loader
  SetGpuLibraryPath("TFRING_NCCL_LIBRARY", s.nccl_library);
  SetGpuLibraryPath("TFRING_CUDA_RUNTIME_LIBRARY", s.cuda_runtime_library);
}

// Reaches the job's store (serving it on rank 0 with TFRING_STORE_SERVE=1), then builds the
// communicator under this init's own key space. A job of one rank needs neither.
Status Job::ConnectCommunicator() {
  const Config& c = config_;
  const Settings& s = c.settings();
  CommunicatorOptions opt = CommunicatorOptions::FromConfig(c);
  if (id_.size == 1) {
    return Communicator::Create(opt, std::make_shared<MemoryStore>(), &comm_);  // no peers, nothing to exchange
  }
  std::string host;
  int port = 0;
  TFRING_RETURN_IF_ERROR(ParseHostPort(s.store_addr, "TFRING_STORE_ADDR", &host, &port));
  if (id_.rank == 0 && s.store_serve) {
    // No launcher: rank 0 serves the store the others were told about. IPv4 wildcard
    // unless the address is an IPv6 literal (dual stack then takes IPv4 too).
    const std::string bind = c.IsSet("TFRING_BIND_ADDR") ? s.bind_addr
                             : host.find(':') != std::string::npos ? "::" : "0.0.0.0";
    store_server_ = std::make_unique<TcpStoreServer>();
    TFRING_RETURN_IF_ERROR(store_server_->Start(bind, port, opt.secret)
                               .WithContext("rank 0 serving the job's store on " + bind + ":" +
                                            std::to_string(port) + " (TFRING_STORE_SERVE=1)"));
    TFRING_LOG(LogLevel::kInfo, "store", "rank 0 serves the job's store on " << bind << ":" << port);
  }
  TFRING_RETURN_IF_ERROR(TcpStoreClient::Connect(host, port, opt.secret, opt.start_timeout_s, opt.timeout_s, &store_));
  LogInitPhase("store");
  // The data listener binds TFRING_BIND_ADDR when set. Other ranks are told that address,
  // except for a wildcard (0.0.0.0, ::), which nobody can connect to: then they are told
  // the local address that reached the store, as without the setting.
  const std::string bind = c.IsSet("TFRING_BIND_ADDR") ? s.bind_addr : "";
  const bool wildcard = bind == "0.0.0.0" || bind == "::" || bind == "[::]";
  opt.bind_host = bind;
  opt.advertise_host = (bind.empty() || wildcard) ? HostOf(store_->LocalAddress()) : bind;
  // Each Init of the job gets its own key space, so init/shutdown/init works. The count
  // lives under the job id: an elastic job gives each generation its own id, so ranks
  // that were different processes (or none) before still agree on the count.
  const std::string& job_id = s.job_id;
  int64_t generation = 0;
  TFRING_RETURN_IF_ERROR(store_->Add(job_id + "/generation/rank" + std::to_string(id_.rank), 1, &generation));
  opt.session = job_id + "/init" + std::to_string(generation);
  // The communicator keeps this view to read peers' cards on first use; store_ outlives it
  // (comm_ is declared after store_, so destroyed first).
  auto prefixed = std::make_shared<PrefixStore>(opt.session + "/", std::shared_ptr<Store>(store_.get(), [](Store*) {}));
  return Communicator::Create(opt, std::move(prefixed), &comm_).WithContext("tfring init on rank " + std::to_string(id_.rank));
}

// More ranks on this host than CPUs they may run on (the union of their affinity masks):
// a spinning rank holds the core that the rank it waits for needs (measured, 3 ranks on
// 2 cores: 8-byte allreduce 348 us spinning, 142 us not). Ranks bound to a core each do
// spin: the peer waited for has its own core (np=2 bound: 94 us not spinning, 26 us).
void Job::TuneSpinning() {
  // Counted per machine, not per host id: emulated hosts (TFRING_CROSS_RANK on one machine)
  // share its CPUs, and their ranks spinning starved each other (8 ranks on 2 cores as 4
  // hosts of 2: 8-byte allreduce 15-17x the 2x1 latency spinning, 5.4x not).
  const int ranks = std::max(id_.local_size, comm_->machine_ranks());
  if (config_.IsSet("TFRING_SPIN_US") || !comm_->facts().Outnumbered(ranks)) return;
  const int cpus = comm_->facts().usable_cpus();
  TFRING_LOG(LogLevel::kInfo, "runtime", ranks << " ranks on this machine share " << cpus
                                             << " CPUs: waits do not spin (TFRING_SPIN_US=0; set it to override)");
  spin_us_ = 0;
  comm_->SetSpinMicros(0);
}

// The control channel (greeted: rank 0 returns only once every rank is done with the
// store), rank 0's coordinator and stall inspector, the executor and the negotiator.
Status Job::BuildWorkers() {
  const Settings& s = config_.settings();
  const double timeout_s = s.timeout_s;
  control_ = std::make_unique<ControlChannel>(id_.rank, id_.size, comm_.get(), timeout_s, &stats_);
  // With TFRING_STORE_SERVE the store lives in rank 0, and a rank 0 that finished init and
  // exited at once would cut off ranks still waiting for a store reply (a key written in
  // the store is not yet a reply received, so the hello travels on the control channel).
  TFRING_RETURN_IF_ERROR(control_->Greet(s.start_timeout_s)
                             .WithContext("tfring init on rank " + std::to_string(id_.rank)));
  std::unique_ptr<Coordinator> coordinator;
  std::unique_ptr<StallInspector> stall_inspector;
  std::unique_ptr<Autotuner> autotuner;
  if (id_.rank == 0 && s.autotune) {
    autotuner = std::make_unique<Autotuner>(config_, AutotuneOptions::FromConfig(config_));
  }
  if (id_.rank == 0) {
    coordinator = std::make_unique<Coordinator>(id_.size, s.fusion_threshold,
                                                static_cast<size_t>(s.cache_capacity), &process_sets_);
    stall_inspector = std::make_unique<StallInspector>(s.stall_warning_s,
                                                       s.stall_shutdown_s, &stats_);
  }
  Executor::Wiring ew;
  ew.rank = id_.rank;
  ew.size = id_.size;
  ew.config = &config_;
  ew.store = store_.get();
  ew.comm = comm_.get();
  ew.timeline = &timeline_;
  ew.stats = &stats_;
  ew.events = this;
  executor_ = std::make_unique<Executor>(ew);
  Negotiator::Wiring nw;
  nw.rank = id_.rank;
  nw.cycle_s = cycle_s_;
  nw.config = &config_;
  nw.tree = &comm_->control_tree();
  nw.relay_detail_after_s = RelayDetailAfter(s);
  nw.control_hold_s = s.control_hold_us / 1e6;
  nw.control_hold_max_s = s.control_hold_max_us / 1e6;
  nw.control = control_.get();
  nw.executor = executor_.get();
  nw.timeline = &timeline_;
  nw.stats = &stats_;
  nw.events = this;
  negotiator_ = std::make_unique<Negotiator>(nw, std::move(coordinator), std::move(stall_inspector),
                                             std::move(autotuner));
  wake_fd_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_fd_.valid()) return Status::Internal("eventfd failed");
  if (id_.rank == 0 && !s.timeline.empty()) {
    TFRING_RETURN_IF_ERROR(timeline_.Start(s.timeline));
  }
  return Status::OK();
}

// Every rank watches its two ring neighbours (Communicator::HeartbeatPeers); a verdict
// travels on around the ring (liveness.h).
void Job::StartLivenessWatch() {
  std::vector<LivenessPeer> watched;
  for (int p : Communicator::HeartbeatPeers(id_.rank, id_.size)) {
    watched.push_back(LivenessPeer{p, comm_->hostname_of(p), &comm_->heartbeat(p),
                                   PeerLiveness::MatesOf(p, comm_->host_ids())});
  }
  liveness_ = std::make_unique<PeerLiveness>(id_.rank, std::move(watched), config_.settings().peer_timeout_s,
                                             [this](int, const Status& lost) { OnPeerLost(lost); });
  liveness_->Start();
}

// ---------------------------------------------------------------------------------------
// User threads and the liveness thread.

Status Job::Submit(std::vector<Submission> group) {
  for (auto& s : group) TFRING_RETURN_IF_ERROR(ValidateSubmission(s, id_.rank, id_.size, process_sets_));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_) return fatal_;
    if (stop_requested_.load()) return Status::Precondition("tfring is shutting down");
    std::set<std::string> names;
    for (const auto& s : group) {
      const std::string& name = s.request.name;
      if (in_flight_.count(name) || !names.insert(name).second) {
        return Status::InvalidArgument("a collective named '" + name + "' is already in flight on rank " +
                                       std::to_string(id_.rank) +
                                       "; concurrent collectives need distinct names (pass name=...)");
      }
    }
    for (auto& s : group) {
      in_flight_.insert(s.request.name);
      queue_.push_back(std::move(s));
    }
    queued_.store(queue_.size(), std::memory_order_seq_cst);
  }
  if (!spinning_.load(std::memory_order_seq_cst)) Wake();
  return Status::OK();
}

Status Job::Health() {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_) return fatal_;
  if (!peer_lost_.ok()) return peer_lost_;  // the background thread is about to fail with it
  return Status::OK();
}

void Job::Wake() {
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd_.get(), &one, sizeof(one));
  (void)ignored;
}

void Job::OnPeerLost(const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_ || !peer_lost_.ok()) return;
    peer_lost_ = status;
  }
  // Wakes a transfer blocked on the lost rank; Loop() then fails with `status` and tells the
  // other ranks on the still open control channel.
  comm_->AbortTransfers();
  Wake();
}

void Job::RequestStop(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_reason_ = reason;
  }
  stop_requested_.store(true);
  Wake();
}

bool Job::StopAndJoin(const std::string& reason) {
  RequestStop(reason);
  auto wait_stopped = [this](double seconds) {
    std::unique_lock<std::mutex> lock(mu_);
    return stopped_cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return stopped_.load(); });
  };
  bool ended = wait_stopped(config_.settings().shutdown_timeout_s);
  if (!ended) {
    // The background thread is stuck (e.g. inside a transfer): abort its sockets and give
    // it one more moment; never hang the caller.
    comm_->Abort();
    ended = wait_stopped(2.0);
  }
  if (ended) {
    thread_.join();
  } else {
    thread_.detach();
  }
  return ended;
}

// ---------------------------------------------------------------------------------------
// The background thread.

void Job::Loop() {
  while (!stop_requested_.load()) {
    Status lost;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!broken_) lost = peer_lost_;
    }
    if (!lost.ok()) Fail(lost);
    if (!broken()) {
      DrainQueue();
      negotiator_->Negotiate();
      Status st = executor_->RunScheduled();
      if (!st.ok()) FailTransfer(st);
      if (!negotiator_->departure().ok()) {
        Fail(negotiator_->departure(), negotiator_->departure_origin());  // no-op if execution failed first
      }
    }
    WaitForWork();
  }
  Stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_.store(true);
  }
  stopped_cv_.notify_all();
}

bool Job::broken() {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}

void Job::Released(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_.erase(name);
}

void Job::DrainQueue() {
  std::deque<Submission> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch.swap(queue_);
    queued_.store(0, std::memory_order_seq_cst);
  }
  negotiator_->Announce(std::move(batch));
}

void Job::WaitForWork() {
  std::vector<pollfd> fds;
  fds.push_back(pollfd{wake_fd_.get(), POLLIN, 0});
  const bool is_broken = broken();
  if (!is_broken) control_->AppendPollFds(&fds);
  int64_t timeout_us = int64_t{kIdleWakeMs} * 1000;
  if (!is_broken) {
    const int64_t due_us = negotiator_->MicrosUntilDue();
    if (due_us >= 0) timeout_us = due_us;
  }
  // A short spin catches work that arrives within microseconds (a blocked thread takes
  // 30-120 us to wake on these machines). It yields between looks: the thread it waits for
  // (the caller, or TF's executor, bound to the same core) then runs at once instead of at
  // the end of this one's time slice (measured, np=2 bound, 8-byte allreduce: without the
  // yield a tenth of the calls slept and took ~100 us). Its budget is its own spinning
  // (SpinBudget): while those threads prepare the next call it stays awake, up to
  // kMaxYieldingSpin of wall time, and never past the negotiator's next due time.
  // Control messages in shared memory are invisible to poll(): looked at in the spin, and
  // announced sleeping around the blocking poll (the writer then rings on TCP).
  const bool watch_shm = !is_broken;
  auto work_pending = [&] {
    return queued_.load(std::memory_order_seq_cst) > 0 || (watch_shm && control_->ShmPending());
  };
  using Clock = SpinBudget::Clock;
  const auto start = Clock::now();
  const auto due = start + std::chrono::microseconds(timeout_us);
  const auto spin = std::chrono::microseconds(spin_us_);
  SpinBudget budget(start, spin, std::min<Clock::duration>(std::max<Clock::duration>(spin, kMaxYieldingSpin),
                                                           due - start));
  int rc = 0;
  if (spin_us_ > 0) spinning_.store(true, std::memory_order_seq_cst);
  bool more = true;
  do {
    if (work_pending()) break;
    rc = poll(fds.data(), fds.size(), 0);
    if (rc != 0) break;
    const auto yield_start = Clock::now();
    sched_yield();
    more = budget.Continue(yield_start, Clock::now());
  } while (more && !stop_requested_.load());
  spinning_.store(false, std::memory_order_seq_cst);
  if (work_pending()) return;  // a submission that saw `spinning_` did not write wake_fd_
  const int64_t left_us = std::chrono::duration_cast<std::chrono::microseconds>(due - Clock::now()).count();
  if (rc == 0 && left_us > 0) {
    rc = watch_shm ? control_->PollAsleep(&fds, left_us) : PollMicros(&fds, left_us);
  }
  if (rc > 0 && (fds[0].revents & POLLIN)) {
    uint64_t value;
    ssize_t ignored = ::read(wake_fd_.get(), &value, sizeof(value));
    (void)ignored;
  }
}

void Job::FailTransfer(const Status& status) {
  int origin = -1;
  Status cause = RefineCause(status, &origin);
  Fail(cause, origin);
}

Status Job::RefineCause(const Status& status, int* origin) {
  // A transfer failed. If a peer failed first, it (or rank 0 relaying for it) says why on
  // the control channel: prefer that root cause over "connection closed".
  // A local abort (shutdown() gave up waiting) has no remote cause to look for.
  *origin = -1;
  if (id_.size == 1 || comm_->aborted() ||
      (status.code() != ErrorCode::kPeerLost && status.code() != ErrorCode::kAborted)) {
    return status;
  }
  if (!negotiator_->departure().ok()) {  // a peer that shut down without doing its part: its notice says so
    *origin = negotiator_->departure_origin();
    return negotiator_->departure();
  }
  ControlMessage abort;
  int closed = -1;
  if (control_->AwaitAbort(kRefineCauseWindowS, &abort, &closed)) {
    *origin = abort.abort_origin;
    return Status(abort.abort_code, abort.abort_message);
  }
  if (closed >= 0) {
    return Status::PeerLost(comm_->DescribePeer(closed) + " is gone (its connection closed: the "
                            "process exited, crashed or was killed); while " + status.message());
  }
  return status;
}

void Job::Fail(const Status& failure, int origin) {
  Status status = failure;
  Status cause;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_) return;
    broken_ = true;
    // A lost peer is the root cause of whatever its silence made fail here (an aborted
    // transfer, a timeout).
    if (!peer_lost_.ok()) {
      status = peer_lost_;
      origin = -1;
    }
    failure_origin_ = origin >= 0 ? origin : id_.rank;
    cause = status.WithContext("tfring rank " + std::to_string(id_.rank));
    fatal_ = cause;
  }
  // A peer's orderly shutdown is how every job ends: not an error unless ops were pending.
  if (status.code() == ErrorCode::kPrecondition && executor_->idle()) {
    TFRING_LOG(LogLevel::kInfo, "runtime", cause.message());
  } else {
    TFRING_LOG(LogLevel::kError, "runtime", cause.message() << " " << executor_->PendingSummary());
  }
  if (id_.size > 1) {
    // The abort states the cause as every rank reports it: a rank other than 0 names itself
    // when the failure is its own; relays keep the origin's words.
    const int from = failure_origin_;
    const bool own = from == id_.rank && id_.rank != 0;
    control_->Tell(AbortMessage(from, status.code(),
                                (own ? "rank " + std::to_string(id_.rank) + " failed: " : "") + status.message()));
    if (liveness_) liveness_->Stop();  // the peers learn of the failure on the control channel
    comm_->Abort();
  }
  FailAllPending(cause);
}

void Job::FailAllPending(const Status& status) {
  std::deque<Submission> unsent;
  {
    std::lock_guard<std::mutex> lock(mu_);
    unsent.swap(queue_);
    queued_.store(0, std::memory_order_seq_cst);
  }
  executor_->FailAll(std::move(unsent), status);
}

void Job::Stop() {
  bool was_broken;
  std::string reason;
  {
    std::lock_guard<std::mutex> lock(mu_);
    was_broken = broken_;
    reason = stop_reason_;
    broken_ = true;
    fatal_ = Status::Precondition("tfring has been shut down on rank " + std::to_string(id_.rank));
  }
  if (!was_broken && id_.size > 1) {
    if (!reason.empty()) {
      // Leaving because of an error: every other rank fails with this cause.
      control_->Tell(AbortMessage(id_.rank, ErrorCode::kAborted,
                                  "rank " + std::to_string(id_.rank) + " exited: " + reason));
    } else if (id_.rank == 0) {
      control_->Tell(DepartureMessage(0));
    } else {
      ControlMessage bye;
      bye.kind = ControlKind::kShutdown;
      control_->Tell(bye);
    }
  }
  if (liveness_) liveness_->Stop();
  // Before the transports close: a clean end lets the GPU backend finalize its NCCL
  // communicators instead of aborting them.
  executor_->CloseBackends(!was_broken && reason.empty());
  comm_->Abort();
  FailAllPending(Status::Precondition("tfring was shut down on rank " + std::to_string(id_.rank) +
                                      " while this collective was pending"));
}

}  // namespace tfring
