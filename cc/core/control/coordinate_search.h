// CoordinateSearch: the autotuner's search over a few settings, each with a short list of
// candidate values, given one score per trial (higher is better).
//
// The first trial is the start point (the job's own settings). Then, one setting at a time
// in order, every other candidate of that setting is tried with the rest held at the best
// found so far; the setting keeps the candidate that scored best, and a candidate replaces
// the best so far only when it scores more than (1 + min_gain) times as much (noise does not
// move the job away from its defaults). One pass; it ends after the last candidate or after
// max_trials trials, whichever comes first, and then stays at the best point.
// Why not Horovod's Gaussian process: the settings here are a handful of discrete choices
// whose effects barely interact (fusion and cycle time shape negotiation, thresholds and
// chunk sizes the transfer), a pass costs sum(candidates) trials, and the result does not
// depend on a model's hyperparameters: the same scores always give the same choice.
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
  double best_score() const { return best_score_; }

 private:
  // Moves current_ to the next untried candidate, or ends the search.
  void Advance();

  std::vector<Dimension> dims_;
  int max_trials_;
  double min_gain_;
  std::vector<double> current_;
  std::vector<double> best_;
  double best_score_ = -1;
  size_t dim_ = 0;        // the dimension being searched
  size_t candidate_ = 0;  // the next candidate of dims_[dim_] to try
  double entry_value_ = 0;  // dims_[dim_]'s value in the best point when its search began
  int trials_ = 0;
  bool done_ = false;
};

}  // namespace tfring
