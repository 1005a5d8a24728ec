#include "control/stall_inspector.h"

#include "base/logging.h"

namespace tfring {
namespace {

constexpr double kStallCheckPeriodS = 1.0;

}  // namespace

StallInspector::StallInspector(double warning_s, double shutdown_s, StatsRecorder* stats)
    : warning_s_(warning_s), shutdown_s_(shutdown_s), stats_(stats) {}

Status StallInspector::Inspect(const Coordinator& coordinator) {
  const auto now = std::chrono::steady_clock::now();
  if (std::chrono::duration<double>(now - last_check_).count() < kStallCheckPeriodS) return Status::OK();
  last_check_ = now;
  if (warning_s_ <= 0 && shutdown_s_ <= 0) return Status::OK();
  // Inspect from the smaller enabled limit: a shutdown limit below the warning one fires.
  double threshold = warning_s_ > 0 ? warning_s_ : shutdown_s_;
  if (shutdown_s_ > 0 && shutdown_s_ < threshold) threshold = shutdown_s_;
  std::set<std::string> still;
  std::string fatal_list;
  for (const auto& s : coordinator.Stalled(threshold)) {
    const bool warn = warning_s_ > 0 && s.waited_s >= warning_s_;
    if (warn) still.insert(s.name);
    if (warn && !warned_.count(s.name)) {
      stats_->Update([](RuntimeStats& st) { ++st.stall_warnings; });
      TFRING_LOG(LogLevel::kWarning, "stall",
                 "tensor " << DescribeStall(s)
                           << ". Ranks are running different code, or one is stuck or slow. "
                              "(TFRING_STALL_WARNING_S; TFRING_STALL_SHUTDOWN_S turns this into an error)");
    }
    if (shutdown_s_ > 0 && s.waited_s >= shutdown_s_) {
      fatal_list += (fatal_list.empty() ? "" : "; ") + DescribeStall(s);
    }
  }
  warned_.swap(still);
  if (fatal_list.empty()) return Status::OK();
  return Status::Timeout("stalled longer than TFRING_STALL_SHUTDOWN_S=" + std::to_string(shutdown_s_) +
                         " s: " + fatal_list);
}

}  // namespace tfring
