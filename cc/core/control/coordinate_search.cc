#include "control/coordinate_search.h"

#include <utility>

namespace tfring {

CoordinateSearch::CoordinateSearch(std::vector<Dimension> dimensions, int max_trials, double min_gain)
    : dims_(std::move(dimensions)), max_trials_(max_trials), min_gain_(min_gain) {
  for (const auto& d : dims_) current_.push_back(d.start);
  best_ = current_;
  done_ = max_trials_ <= 0;
  BeginDimension(0);  // the first trial (the start point) is its opening
}

bool CoordinateSearch::Searchable(size_t i) const {
  if (dims_[i].fixed) return false;
  for (double v : dims_[i].candidates) {
    if (v != best_[i]) return true;
  }
  return false;
}

void CoordinateSearch::BeginDimension(size_t from) {
  for (dim_ = from; dim_ < dims_.size() && !Searchable(dim_); ++dim_) {
  }
  candidate_ = 0;
  top_score_ = -1;
  current_ = best_;
}

bool CoordinateSearch::NextCandidate() {
  const Dimension& d = dims_[dim_];
  while (candidate_ < d.candidates.size()) {
    const double value = d.candidates[candidate_++];
    if (value == best_[dim_]) continue;  // the opening measured it (best_ changes only in Decide)
    current_ = best_;
    current_[dim_] = value;
    return true;
  }
  return false;
}

void CoordinateSearch::Report(double score) {
  if (done_) return;
  ++trials_;
  switch (phase_) {
    case Phase::kOpening:
      opening_ = score;
      best_score_ = score;
      break;
    case Phase::kCandidate:
      if (score > top_score_) {
        top_score_ = score;
        top_value_ = current_[dim_];
      }
      break;
    case Phase::kConfirm:
      confirm_ = score;
      break;
    case Phase::kClosing:
      Decide(score);
      break;
  }
  if (trials_ >= max_trials_) {
    done_ = true;
    return;
  }
  Advance();
}

void CoordinateSearch::Decide(double closing) {
  const double entry_score = (opening_ + closing) / 2;
  const double top_score = (top_score_ + confirm_) / 2;
  if (top_score > entry_score * (1 + min_gain_)) {
    best_[dim_] = top_value_;
    best_score_ = top_score;
    opening_ = confirm_;
  } else {
    best_score_ = entry_score;
    opening_ = closing;
  }
}

void CoordinateSearch::Advance() {
  switch (phase_) {
    case Phase::kOpening:
    case Phase::kClosing:
      if (phase_ == Phase::kClosing) BeginDimension(dim_ + 1);
      if (dim_ == dims_.size()) {  // every setting searched (or none to search)
        done_ = true;
        return;
      }
      NextCandidate();  // a searchable dimension has one
      phase_ = Phase::kCandidate;
      return;
    case Phase::kCandidate:
      if (NextCandidate()) return;
      phase_ = Phase::kConfirm;  // the top candidate again
      current_ = best_;
      current_[dim_] = top_value_;
      return;
    case Phase::kConfirm:
      phase_ = Phase::kClosing;  // the best point again
      current_ = best_;
      return;
  }
}

}  // namespace tfring
