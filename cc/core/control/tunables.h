// The settings the autotuner (autotuner.h) may change while a job runs, and how a tuned
// value reaches a rank's typed Settings.
//
// Each changes how fast a collective runs, never which values it reduces: the fusion
// threshold and cycle time (which tensors share a buffer), the control hold (when requests
// go up), the recursive-doubling threshold (ring or recursive doubling), the chunk size
// (how much is reduced while the rest is in flight) and the hierarchical block size (how
// the phases overlap). Where the reduction order of an element still depends on them is
// stated in docs/configuration.md ("Autotuning").
// A tuned setting travels as TunedValues: one number per Tunables() entry, in that order
// (ControlMessage::tuning).
// Pure functions and a constant table; any thread.
#pragma once

#include <string>
#include <vector>

#include "base/config.h"

namespace tfring {

struct TunableSpec {
  const char* setting;             // TFRING_* name (base/settings_table.h)
  std::vector<double> candidates;  // what the search tries, besides the job's own value
  bool several_hosts_only;         // means nothing on one host: never tuned there
  double (*read)(const Settings&);
  void (*write)(Settings*, double);
};

// In the order the search visits them and TunedValues lists them.
const std::vector<TunableSpec>& Tunables();

using TunedValues = std::vector<double>;  // one per Tunables() entry

// The tunable settings' values in `settings`.
TunedValues TunedValuesOf(const Settings& settings);

// Writes `values` (size Tunables().size()) into `settings`, except a per-rank setting that
// `config` says this rank set explicitly (a must-match setting always follows rank 0, which
// never tunes one it set: every rank must keep using the same value). Null `config`: all.
void ApplyTunedValues(const TunedValues& values, const Config* config, Settings* settings);

// "TFRING_FUSION_THRESHOLD=1048576 TFRING_CYCLE_TIME_MS=0.25 ..." for logs.
std::string DescribeTunedValues(const TunedValues& values);

// A value as the settings table would read it back ("1048576", "0.25").
std::string TunedValueText(double value);

}  // namespace tfring
