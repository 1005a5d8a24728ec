// Autotuner: rank 0's tuning of the settings in tunables.h while the job runs (TFRING_AUTOTUNE).
//
// Rank 0's negotiator shows it every message of responses it is about to send (Observe). It
// measures samples of steps: a step is one allreduce of each tensor (a training step reduces
// every gradient once), so a sample ends when some tensor name has been allreduced
// TFRING_AUTOTUNE_STEPS_PER_SAMPLE times in it and comes back once more. A sample's score is
// the bytes allreduced in it per second of wall time on rank 0 (from the sample's first
// message to the message that ends it). The first TFRING_AUTOTUNE_WARMUP_SAMPLES samples are
// discarded; each later one scores one trial of the search (coordinate_search.h). When the
// search moves to another point, Observe returns it: the caller sends it with that message
// (ControlMessage::tuning) and every rank switches to it after that message's responses.
// The step after a switch settles the new values (fused groups and cached responses formed
// anew: measured at 2 x 4 ranks, a 5-step sample lost 10-35% to it) and is not scored: the
// trial's sample starts one step later.
// When the search ends, Observe returns the best point one last time and the autotuner
// stops measuring.
// Settings the user set explicitly on rank 0, and the hierarchical block size on one host,
// stay as they are (CoordinateSearch's fixed dimensions).
// Log: with TFRING_AUTOTUNE_LOG, a CSV file on rank 0 (header "trial,<setting>...,score"; a
// row per trial with its number; a last row "best"); the best point also goes to the info
// log ("runtime").
// Threads: the background thread of rank 0 only; not thread-safe.
#pragma once

#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/config.h"
#include "control/coordinate_search.h"
#include "control/messages.h"
#include "control/tunables.h"

namespace tfring {

struct AutotuneOptions {
  int warmup_samples = 3;
  int steps_per_sample = 10;
  int max_samples = 20;
  double min_gain = 0.05;
  std::string log_path;  // empty: no CSV
  bool several_hosts = false;

  // From a loaded config (TFRING_AUTOTUNE_*; several_hosts from TFRING_CROSS_SIZE).
  static AutotuneOptions FromConfig(const Config& config);
};

class Autotuner {
 public:
  using Clock = std::chrono::steady_clock;

  // `config`: rank 0's (its values are the start point; its explicit settings stay fixed).
  // A log file that cannot be opened is reported in the warning log; tuning goes on.
  Autotuner(const Config& config, const AutotuneOptions& options);

  // The responses of one message rank 0 sends now, in order. Returns the values every rank
  // must use after these responses, when they change.
  std::optional<TunedValues> Observe(const std::vector<Response>& responses, Clock::time_point now);

  bool done() const { return search_.done(); }
  int trials() const { return search_.trials(); }
  const TunedValues& current() const { return search_.Current(); }

 private:
  void EndSample(Clock::time_point now);
  // Starts a sample at the message of `responses` (its first step's first message).
  void RestartSample(const std::vector<Response>& responses, int64_t bytes, Clock::time_point now);
  void WriteRow(const std::string& label, const TunedValues& values, double score);

  AutotuneOptions options_;
  CoordinateSearch search_;
  std::ofstream log_;
  int samples_ = 0;  // ended samples, warm-up included
  bool finished_ = false;  // the best point was returned; nothing more to do
  bool settling_ = false;   // the step in progress is the first after a switch: not scored
  std::map<std::string, int> counts_;  // allreduces per tensor in this sample
  int64_t bytes_ = 0;
  std::optional<Clock::time_point> sample_start_;
};

}  // namespace tfring
