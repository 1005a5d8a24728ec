#include "runtime/runtime.h"

#include <algorithm>

#include "runtime/job.h"

namespace tfring {
namespace {

Status NotInitialized() { return Status::Precondition("tfring is not initialized: call tfring.init() first"); }

}  // namespace

Runtime::Runtime() = default;

Runtime::~Runtime() { Shutdown(); }

Runtime& Runtime::Global() {
  // Leaked on purpose: the background thread may still run during static destruction.
  static Runtime* runtime = new Runtime();
  return *runtime;
}

Status Runtime::Init(const std::map<std::string, std::string>& overrides, bool read_env) {
  std::lock_guard<std::mutex> lock(mu_);
  if (job_) {
    return Status::Precondition("tfring is already initialized (rank " + std::to_string(job_->identity().rank) +
                                "); call shutdown() before initializing again");
  }
  Config config;
  TFRING_RETURN_IF_ERROR(Config::Load(overrides, read_env, &config));
  return Job::Start(std::move(config), &job_);
}

Status Runtime::Shutdown(const std::string& reason) {
  std::shared_ptr<Job> job;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job.swap(job_);
  }
  if (!job) return Status::OK();
  if (job->StopAndJoin(reason)) return Status::OK();
  new std::shared_ptr<Job>(job);  // keeps the job alive for its detached thread
  return Status::Timeout("tfring background thread did not stop within " +
                         std::to_string(job->config().settings().shutdown_timeout_s) +
                         " s (TFRING_SHUTDOWN_TIMEOUT_S); it was detached");
}

bool Runtime::initialized() const {
  std::lock_guard<std::mutex> lock(mu_);
  return job_ != nullptr;
}

#define TFRING_IDENTITY_GETTER(name)                      \
  int Runtime::name() const {                             \
    std::lock_guard<std::mutex> lock(mu_);                \
    return job_ ? job_->identity().name : -1;             \
  }
TFRING_IDENTITY_GETTER(rank)
TFRING_IDENTITY_GETTER(size)
TFRING_IDENTITY_GETTER(local_rank)
TFRING_IDENTITY_GETTER(local_size)
TFRING_IDENTITY_GETTER(cross_rank)
TFRING_IDENTITY_GETTER(cross_size)
#undef TFRING_IDENTITY_GETTER

int Runtime::spin_us() const {
  std::lock_guard<std::mutex> lock(mu_);
  return job_ ? job_->spin_us() : 0;
}

int Runtime::homogeneous() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!job_) return -1;
  return job_->homogeneous() ? 1 : 0;
}

std::map<std::string, ParamValue> Runtime::config_values() const {
  std::lock_guard<std::mutex> lock(mu_);
  return job_ ? job_->config().values() : std::map<std::string, ParamValue>{};
}

std::shared_ptr<Job> Runtime::CurrentJob() const {
  std::lock_guard<std::mutex> lock(mu_);
  return job_;
}

RuntimeStats Runtime::stats() const {
  std::shared_ptr<Job> job = CurrentJob();
  return job ? job->stats().Snapshot() : RuntimeStats{};
}

Status Runtime::Health() const {
  std::shared_ptr<Job> job = CurrentJob();
  if (!job) return Status::Precondition("tfring is not initialized (or was shut down)");
  return job->Health();
}

Status Runtime::AddProcessSet(int32_t id, const std::vector<int32_t>& ranks) {
  std::shared_ptr<Job> job = CurrentJob();
  if (!job) return NotInitialized();
  return job->process_sets().Add(id, ranks, job->identity().size);
}

Status Runtime::RemoveProcessSet(int32_t id) {
  std::shared_ptr<Job> job = CurrentJob();
  if (!job) return NotInitialized();
  return job->process_sets().Remove(id);
}

Status Runtime::ProcessSetMembers(int32_t id, std::vector<int32_t>* ranks) const {
  std::shared_ptr<Job> job = CurrentJob();
  if (!job) return NotInitialized();
  if (id == 0) {
    ranks->resize(static_cast<size_t>(job->identity().size));
    for (int r = 0; r < job->identity().size; ++r) (*ranks)[static_cast<size_t>(r)] = r;
    return Status::OK();
  }
  if (!job->process_sets().Members(id, ranks)) {
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
  std::shared_ptr<Job> job = CurrentJob();
  if (!job) return NotInitialized();
  return job->identity().rank == 0 ? job->timeline().Start(path) : Status::OK();
}

Status Runtime::StopTimeline() {
  std::shared_ptr<Job> job = CurrentJob();
  if (job) job->timeline().Stop();
  return Status::OK();
}

bool Runtime::TimelineActive() const {
  std::shared_ptr<Job> job = CurrentJob();
  return job && job->timeline().active();
}

void Runtime::TimelineSpans(const std::string& tensor, std::initializer_list<TimelineSpanTimes> spans) {
  std::shared_ptr<Job> job = CurrentJob();
  if (!job || !job->timeline().active()) return;
  for (const TimelineSpanTimes& s : spans) job->timeline().Span(tensor, s.what, s.begin, s.end);
}

Status Runtime::Enqueue(Submission submission) {
  std::vector<Submission> group;
  group.push_back(std::move(submission));
  return EnqueueGroup(std::move(group));
}

Status Runtime::EnqueueGroup(std::vector<Submission> group) {
  std::shared_ptr<Job> job = CurrentJob();
  if (!job) {
    return Status::Precondition(
        "tfring is not initialized (or was shut down): call tfring.init() (hvd.init()) first");
  }
  return job->Submit(std::move(group));
}

}  // namespace tfring
