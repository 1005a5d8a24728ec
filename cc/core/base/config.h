// Config: the one typed table of every TFRING_* setting.
//
// Precedence: explicit overrides (init arguments) > environment > default. The environment
// is read here and nowhere else in the core. A bad value fails Config::Load with
// kInvalidArgument naming the variable, the value and what is accepted.
// The table is exported to Python (tfring.config(), the launcher, the docs generator), so
// no setting is ever retyped elsewhere.
// Thread-safety: a loaded Config is immutable.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace tfring {

enum class ParamType { kInt, kFloat, kString, kBool, kEnum };

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

class Config {
 public:
  // Reads the environment (when `read_env`) and applies `overrides` (keyed by variable name).
  static Status Load(const std::map<std::string, std::string>& overrides, bool read_env,
                     Config* out);

  int64_t Int(const std::string& name) const;
  double Float(const std::string& name) const;
  bool Bool(const std::string& name) const;
  const std::string& String(const std::string& name) const;
  bool IsSet(const std::string& name) const;  // not from "default"
  const std::map<std::string, ParamValue>& values() const { return values_; }

 private:
  std::map<std::string, ParamValue> values_;
};

}  // namespace tfring
