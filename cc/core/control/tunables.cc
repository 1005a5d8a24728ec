#include "control/tunables.h"

#include <cmath>
#include <cstdio>

namespace tfring {

const std::vector<TunableSpec>& Tunables() {
  static const std::vector<TunableSpec> kTunables = {
      {"TFRING_FUSION_THRESHOLD", {1 << 20, 4 << 20, 16 << 20, 64 << 20}, false,
       [](const Settings& s) { return double(s.fusion_threshold); },
       [](Settings* s, double v) { s->fusion_threshold = int64_t(v); }},
      {"TFRING_CYCLE_TIME_MS", {0, 0.25, 1, 4}, false,
       [](const Settings& s) { return s.cycle_time_ms; },
       [](Settings* s, double v) { s->cycle_time_ms = v; }},
      {"TFRING_CONTROL_HOLD_US", {0, 200, 1000}, false,
       [](const Settings& s) { return s.control_hold_us; },
       [](Settings* s, double v) { s->control_hold_us = v; }},
      {"TFRING_RECURSIVE_DOUBLING_BYTES", {0, 16 << 10, 64 << 10, 256 << 10, 1 << 20}, false,
       [](const Settings& s) { return double(s.recursive_doubling_bytes); },
       [](Settings* s, double v) { s->recursive_doubling_bytes = int64_t(v); }},
      {"TFRING_CHUNK_BYTES", {64 << 10, 256 << 10, 1 << 20}, false,
       [](const Settings& s) { return double(s.chunk_bytes); },
       [](Settings* s, double v) { s->chunk_bytes = int64_t(v); }},
      {"TFRING_HIERARCHICAL_BLOCK_BYTES", {0, 512 << 10, 2 << 20, 8 << 20}, true,
       [](const Settings& s) { return double(s.hierarchical_block_bytes); },
       [](Settings* s, double v) { s->hierarchical_block_bytes = int64_t(v); }},
  };
  return kTunables;
}

TunedValues TunedValuesOf(const Settings& settings) {
  TunedValues values;
  for (const auto& t : Tunables()) values.push_back(t.read(settings));
  return values;
}

namespace {

bool PerRank(const char* setting) {
  for (const auto& spec : ParamTable()) {
    if (std::string(spec.name) == setting) return spec.match == ParamMatch::kPerRank;
  }
  return false;
}

}  // namespace

void ApplyTunedValues(const TunedValues& values, const Config* config, Settings* settings) {
  const auto& tunables = Tunables();
  for (size_t i = 0; i < tunables.size() && i < values.size(); ++i) {
    const char* name = tunables[i].setting;
    if (config != nullptr && config->IsSet(name) && PerRank(name)) continue;
    tunables[i].write(settings, values[i]);
  }
}

std::string TunedValueText(double value) {
  if (value == std::floor(value) && std::fabs(value) < 1e15) return std::to_string(static_cast<long long>(value));
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

std::string DescribeTunedValues(const TunedValues& values) {
  std::string out;
  const auto& tunables = Tunables();
  for (size_t i = 0; i < tunables.size() && i < values.size(); ++i) {
    out += std::string(out.empty() ? "" : " ") + tunables[i].setting + "=" + TunedValueText(values[i]);
  }
  return out;
}

}  // namespace tfring
