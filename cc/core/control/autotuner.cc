#include "control/autotuner.h"

#include <algorithm>

#include "base/logging.h"

namespace tfring {

AutotuneOptions AutotuneOptions::FromConfig(const Config& config) {
  const Settings& s = config.settings();
  AutotuneOptions o;
  o.warmup_samples = static_cast<int>(s.autotune_warmup_samples);
  o.steps_per_sample = static_cast<int>(s.autotune_steps_per_sample);
  o.max_samples = static_cast<int>(s.autotune_max_samples);
  o.min_gain = s.autotune_min_gain;
  o.log_path = s.autotune_log;
  o.several_hosts = s.cross_size > 1;
  return o;
}

namespace {

std::vector<CoordinateSearch::Dimension> Dimensions(const Config& config, bool several_hosts) {
  std::vector<CoordinateSearch::Dimension> dims;
  const TunedValues start = TunedValuesOf(config.settings());
  const auto& tunables = Tunables();
  for (size_t i = 0; i < tunables.size(); ++i) {
    CoordinateSearch::Dimension d;
    d.candidates = tunables[i].candidates;
    d.start = start[i];
    d.fixed = config.IsSet(tunables[i].setting) || (tunables[i].several_hosts_only && !several_hosts);
    dims.push_back(d);
  }
  return dims;
}

// A tensor's key in a sample's step counts: its name, or its cache id when the response
// carries only that.
std::string StepKey(const Response::Tensor& t) { return t.name.empty() ? "#" + std::to_string(t.cache_id) : t.name; }

}  // namespace

Autotuner::Autotuner(const Config& config, const AutotuneOptions& options)
    : options_(options),
      search_(Dimensions(config, options.several_hosts), options.max_samples, options.min_gain) {
  std::string fixed;
  for (const auto& t : Tunables()) {
    if (config.IsSet(t.setting)) fixed += std::string(fixed.empty() ? "" : ", ") + t.setting;
  }
  TFRING_LOG(LogLevel::kInfo, "runtime", "autotune: " << options_.warmup_samples << " warm-up samples, then up to "
                                             << options_.max_samples << " trials of "
                                             << options_.steps_per_sample << " steps; set explicitly, never tuned: "
                                             << (fixed.empty() ? "none" : fixed));
  if (options_.log_path.empty()) return;
  log_.open(options_.log_path, std::ios::out | std::ios::trunc);
  if (!log_.good()) {
    TFRING_LOG(LogLevel::kWarning, "runtime", "autotune: cannot write TFRING_AUTOTUNE_LOG=" << options_.log_path);
    return;
  }
  log_ << "trial";
  for (const auto& t : Tunables()) log_ << "," << t.setting;
  log_ << ",score_bytes_per_s\n";
  log_.flush();
}

std::optional<TunedValues> Autotuner::Observe(const std::vector<Response>& responses, Clock::time_point now) {
  if (finished_) return std::nullopt;
  if (!sample_start_) sample_start_ = now;
  // While settling, the step in progress is the first under new values: it ends at its
  // second message of some tensor, and is not scored.
  const int steps_in_sample = settling_ ? 1 : options_.steps_per_sample;
  bool ends = false;
  int64_t bytes = 0;
  for (const auto& r : responses) {
    if (r.kind != Response::Kind::kCollective || r.attrs.op != OpType::kAllreduce) continue;
    for (size_t i = 0; i < r.tensors.size(); ++i) {
      const Response::Tensor& t = r.tensors[i];
      if (++counts_[StepKey(t)] > steps_in_sample) ends = true;
      if (i < r.sizes.size()) bytes += r.sizes[i];
    }
  }
  if (!ends) {
    bytes_ += bytes;
    return std::nullopt;
  }
  if (settling_) {  // the settling step is over: the trial's sample starts with this message
    settling_ = false;
    RestartSample(responses, bytes, now);
    return std::nullopt;
  }
  // This message starts the next sample: its tensors are that sample's first step.
  const TunedValues before = search_.Current();
  EndSample(now);
  RestartSample(responses, bytes, now);
  if (search_.done()) {
    finished_ = true;
    WriteRow("best", search_.Best(), search_.best_score());
    TFRING_LOG(LogLevel::kInfo, "runtime", "autotune: best after " << search_.trials() << " trials ("
                                               << search_.best_score() << " bytes/s): "
                                               << DescribeTunedValues(search_.Best()));
    return search_.Best();
  }
  if (search_.Current() == before) return std::nullopt;
  settling_ = true;
  return search_.Current();
}

void Autotuner::RestartSample(const std::vector<Response>& responses, int64_t bytes, Clock::time_point now) {
  counts_.clear();
  for (const auto& r : responses) {
    if (r.kind != Response::Kind::kCollective || r.attrs.op != OpType::kAllreduce) continue;
    for (const auto& t : r.tensors) ++counts_[StepKey(t)];
  }
  bytes_ = bytes;
  sample_start_ = now;
}

void Autotuner::EndSample(Clock::time_point now) {
  const double seconds = std::chrono::duration<double>(now - *sample_start_).count();
  const double score = seconds > 0 ? static_cast<double>(bytes_) / seconds : 0;
  if (samples_++ < options_.warmup_samples) return;
  const TunedValues tried = search_.Current();
  WriteRow(std::to_string(search_.trials()), tried, score);
  TFRING_LOG(LogLevel::kInfo, "runtime", "autotune: trial " << search_.trials() << " (" << score
                                             << " bytes/s): " << DescribeTunedValues(tried));
  search_.Report(score);
}

void Autotuner::WriteRow(const std::string& label, const TunedValues& values, double score) {
  if (!log_.is_open() || !log_.good()) return;
  log_ << label;
  for (double v : values) log_ << "," << TunedValueText(v);
  log_ << "," << TunedValueText(std::max(0.0, score)) << "\n";
  log_.flush();
}

}  // namespace tfring
