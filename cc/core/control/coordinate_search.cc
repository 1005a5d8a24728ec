#include "control/coordinate_search.h"

#include <utility>

namespace tfring {

CoordinateSearch::CoordinateSearch(std::vector<Dimension> dimensions, int max_trials, double min_gain)
    : dims_(std::move(dimensions)), max_trials_(max_trials), min_gain_(min_gain) {
  for (const auto& d : dims_) current_.push_back(d.start);
  best_ = current_;
  done_ = max_trials_ <= 0;
}

void CoordinateSearch::Report(double score) {
  if (done_) return;
  ++trials_;
  // The start point sets the bar; a candidate must clear it by min_gain.
  if (trials_ == 1 || score > best_score_ * (1 + min_gain_)) {
    best_score_ = score;
    best_ = current_;
  }
  if (trials_ >= max_trials_) {
    done_ = true;
    return;
  }
  Advance();
}

void CoordinateSearch::Advance() {
  for (; dim_ < dims_.size(); ++dim_, candidate_ = 0) {
    const Dimension& d = dims_[dim_];
    if (d.fixed) continue;
    if (candidate_ == 0) entry_value_ = best_[dim_];
    while (candidate_ < d.candidates.size()) {
      const double value = d.candidates[candidate_++];
      // The best point as this dimension began has it: measured already.
      if (value == entry_value_) continue;
      current_ = best_;
      current_[dim_] = value;
      return;
    }
  }
  done_ = true;
}

}  // namespace tfring
