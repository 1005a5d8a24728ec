// The autotuner's search (deterministic given the scores), its sampling of steps, its CSV
// log, the settings it leaves alone and how its values travel and apply.
#include "control/autotuner.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "control/coordinate_search.h"
#include "control/tunables.h"

namespace tfring {
namespace {

using Dim = CoordinateSearch::Dimension;

// Runs the search to its end, scoring each point with `score`; returns the points tried.
template <typename Score>
std::vector<std::vector<double>> RunSearch(CoordinateSearch* s, Score score) {
  std::vector<std::vector<double>> tried;
  while (!s->done()) {
    tried.push_back(s->Current());
    s->Report(score(s->Current()));
  }
  return tried;
}

TEST(CoordinateSearchTest, MeasuresTheBestAndTheTopCandidateTwiceEachPerDimension) {
  CoordinateSearch s({Dim{{1, 2, 3}, 2}, Dim{{10, 20}, 10}}, 100, 0.0);
  // Higher x and y are better.
  auto tried = RunSearch(&s, [](const std::vector<double>& p) { return p[0] + p[1]; });
  const std::vector<std::vector<double>> expected = {
      {2, 10}, {1, 10}, {3, 10}, {3, 10}, {2, 10},  // x: the start, candidates, the top again, the start again
      {3, 20}, {3, 20}, {3, 10}};                   // y from x's best (its opening: the top's 2nd score)
  EXPECT_EQ(tried, expected);
  EXPECT_EQ(s.Best(), (std::vector<double>{3, 20}));
  EXPECT_EQ(s.Current(), s.Best()) << "done: stays at the best point";
  EXPECT_EQ(s.trials(), 8);
}

TEST(CoordinateSearchTest, AClosingThatKeptTheBestOpensTheNextDimension) {
  CoordinateSearch s({Dim{{1, 2}, 1}, Dim{{10, 20}, 10}}, 100, 0.0);
  // Lower x and higher y are better: x keeps its start value.
  auto tried = RunSearch(&s, [](const std::vector<double>& p) { return p[1] - p[0]; });
  const std::vector<std::vector<double>> expected = {{1, 10}, {2, 10}, {2, 10}, {1, 10},
                                                     {1, 20}, {1, 20}, {1, 10}};
  EXPECT_EQ(tried, expected) << "x's closing is y's opening: the best point is not measured twice in a row";
  EXPECT_EQ(s.Best(), (std::vector<double>{1, 20}));
}

TEST(CoordinateSearchTest, ACandidateMustBeatTheBestByTheMinimumGain) {
  CoordinateSearch s({Dim{{1, 2}, 1}}, 100, 0.10);
  RunSearch(&s, [](const std::vector<double>& p) { return p[0] == 1 ? 100.0 : 109.0; });
  EXPECT_EQ(s.Best(), (std::vector<double>{1})) << "9% is within the noise margin of 10%";
  EXPECT_DOUBLE_EQ(s.best_score(), 100.0) << "the mean of the opening and the closing";
  CoordinateSearch t({Dim{{1, 2}, 1}}, 100, 0.10);
  RunSearch(&t, [](const std::vector<double>& p) { return p[0] == 1 ? 100.0 : 111.0; });
  EXPECT_EQ(t.Best(), (std::vector<double>{2}));
  EXPECT_DOUBLE_EQ(t.best_score(), 111.0);
}

TEST(CoordinateSearchTest, OneLuckySampleDoesNotMoveTheJob) {
  // Candidate 2 is as fast as the start; its first sample comes out 8% high, which alone
  // clears the 5% bar.
  CoordinateSearch s({Dim{{1, 2}, 1}}, 100, 0.05);
  bool first_of_2 = true;
  RunSearch(&s, [&](const std::vector<double>& p) {
    if (p[0] != 2) return 100.0;
    const double score = first_of_2 ? 108.0 : 100.0;
    first_of_2 = false;
    return score;
  });
  EXPECT_EQ(s.Best(), (std::vector<double>{1})) << "its two samples: (108 + 100) / 2 = 104 < 105";
}

TEST(CoordinateSearchTest, AMachineSlowingDownDuringTheSearchDoesNotHideABetterCandidate) {
  // Candidate 2 is 8% faster than the start 1; the machine loses 3% per trial. Against the
  // start's single first score (100), the candidate's 108 x 0.97 = 104.8 misses the 5% bar;
  // E 2 2 E gives 2 (104.8 + 101.5) / 2 = 103.1 against E (100 + 91) / 2 = 95.5.
  CoordinateSearch s({Dim{{1, 2}, 1}}, 100, 0.05);
  int trial = 0;
  RunSearch(&s, [&](const std::vector<double>& p) { return (p[0] == 2 ? 108.0 : 100.0) * (1 - 0.03 * trial++); });
  EXPECT_EQ(trial, 4);
  EXPECT_EQ(s.Best(), (std::vector<double>{2}));
  // And a faster candidate is not invented: without the 8%, drift alone keeps the start.
  CoordinateSearch t({Dim{{1, 2}, 1}}, 100, 0.05);
  trial = 0;
  RunSearch(&t, [&](const std::vector<double>&) { return 100.0 * (1 - 0.03 * trial++); });
  EXPECT_EQ(t.Best(), (std::vector<double>{1}));
}

TEST(CoordinateSearchTest, FixedDimensionsNeverMoveAndMaxTrialsEndsTheSearch) {
  CoordinateSearch s({Dim{{1, 2, 3}, 7, true}, Dim{{10, 20, 30, 40}, 10}}, 5, 0.0);
  auto tried = RunSearch(&s, [](const std::vector<double>& p) { return p[1]; });
  ASSERT_EQ(tried.size(), 5u);
  for (const auto& p : tried) EXPECT_EQ(p[0], 7) << "set by the user: never tuned";
  EXPECT_EQ(s.Best(), (std::vector<double>{7, 10})) << "cut off before its closing: the setting keeps its value";
  CoordinateSearch t({Dim{{1, 2, 3}, 7, true}, Dim{{10, 20, 30, 40}, 10}}, 6, 0.0);
  tried = RunSearch(&t, [](const std::vector<double>& p) { return p[1]; });
  ASSERT_EQ(tried.size(), 6u);
  EXPECT_EQ(t.Best(), (std::vector<double>{7, 40}));
}

TEST(CoordinateSearchTest, NothingToSearchEndsAfterTheStartPoint) {
  CoordinateSearch s({Dim{{1, 2}, 1, true}, Dim{{5}, 5}}, 100, 0.0);
  auto tried = RunSearch(&s, [](const std::vector<double>&) { return 1.0; });
  EXPECT_EQ(tried, (std::vector<std::vector<double>>{{1, 5}}));
}

TEST(CoordinateSearchTest, TheSameScoresGiveTheSameChoice) {
  auto run = [] {
    CoordinateSearch s({Dim{{0, 1, 4}, 1}, Dim{{64, 256}, 256}}, 20, 0.05);
    int i = 0;
    RunSearch(&s, [&](const std::vector<double>&) { return double((i++ * 37) % 11); });
    return s.Best();
  };
  EXPECT_EQ(run(), run());
}

// A message of one allreduce per tensor in `names`, `bytes` each.
std::vector<Response> Step(const std::vector<std::string>& names, int64_t bytes) {
  std::vector<Response> out;
  for (const auto& n : names) {
    Response r;
    r.attrs.op = OpType::kAllreduce;
    r.tensors.push_back({n});
    r.sizes.push_back(bytes);
    out.push_back(r);
  }
  return out;
}

Config Load(const std::map<std::string, std::string>& overrides) {
  Config c;
  EXPECT_TRUE(Config::Load(overrides, false, &c).ok());
  return c;
}

TEST(AutotunerTest, SamplesStepsDiscardsWarmUpAndLogsEveryTrialThenTheBest) {
  const std::string path = ::testing::TempDir() + "autotune_test.csv";
  // Only the cycle time is free: 4 candidates, start 1 -> trials at 1, 0, 0.25, 4, then the
  // top (0.25) and the start (1) again.
  Config config = Load({{"TFRING_FUSION_THRESHOLD", "1048576"}, {"TFRING_CONTROL_HOLD_US", "200"},
                        {"TFRING_RECURSIVE_DOUBLING_BYTES", "65536"}, {"TFRING_CHUNK_BYTES", "262144"}});
  AutotuneOptions o;
  o.warmup_samples = 2;
  o.steps_per_sample = 3;
  o.max_samples = 10;
  o.min_gain = 0;
  o.log_path = path;
  Autotuner tuner(config, o);
  auto t = Autotuner::Clock::time_point{};
  std::vector<TunedValues> sent;
  int steps = 0;
  bool switched = false;
  while (!tuner.done() && steps < 1000) {
    // Time per step: 1 ms, except with cycle time 0.25 (0.5 ms): the best. The first step
    // after a switch takes 20 ms (new fused groups, responses not cached yet): unscored.
    const double cycle = tuner.current()[1];
    t += std::chrono::microseconds(switched ? 20000 : cycle == 0.25 ? 500 : 1000);
    switched = false;
    if (auto v = tuner.Observe(Step({"a", "b"}, 1000), t)) {
      sent.push_back(*v);
      switched = true;
    }
    ++steps;
  }
  ASSERT_TRUE(tuner.done());
  EXPECT_EQ(tuner.trials(), 6);
  // Each sample is 3 steps; the 4th step's message starts the next sample; each of the 5
  // switches (to 0, 0.25, 4, 0.25 and back to 1 for the closing) is followed by a settling
  // step that no sample counts.
  EXPECT_EQ(steps, 1 + 3 * (2 + 6) + 5);
  ASSERT_EQ(sent.size(), 6u) << "0, 0.25, 4, 0.25, 1, then the best";
  EXPECT_EQ(sent[0][1], 0);
  EXPECT_EQ(sent[1][1], 0.25);
  EXPECT_EQ(sent[2][1], 4);
  EXPECT_EQ(sent[3][1], 0.25);
  EXPECT_EQ(sent[4][1], 1);
  EXPECT_EQ(sent.back()[1], 0.25);
  EXPECT_EQ(sent.back()[0], 1048576) << "explicit: kept";
  EXPECT_FALSE(tuner.Observe(Step({"a", "b"}, 1000), t).has_value()) << "done: no more changes";

  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 1u + 6 + 1);
  EXPECT_EQ(lines[0], "trial,TFRING_FUSION_THRESHOLD,TFRING_CYCLE_TIME_MS,TFRING_CONTROL_HOLD_US,"
                      "TFRING_RECURSIVE_DOUBLING_BYTES,TFRING_CHUNK_BYTES,TFRING_HIERARCHICAL_BLOCK_BYTES,"
                      "score_bytes_per_s");
  EXPECT_EQ(lines[1].substr(0, 12), "0,1048576,1,");
  EXPECT_EQ(lines[3].substr(0, 15), "2,1048576,0.25,");
  EXPECT_EQ(lines[5].substr(0, 15), "4,1048576,0.25,") << "the top candidate again";
  EXPECT_EQ(lines[6].substr(0, 14), "5,1048576,1,20") << "the closing";
  EXPECT_EQ(lines[7].substr(0, 20), "best,1048576,0.25,20");
  // 2 tensors x 1000 bytes x 3 steps in 1.5 ms.
  EXPECT_NE(lines[3].find(",4000000"), std::string::npos) << lines[3];
  std::remove(path.c_str());
}

TEST(AutotunerTest, NeverTunesHierarchicalBlocksOnOneHost) {
  Config config = Load({});
  AutotuneOptions o;
  o.warmup_samples = 0;
  o.steps_per_sample = 1;
  o.min_gain = 0;
  o.max_samples = 100;
  Autotuner tuner(config, o);
  auto t = Autotuner::Clock::time_point{};
  const size_t block = Tunables().size() - 1;
  ASSERT_STREQ(Tunables()[block].setting, "TFRING_HIERARCHICAL_BLOCK_BYTES");
  for (int i = 0; i < 200 && !tuner.done(); ++i) {
    t += std::chrono::milliseconds(1);
    if (auto v = tuner.Observe(Step({"a"}, 8), t)) {
      EXPECT_EQ((*v)[block], 2097152);
    }
  }
  EXPECT_TRUE(tuner.done());
}

TEST(TunablesTest, ApplyKeepsPerRankSettingsThisRankSetButFollowsRankZeroOnMustMatchOnes) {
  Config config = Load({{"TFRING_CHUNK_BYTES", "131072"}, {"TFRING_RECURSIVE_DOUBLING_BYTES", "4096"}});
  Settings s = config.settings();
  TunedValues v = TunedValuesOf(s);
  v[4] = 1 << 20;  // chunk bytes (per rank, set here)
  v[3] = 0;        // recursive doubling (must match: rank 0 decides)
  v[0] = 1 << 20;  // fusion threshold (not set here)
  ApplyTunedValues(v, &config, &s);
  EXPECT_EQ(s.chunk_bytes, 131072);
  EXPECT_EQ(s.recursive_doubling_bytes, 0);
  EXPECT_EQ(s.fusion_threshold, 1 << 20);
  EXPECT_EQ(DescribeTunedValues(v).substr(0, 32), "TFRING_FUSION_THRESHOLD=1048576 ");
}

TEST(TunablesTest, TuningTravelsWithResponsesAndBadValuesAreRejected) {
  ControlMessage m;
  m.kind = ControlKind::kResponses;
  m.responses = Step({"a"}, 8);
  ControlMessage back;
  const size_t untuned = EncodeControl(m).size();
  ASSERT_TRUE(DecodeControl(EncodeControl(m), 2, &back).ok());
  EXPECT_TRUE(back.tuning.empty());
  m.tuning = TunedValuesOf(Load({}).settings());
  EXPECT_EQ(EncodeControl(m).size(), untuned + 4 + 8 * Tunables().size()) << "not tuning costs no byte";
  ASSERT_TRUE(DecodeControl(EncodeControl(m), 2, &back).ok());
  EXPECT_EQ(back.tuning, m.tuning);
  m.tuning.pop_back();
  EXPECT_FALSE(DecodeControl(EncodeControl(m), 2, &back).ok()) << "one value per tunable";
  m.tuning = TunedValuesOf(Load({}).settings());
  m.tuning[0] = -1;
  EXPECT_FALSE(DecodeControl(EncodeControl(m), 2, &back).ok());
}

}  // namespace
}  // namespace tfring
