// CoordinateSearch: the autotuner's search over a few settings, each with a short list of
// candidate values, given one score per trial (higher is better).
//
// One setting at a time, in order, with the rest held at the best point so far (E):
//   E, c1 .. ck, T, E
// the best point (the "opening"; the first is the job's own settings), every other candidate
// of that setting once, the highest-scoring of them (T) again, and the best point again (the
// "closing"). The setting takes T only when the mean of T's two scores beats the mean of E's
// two by more than (1 + min_gain) (noise does not move the job away from its defaults).
// Why two of each, in that order: on a shared machine one sample is noisy (measured in
// 2 x 4-rank jobs: -35% .. +15% around the same settings' median), and the speed drifts
// during a search (the job's first scored sample ran 5-15% above the same settings a few
// samples later, which had kept any candidate from clearing a single first measurement).
// With T's two samples inside E's, a linear drift costs T nothing when T is c1 and favours
// E slightly otherwise. The next setting's opening is the last sample of its new best point:
// T's second when T won, else the closing.
// One pass; it ends after the last setting or after max_trials trials, whichever comes first
// (a setting cut off before its closing keeps its value), and then stays at the best point.
// Why not Horovod's Gaussian process: the settings here are a handful of discrete choices
// whose effects barely interact (fusion and cycle time shape negotiation, thresholds and
// chunk sizes the transfer), a pass costs sum(candidates) + two trials per setting, and the
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
  // The best point's score: the mean of its two samples in the last setting searched (its
  // opening and closing, or the winning candidate's two); the first trial's before that.
  double best_score() const { return best_score_; }

 private:
  enum class Phase { kOpening, kCandidate, kConfirm, kClosing };

  // Whether dims_[i] has a candidate other than the best point's value.
  bool Searchable(size_t i) const;
  // Begins the first searchable dimension from `from` on (dim_ == dims_.size(): none left).
  void BeginDimension(size_t from);
  // Moves current_ to dims_[dim_]'s next untried candidate; false when none is left.
  bool NextCandidate();
  // The closing measured `closing`: takes the dimension's top candidate or keeps its entry value.
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
  double opening_ = 0;          // the best point's score before this dimension's candidates
  double confirm_ = 0;          // the top candidate's second score
  size_t dim_ = 0;              // the dimension being searched
  size_t candidate_ = 0;        // the next candidate of dims_[dim_] to try
  double top_score_ = -1;       // the highest candidate score in this dimension
  double top_value_ = 0;        // ...and its value
  int trials_ = 0;
  bool done_ = false;
};

}  // namespace tfring
