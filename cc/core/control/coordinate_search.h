// CoordinateSearch: the autotuner's search over a few settings, each with a short list of
// candidate values, given one score per trial (higher is better).
//
// One setting at a time, in order, with the rest held at the best point so far:
//   1. the best point is measured (the "opening"; the first trial is the job's own settings);
//   2. every other candidate of that setting, once each;
//   3. the best point again (the "closing").
// The setting keeps its candidate that scored highest only when that score beats the mean of
// the opening and the closing by more than (1 + min_gain) (noise does not move the job away
// from its defaults). Bracketing the candidates between two measurements of the best point
// cancels a drift of the machine's speed across the search: measured in 2 x 4-rank jobs, the
// job's first scored sample ran 5-15% faster than the same settings a few samples later,
// which had kept every later candidate from clearing a single first measurement. When the
// setting kept its value, the closing doubles as the next setting's opening.
// One pass; it ends after the last setting or after max_trials trials, whichever comes first
// (a setting cut off before its closing keeps its value), and then stays at the best point.
// Why not Horovod's Gaussian process: the settings here are a handful of discrete choices
// whose effects barely interact (fusion and cycle time shape negotiation, thresholds and
// chunk sizes the transfer), a pass costs sum(candidates) + one closing per setting, and the
// result does not depend on a model's hyperparameters: the same scores give the same choice.
// Pure logic, deterministic; not thread-safe.
#pragma once

#include <cstddef>
#include <vector>

namespace tfring {

class CoordinateSearch {
 public:
  struct Dimension {
    std::vector<double> candidates;  // tried in this order; the start value need not be one
    double start = 0;                // the first trial's value
    bool fixed = false;              // never changed (the user set it, or it means nothing here)
  };

  CoordinateSearch(std::vector<Dimension> dimensions, int max_trials, double min_gain);

  // The point to measure now (one value per dimension); Best() once done().
  const std::vector<double>& Current() const { return done_ ? best_ : current_; }
  // The score of Current(); chooses the next point. Ignored once done().
  void Report(double score);
  bool done() const { return done_; }
  int trials() const { return trials_; }
  const std::vector<double>& Best() const { return best_; }
  // The best point's score: the mean of its last opening and closing, or the single score of
  // the candidate that replaced it.
  double best_score() const { return best_score_; }

 private:
  enum class Phase { kOpening, kCandidate, kClosing };

  // Whether dims_[i] has a candidate other than the best point's value.
  bool Searchable(size_t i) const;
  // Begins the first searchable dimension from `from` on (dim_ == dims_.size(): none left).
  void BeginDimension(size_t from);
  // Moves current_ to dims_[dim_]'s next untried candidate; false when none is left.
  bool NextCandidate();
  // The closing measured `closing`: keeps the dimension's top candidate or its entry value.
  void Decide(double closing);
  // Chooses the point after the trial just reported, or ends the search.
  void Advance();

  std::vector<Dimension> dims_;
  int max_trials_;
  double min_gain_;
  std::vector<double> current_;
  std::vector<double> best_;
  double best_score_ = -1;
  Phase phase_ = Phase::kOpening;
  bool opening_known_ = false;  // the last closing measured the best point as it still is
  double opening_ = 0;          // the best point's score before this dimension's candidates
  size_t dim_ = 0;              // the dimension being searched
  size_t candidate_ = 0;        // the next candidate of dims_[dim_] to try
  double entry_value_ = 0;      // dims_[dim_]'s value in the best point when its search began
  double top_score_ = -1;       // the highest candidate score in this dimension
  double top_value_ = 0;        // ...and its value
  int trials_ = 0;
  bool done_ = false;
};

}  // namespace tfring
