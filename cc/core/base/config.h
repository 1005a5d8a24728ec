// Config: the one typed table of every TFRING_* setting (base/settings_table.h).
//
// Precedence: explicit overrides (init arguments) > environment > default. The environment
// is read here and nowhere else in the core. A bad value fails Config::Load with
// kInvalidArgument naming the variable, the value and what is accepted.
// The table is exported to Python (tfring.config(), the launcher, the docs generator), so
// no setting is ever retyped elsewhere.
// The core reads a loaded Config through settings(): one typed field per setting, filled
// once at Load (no name lookups at the call sites, no re-parsing).
// Thread-safety: a loaded Config is immutable.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/settings_table.h"
#include "base/status.h"

namespace tfring {

enum class ParamType { kInt, kFloat, kString, kBool, kEnum };

// Whether every rank of a job must use the same value (settings_table.h's MATCH column).
enum class ParamMatch { kPerRank, kMustMatch, kMustMatchWithShm };

struct ParamSpec {
  const char* name;         // environment variable, e.g. "TFRING_TIMEOUT_S"
  ParamType type;
  const char* default_value;
  double min_value;         // numeric bounds (inclusive); ignored for strings/bools
  double max_value;
  const char* description;
  const char* choices = nullptr;  // kEnum: the accepted values, '|'-separated ("auto|0|1")
  // kString with a syntax of its own: false, with `error` saying why, for a bad value
  // (null: any text, unless a higher layer registered a check; see RegisterParamCheck).
  bool (*check)(const std::string& text, std::string* error) = nullptr;
  ParamMatch match = ParamMatch::kPerRank;
};

// The syntax check of a setting whose vocabulary belongs to a layer above base (e.g.
// TFRING_ALGORITHM's op and algorithm names, collectives/algorithm.cc). That layer registers
// it at static initialization, so base includes nothing above it; Config::Load applies it
// like ParamSpec::check. Returns true (so it can initialize a static). Thread-safety: call
// only during static initialization (before any Config::Load).
using ParamCheck = bool (*)(const std::string& text, std::string* error);
bool RegisterParamCheck(const char* name, ParamCheck check);

// The accepted values of a kEnum setting, in table order (empty for other types).
std::vector<std::string> ParamChoices(const ParamSpec& spec);

// Every setting, in documentation order.
const std::vector<ParamSpec>& ParamTable();

struct ParamValue {
  std::string text;    // effective value as text
  std::string source;  // "default", "env", or "argument"
};

// The C++ type of a setting's field in Settings.
template <ParamType T> struct SettingValue { using Type = std::string; };  // kString, kEnum
template <> struct SettingValue<ParamType::kInt> { using Type = int64_t; };
template <> struct SettingValue<ParamType::kFloat> { using Type = double; };
template <> struct SettingValue<ParamType::kBool> { using Type = bool; };

// Every setting as a typed field named after it (TFRING_TIMEOUT_S -> timeout_s), generated
// from settings_table.h. Filled by Config::Load; default-constructed values otherwise.
struct Settings {
#define TFRING_SETTING_FIELD(field, name, type, ...) SettingValue<ParamType::type>::Type field{};
  TFRING_SETTINGS(TFRING_SETTING_FIELD)
#undef TFRING_SETTING_FIELD

  // The kMustMatch and kMustMatchWithShm settings as "NAME=value;..." in table order (the
  // latter as their default-constructed value where `shm` is off): what the roster compares
  // between ranks at init (equal text: equal settings).
  std::string MustMatchText() const;
};

class Config {
 public:
  // Reads the environment (when `read_env`) and applies `overrides` (keyed by variable name).
  static Status Load(const std::map<std::string, std::string>& overrides, bool read_env,
                     Config* out);

  // The typed settings (the way the core reads them).
  const Settings& settings() const { return settings_; }

  // By name, for tests and the Python table (an unknown name throws std::out_of_range naming
  // it and where the settings are listed).
  int64_t Int(const std::string& name) const;
  double Float(const std::string& name) const;
  bool Bool(const std::string& name) const;
  const std::string& String(const std::string& name) const;
  bool IsSet(const std::string& name) const;  // not from "default"
  const std::map<std::string, ParamValue>& values() const { return values_; }

 private:
  const ParamValue& Value(const std::string& name) const;  // the throw of the by-name getters

  std::map<std::string, ParamValue> values_;
  Settings settings_;
};

}  // namespace tfring
