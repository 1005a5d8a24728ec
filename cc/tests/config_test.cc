// Config: defaults, argument > environment > default, and errors that name the variable.
#include "base/config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>
#include <stdexcept>
#include <vector>

#include "test_util.h"

namespace tfring {
namespace {

using testing_util::HasError;
using testing_util::ScopedEnv;

// Clears every TFRING_* variable for the test (CI may export some) and restores them after.
class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const auto& spec : ParamTable()) {
      env_.push_back(std::make_unique<ScopedEnv>(spec.name, std::nullopt));
    }
  }
  std::vector<std::unique_ptr<ScopedEnv>> env_;
};

TEST_F(ConfigTest, TableIsWellFormed) {
  std::set<std::string> names;
  for (const auto& spec : ParamTable()) {
    std::string name = spec.name;
    EXPECT_EQ(name.rfind("TFRING_", 0), 0u) << name;
    EXPECT_TRUE(names.insert(name).second) << "duplicate " << name;
    EXPECT_GT(std::string(spec.description).size(), 10u) << name;
    if (spec.type == ParamType::kInt || spec.type == ParamType::kFloat) {
      EXPECT_LE(spec.min_value, spec.max_value) << name;
    }
    // An enum lists its values, and its default is one of them; other types list none.
    const std::vector<std::string> choices = ParamChoices(spec);
    if (spec.type == ParamType::kEnum) {
      EXPECT_GE(choices.size(), 2u) << name;
      EXPECT_NE(std::find(choices.begin(), choices.end(), spec.default_value), choices.end()) << name;
      for (const auto& choice : choices) EXPECT_FALSE(choice.empty()) << name;
    } else {
      EXPECT_TRUE(choices.empty()) << name;
    }
    if (spec.check != nullptr) {
      EXPECT_EQ(spec.type, ParamType::kString) << name << ": a syntax check on a typed value";
    }
  }
  for (const char* needed : {"TFRING_RANK", "TFRING_SIZE", "TFRING_TIMEOUT_S",
                             "TFRING_START_TIMEOUT_S", "TFRING_FUSION_THRESHOLD",
                             "TFRING_SECRET", "TFRING_STORE_ADDR"}) {
    EXPECT_TRUE(names.count(needed)) << needed;
  }
}

TEST_F(ConfigTest, DefaultsLoadAndAreTyped) {
  Config c;
  TFRING_ASSERT_OK(Config::Load({}, true, &c));
  EXPECT_EQ(c.values().size(), ParamTable().size());
  for (const auto& spec : ParamTable()) {
    EXPECT_EQ(c.values().at(spec.name).text, spec.default_value) << spec.name;
    EXPECT_EQ(c.values().at(spec.name).source, "default") << spec.name;
    EXPECT_FALSE(c.IsSet(spec.name)) << spec.name;
  }
  EXPECT_EQ(c.Int("TFRING_RANK"), 0);
  EXPECT_EQ(c.Int("TFRING_SIZE"), 1);
  EXPECT_EQ(c.Float("TFRING_TIMEOUT_S"), 30);
  EXPECT_EQ(c.Int("TFRING_FUSION_THRESHOLD"), 64 << 20);
  EXPECT_TRUE(c.Bool("TFRING_SHM"));
  EXPECT_EQ(c.String("TFRING_LOG_LEVEL"), "warning");
  EXPECT_EQ(c.String("TFRING_JOB_ID"), "default");
}

TEST_F(ConfigTest, AnUnknownNameIsRefusedNamingItAndWhereTheSettingsAreListed) {
  Config c;
  TFRING_ASSERT_OK(Config::Load({}, true, &c));
  for (const auto& get : std::vector<std::function<void()>>{[&] { c.Int("TFRING_TIMEOUT"); },
                                                           [&] { c.IsSet("TFRING_TIMEOUT"); }}) {
    try {
      get();
      ADD_FAILURE() << "an unknown setting name was accepted";
    } catch (const std::out_of_range& e) {
      EXPECT_NE(std::string(e.what()).find("'TFRING_TIMEOUT'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("settings_table.h"), std::string::npos) << e.what();
    }
  }
}

TEST_F(ConfigTest, ArgumentBeatsEnvironmentBeatsDefault) {
  ScopedEnv timeout("TFRING_TIMEOUT_S", "7.5");
  ScopedEnv cycle("TFRING_CYCLE_TIME_MS", "3");
  Config c;
  TFRING_ASSERT_OK(Config::Load({{"TFRING_CYCLE_TIME_MS", "9"}, {"TFRING_SHM", "false"}}, true, &c));
  EXPECT_EQ(c.Float("TFRING_TIMEOUT_S"), 7.5);
  EXPECT_EQ(c.values().at("TFRING_TIMEOUT_S").source, "env");
  EXPECT_EQ(c.Float("TFRING_CYCLE_TIME_MS"), 9);
  EXPECT_EQ(c.values().at("TFRING_CYCLE_TIME_MS").source, "argument");
  EXPECT_FALSE(c.Bool("TFRING_SHM"));
  EXPECT_EQ(c.values().at("TFRING_SHM").source, "argument");
  EXPECT_EQ(c.values().at("TFRING_SPIN_US").source, "default");
  EXPECT_TRUE(c.IsSet("TFRING_TIMEOUT_S"));
  EXPECT_FALSE(c.IsSet("TFRING_SPIN_US"));
}

void ExpectEqualsText(int64_t v, const Config& c, const char* name) { EXPECT_EQ(v, c.Int(name)) << name; }
void ExpectEqualsText(double v, const Config& c, const char* name) { EXPECT_EQ(v, c.Float(name)) << name; }
void ExpectEqualsText(bool v, const Config& c, const char* name) { EXPECT_EQ(v, c.Bool(name)) << name; }
void ExpectEqualsText(const std::string& v, const Config& c, const char* name) {
  EXPECT_EQ(v, c.String(name)) << name;
}

// The typed settings (settings_table.h) hold what the table's text says, read once at Load:
// every field of each type equals its by-name value, argument and environment included.
TEST_F(ConfigTest, TypedSettingsEqualTheirTextForEverySetting) {
  ScopedEnv timeout("TFRING_TIMEOUT_S", "7.5");
  Config c;
  TFRING_ASSERT_OK(Config::Load({{"TFRING_CYCLE_TIME_MS", "9"}, {"TFRING_SHM", "false"},
                                 {"TFRING_DATA_CONNECTIONS", "lazy"}, {"TFRING_CONTROL_FANOUT", "3"}},
                                true, &c));
  const Settings& s = c.settings();
  EXPECT_EQ(s.timeout_s, 7.5);
  EXPECT_EQ(s.cycle_time_ms, 9);
  EXPECT_FALSE(s.shm);
  EXPECT_EQ(s.data_connections, "lazy");
  EXPECT_EQ(s.control_fanout, 3);
  EXPECT_EQ(s.fusion_threshold, 64 << 20);
  EXPECT_EQ(s.log_level, "warning");
#define EXPECT_FIELD_EQUALS_TEXT(field, name, ...) ExpectEqualsText(s.field, c, name);
  TFRING_SETTINGS(EXPECT_FIELD_EQUALS_TEXT)
#undef EXPECT_FIELD_EQUALS_TEXT
}

// The must-match text names exactly the table's kMustMatch settings, with their values, so
// the roster's comparison at init covers each of them (TFRING_SHM_CONTROL included).
TEST_F(ConfigTest, MustMatchTextListsEveryMustMatchSettingWithItsValue) {
  Config c;
  TFRING_ASSERT_OK(Config::Load({{"TFRING_HIERARCHICAL_BLOCK_BYTES", "4096"}, {"TFRING_ALGORITHM", "allreduce=ring"}},
                                false, &c));
  const std::string text = c.settings().MustMatchText();
  size_t must_match = 0;
  for (const auto& spec : ParamTable()) {
    const bool listed = text.find(std::string(spec.name) + "=") != std::string::npos;
    if (spec.match != ParamMatch::kPerRank) ++must_match;
    EXPECT_EQ(listed, spec.match != ParamMatch::kPerRank) << spec.name << " in '" << text << "'";
  }
  EXPECT_GE(must_match, 13u);
  EXPECT_NE(text.find("TFRING_HIERARCHICAL_BLOCK_BYTES=4096;"), std::string::npos) << text;
  EXPECT_NE(text.find("TFRING_ALGORITHM=allreduce=ring;"), std::string::npos) << text;
  EXPECT_NE(text.find("TFRING_SHM_CONTROL=1;"), std::string::npos) << text;
  // Without shared memory TFRING_SHM_CONTROL means nothing: its text is the same whatever it is.
  Config off, off_too;
  TFRING_ASSERT_OK(Config::Load({{"TFRING_SHM", "0"}, {"TFRING_SHM_CONTROL", "1"}}, false, &off));
  TFRING_ASSERT_OK(Config::Load({{"TFRING_SHM", "0"}, {"TFRING_SHM_CONTROL", "0"}}, false, &off_too));
  EXPECT_EQ(off.settings().MustMatchText(), off_too.settings().MustMatchText());
}

TEST_F(ConfigTest, ReadEnvFalseIgnoresTheEnvironment) {
  ScopedEnv timeout("TFRING_TIMEOUT_S", "not a number");
  Config c;
  TFRING_ASSERT_OK(Config::Load({}, false, &c));
  EXPECT_EQ(c.Float("TFRING_TIMEOUT_S"), 30);
}

TEST_F(ConfigTest, EmptyEnvironmentValueMeansUnset) {
  ScopedEnv timeout("TFRING_TIMEOUT_S", "");
  Config c;
  TFRING_ASSERT_OK(Config::Load({}, true, &c));
  EXPECT_EQ(c.values().at("TFRING_TIMEOUT_S").source, "default");
}

TEST_F(ConfigTest, BadEnvironmentValueNamesVariableValueAndSource) {
  ScopedEnv cycle("TFRING_CYCLE_TIME_MS", "fast");
  Config c;
  EXPECT_TRUE(HasError(Config::Load({}, true, &c), ErrorCode::kInvalidArgument,
                       {"TFRING_CYCLE_TIME_MS", "'fast'", "from env", "expected a number"}));
  // An explicit argument overrides the bad environment value entirely.
  TFRING_EXPECT_OK(Config::Load({{"TFRING_CYCLE_TIME_MS", "2"}}, true, &c));
}

TEST_F(ConfigTest, BadArgumentsNameTheVariable) {
  struct Case {
    const char* name;
    const char* value;
    std::vector<std::string> parts;
  } cases[] = {
      {"TFRING_TIMEOUT_S", "-1", {"TFRING_TIMEOUT_S", "'-1'", "from argument", "expected a value in"}},
      {"TFRING_TIMEOUT_S", "inf", {"TFRING_TIMEOUT_S", "expected a number"}},
      {"TFRING_TIMEOUT_S", "nan", {"TFRING_TIMEOUT_S", "expected a number"}},
      {"TFRING_TIMEOUT_S", "5s", {"TFRING_TIMEOUT_S", "expected a number"}},
      {"TFRING_FUSION_THRESHOLD", "1.5", {"TFRING_FUSION_THRESHOLD", "expected an integer"}},
      {"TFRING_FUSION_THRESHOLD", "99999999999999999999", {"TFRING_FUSION_THRESHOLD", "integer"}},
      {"TFRING_CHUNK_BYTES", "12", {"TFRING_CHUNK_BYTES", "[1024,"}},
      {"TFRING_SIZE", "0", {"TFRING_SIZE", "'0'"}},
      {"TFRING_RANK", "", {"TFRING_RANK", "expected an integer"}},
      {"TFRING_SHM", "yes", {"TFRING_SHM", "'yes'", "0, 1, true or false"}},
      {"TFRING_SHM_CMA", "on", {"TFRING_SHM_CMA", "'on'", "auto, 0, 1, true or false"}},
      {"TFRING_SHM_CMA_MIN_BYTES", "0", {"TFRING_SHM_CMA_MIN_BYTES", "[1,"}},
      {"TFRING_LOG_LEVEL", "loud", {"TFRING_LOG_LEVEL", "'loud'", "trace, debug"}},
      {"TFRING_LOG_LEVEL", "info,coordinatr=debug", {"unknown log subsystem 'coordinatr'", "transport"}},
      {"TFRING_LOG_LEVEL", "info,store=loud", {"bad level for subsystem 'store'"}},
      {"TFRING_LOG_LEVEL", "store=debug,info", {"LEVEL[,SUBSYSTEM=LEVEL...]"}},
  };
  for (const auto& k : cases) {
    Config c;
    EXPECT_TRUE(HasError(Config::Load({{k.name, k.value}}, false, &c), ErrorCode::kInvalidArgument,
                         k.parts))
        << k.name << "=" << k.value;
  }
}

TEST_F(ConfigTest, UnknownSettingIsNamed) {
  Config c;
  EXPECT_TRUE(HasError(Config::Load({{"TFRING_TIMEOUT", "5"}}, false, &c),
                       ErrorCode::kInvalidArgument, {"unknown tfring setting 'TFRING_TIMEOUT'"}));
}

TEST_F(ConfigTest, CrossFieldChecks) {
  Config c;
  EXPECT_TRUE(HasError(Config::Load({{"TFRING_RANK", "2"}, {"TFRING_SIZE", "2"}}, false, &c),
                       ErrorCode::kInvalidArgument, {"TFRING_RANK=2", "TFRING_SIZE=2"}));
  EXPECT_TRUE(HasError(Config::Load({{"TFRING_SIZE", "2"}, {"TFRING_SECRET", "ab"}}, false, &c),
                       ErrorCode::kInvalidArgument, {"TFRING_STORE_ADDR"}));
  EXPECT_TRUE(HasError(Config::Load({{"TFRING_SIZE", "2"}, {"TFRING_STORE_ADDR", "h:1"}}, false, &c),
                       ErrorCode::kInvalidArgument, {"TFRING_SECRET"}));
  EXPECT_TRUE(HasError(Config::Load({{"TFRING_SHM_RING_BYTES", "5000"}}, false, &c),
                       ErrorCode::kInvalidArgument, {"TFRING_SHM_RING_BYTES=5000", "power of two"}));
  EXPECT_TRUE(HasError(Config::Load({{"TFRING_LOCAL_RANK", "1"}}, false, &c),
                       ErrorCode::kInvalidArgument, {"TFRING_LOCAL_RANK", "TFRING_LOCAL_SIZE"}));
  EXPECT_TRUE(HasError(Config::Load({{"TFRING_CROSS_RANK", "3"}, {"TFRING_CROSS_SIZE", "2"}}, false, &c),
                       ErrorCode::kInvalidArgument, {"TFRING_CROSS_RANK"}));
  TFRING_EXPECT_OK(Config::Load({{"TFRING_RANK", "1"}, {"TFRING_SIZE", "2"},
                                 {"TFRING_STORE_ADDR", "127.0.0.1:1"}, {"TFRING_SECRET", "ab"}},
                                false, &c));
  EXPECT_EQ(c.Int("TFRING_RANK"), 1);
}

TEST_F(ConfigTest, BoolSpellings) {
  for (auto [text, want] : std::vector<std::pair<const char*, bool>>{
           {"0", false}, {"1", true}, {"true", true}, {"false", false}}) {
    Config c;
    TFRING_ASSERT_OK(Config::Load({{"TFRING_SHM", text}}, false, &c));
    EXPECT_EQ(c.Bool("TFRING_SHM"), want) << text;
  }
}

TEST_F(ConfigTest, FailedLoadLeavesOutputUntouched) {
  Config c;
  TFRING_ASSERT_OK(Config::Load({{"TFRING_SPIN_US", "7"}}, false, &c));
  EXPECT_FALSE(Config::Load({{"TFRING_SPIN_US", "-7"}}, false, &c).ok());
  EXPECT_EQ(c.Int("TFRING_SPIN_US"), 7);
}

}  // namespace
}  // namespace tfring
