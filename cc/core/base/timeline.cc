#include "base/timeline.h"

#include <cerrno>
#include <cstring>

namespace tfring {
namespace {

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

Timeline::~Timeline() { Stop(); }

Status Timeline::Start(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  if (file_ != nullptr) {
    return Status::Precondition("a timeline is already being written; call stop_timeline() first");
  }
  file_ = std::fopen(path.c_str(), "w");
  if (file_ == nullptr) {
    return Status::InvalidArgument("cannot write the timeline to '" + path + "': " + std::strerror(errno));
  }
  origin_ = Clock::now();
  rows_.clear();
  std::fputs("[\n", file_);
  WriteLocked(R"J({"name":"process_name","ph":"M","pid":0,"args":{"name":"tfring collectives, rank 0 view"}})J");
  active_.store(true);
  return Status::OK();
}

void Timeline::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  active_.store(false);
  if (file_ == nullptr) return;
  std::fputs("{}]\n", file_);
  std::fclose(file_);
  file_ = nullptr;
}

double Timeline::Micros(Clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - origin_).count();
}

int Timeline::RowLocked(const std::string& tensor) {
  auto it = rows_.find(tensor);
  if (it != rows_.end()) return it->second;
  int row = static_cast<int>(rows_.size()) + 1;
  rows_[tensor] = row;
  WriteLocked(R"({"name":"thread_name","ph":"M","pid":0,"tid":)" + std::to_string(row) +
              R"(,"args":{"name":")" + JsonEscape(tensor) + R"("}})");
  return row;
}

void Timeline::WriteLocked(const std::string& event) {
  std::fputs(event.c_str(), file_);
  std::fputs(",\n", file_);
}

void Timeline::Span(const std::string& tensor, const char* what, Clock::time_point begin,
                    Clock::time_point end, const std::string& args_json) {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (file_ == nullptr) return;
  int row = RowLocked(tensor);
  char head[160];
  std::snprintf(head, sizeof(head), R"({"name":"%s","ph":"X","pid":0,"tid":%d,"ts":%.3f,"dur":%.3f)", what, row,
                Micros(begin), Micros(end) - Micros(begin));
  WriteLocked(std::string(head) + (args_json.empty() ? "" : ",\"args\":" + args_json) + "}");
}

void Timeline::Mark(const std::string& tensor, const std::string& what, Clock::time_point when) {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (file_ == nullptr) return;
  int row = RowLocked(tensor);
  char ts[64];
  std::snprintf(ts, sizeof(ts), "%.3f", Micros(when));
  WriteLocked(R"({"name":")" + JsonEscape(what) + R"(","ph":"i","s":"t","pid":0,"tid":)" + std::to_string(row) +
              R"(,"ts":)" + ts + "}");
}

}  // namespace tfring
