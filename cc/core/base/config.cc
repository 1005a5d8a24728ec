#include "base/config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <stdexcept>

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

namespace {

int64_t ParseInt(const std::string& text) { return std::strtoll(text.c_str(), nullptr, 10); }
double ParseFloat(const std::string& text) { return std::strtod(text.c_str(), nullptr); }
bool ParseBool(const std::string& text) { return text == "1" || text == "true"; }

template <ParamType T> typename SettingValue<T>::Type Parse(const std::string& text) {
  if constexpr (T == ParamType::kInt) return ParseInt(text);
  else if constexpr (T == ParamType::kFloat) return ParseFloat(text);
  else if constexpr (T == ParamType::kBool) return ParseBool(text);
  else return text;
}

std::string Text(int64_t v) { return std::to_string(v); }
std::string Text(double v) { return std::to_string(v); }
std::string Text(bool v) { return v ? "1" : "0"; }
std::string Text(const std::string& v) { return v; }

// Every field from its validated text, once.
Settings ReadSettings(const std::map<std::string, ParamValue>& values) {
  Settings s;
#define TFRING_READ_SETTING(field, name, type, ...) s.field = Parse<ParamType::type>(values.at(name).text);
  TFRING_SETTINGS(TFRING_READ_SETTING)
#undef TFRING_READ_SETTING
  return s;
}

}  // namespace

// The table of settings_table.h as ParamSpecs (its length is the number of settings).
const std::vector<ParamSpec>& ParamTable() {
  static const std::vector<ParamSpec> kTable = {
#define TFRING_PARAM_SPEC(field, name, type, default_value, min_value, max_value, match, description, \
                          choices, check)                                                          \
  {name, ParamType::type, default_value, min_value, max_value, description, choices, check, ParamMatch::match},
      TFRING_SETTINGS(TFRING_PARAM_SPEC)
#undef TFRING_PARAM_SPEC
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
  config.settings_ = ReadSettings(config.values_);
  const Settings& set = config.settings_;
  const int64_t rank = set.rank, size = set.size;
  if (rank >= size) {
    return Status::InvalidArgument("TFRING_RANK=" + std::to_string(rank) +
                                   " must be below TFRING_SIZE=" + std::to_string(size));
  }
  const int64_t ring = set.shm_ring_bytes;
  if ((ring & (ring - 1)) != 0) {
    return Status::InvalidArgument("TFRING_SHM_RING_BYTES=" + std::to_string(ring) +
                                   " must be a power of two");
  }
  if (set.local_rank >= set.local_size) {
    return Status::InvalidArgument("TFRING_LOCAL_RANK must be below TFRING_LOCAL_SIZE");
  }
  if (set.cross_rank >= set.cross_size) {
    return Status::InvalidArgument("TFRING_CROSS_RANK must be below TFRING_CROSS_SIZE");
  }
  if (size > 1 && set.store_addr.empty()) {
    return Status::InvalidArgument(
        "TFRING_SIZE=" + std::to_string(size) +
        " but TFRING_STORE_ADDR is not set: start the job with tfringrun, or set the store "
        "address and TFRING_SECRET yourself");
  }
  if (size > 1 && set.secret.empty()) {
    return Status::InvalidArgument("TFRING_SIZE > 1 needs TFRING_SECRET (the job secret)");
  }
  *out = std::move(config);
  return Status::OK();
}

std::string Settings::MustMatchText() const {
  std::string out;
#define TFRING_MUST_MATCH_TEXT(field, name, type, default_value, min_value, max_value, match, ...) \
  if (ParamMatch::match == ParamMatch::kMustMatch) out += std::string(name) + "=" + Text(field) + ";";   \
  if (ParamMatch::match == ParamMatch::kMustMatchWithShm) {                                             \
    out += std::string(name) + "=" + Text(shm ? field : decltype(field){}) + ";";                       \
  }
  TFRING_SETTINGS(TFRING_MUST_MATCH_TEXT)
#undef TFRING_MUST_MATCH_TEXT
  return out;
}

const ParamValue& Config::Value(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    throw std::out_of_range("tfring: no setting named '" + name +
                            "': base/settings_table.h lists every TFRING_* setting (docs/configuration.md)");
  }
  return it->second;
}

int64_t Config::Int(const std::string& name) const { return ParseInt(Value(name).text); }
double Config::Float(const std::string& name) const { return ParseFloat(Value(name).text); }
bool Config::Bool(const std::string& name) const { return ParseBool(Value(name).text); }
const std::string& Config::String(const std::string& name) const { return Value(name).text; }
bool Config::IsSet(const std::string& name) const { return Value(name).source != "default"; }

}  // namespace tfring
