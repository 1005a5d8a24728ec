#include "runtime/link_watch.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "transport/communicator.h"
#include "base/logging.h"

namespace tfring {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string Key(int rank) { return "tfring_links/" + std::to_string(rank); }

std::string MegabytesPerSecond(double rate) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MB/s", rate / 1e6);
  return buf;
}

}  // namespace

SlowHost FindSlowHost(const std::vector<LinkSample>& samples, const std::vector<std::string>& host_of,
                      double factor, double min_bytes) {
  struct Judged {
    const std::string* a;
    const std::string* b;
    double rate;
  };
  std::vector<Judged> judged;
  for (const auto& s : samples) {
    if (s.bytes < min_bytes || host_of[s.from] == host_of[s.to]) continue;
    judged.push_back({&host_of[s.from], &host_of[s.to], s.bytes / std::max(s.seconds, 1e-6)});
  }
  SlowHost slowest;
  double worst = 1.0 / factor;  // a host's rate / the others': named below this
  std::map<std::string, bool> hosts;
  for (const auto& j : judged) hosts[*j.a] = hosts[*j.b] = true;
  for (const auto& [host, unused] : hosts) {
    std::vector<double> mine, others;
    for (const auto& j : judged) (*j.a == host || *j.b == host ? mine : others).push_back(j.rate);
    if (mine.empty() || others.empty()) continue;
    const double m = Median(mine), o = Median(others);
    if (m / o < worst) {
      worst = m / o;
      slowest = SlowHost{host, {}, m, o};
    }
  }
  for (int r = 0; r < static_cast<int>(host_of.size()) && !slowest.host_id.empty(); ++r) {
    if (host_of[r] == slowest.host_id) slowest.ranks.push_back(r);
  }
  return slowest;
}

LinkWatch::LinkWatch(int rank, int size, Store* store, Communicator* comm, StatsRecorder* stats)
    : rank_(rank), size_(size), store_(store), comm_(comm), stats_(stats),
      instance_(static_cast<int64_t>(getpid()) * 1000003 +
                std::chrono::steady_clock::now().time_since_epoch().count() % 1000003) {
  next_ = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                  std::chrono::duration<double>(kPeriodS));
}

void LinkWatch::Tick(std::chrono::steady_clock::time_point now) {
  if (off_ || now < next_ || comm_->aborted()) return;  // aborted: the store may be what failed
  next_ = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(kPeriodS));
  if (!Publish() || (rank_ == 0 && !Judge())) off_ = true;
}

// "<instance> <count> <peer> <bytes from it> <ns from it> ..." under Key(rank), for the peers
// on other hosts that sent this rank anything. The instance tells this watch's counters from
// an earlier init's under the same key.
bool LinkWatch::Publish() {
  std::ostringstream out;
  out << instance_ << ' ' << ++published_;
  const std::vector<std::string>& host_of = comm_->host_ids();
  for (int p = 0; p < size_; ++p) {
    const Link& link = comm_->peek(p);  // counters only: opens no lazy connection
    if (p == rank_ || host_of[p] == host_of[rank_] || link.bytes_received() == 0) continue;
    out << ' ' << p << ' ' << link.bytes_received() << ' ' << link.recv_flow_ns();
  }
  Status st = store_->Set(Key(rank_), out.str());
  if (!st.ok()) TFRING_LOG(LogLevel::kDebug, "transport", "off: cannot publish link rates: " << st.ToString());
  return st.ok();
}

// Rank 0: every rank's reading, the differences since the previous one (a peer missing from
// the previous one had sent nothing then), the rule.
bool LinkWatch::Judge() {
  if (last_.empty()) last_.assign(size_, {});
  std::vector<LinkSample> samples;
  for (int r = 0; r < size_; ++r) {
    std::string value;
    if (!store_->Get(Key(r), 0, &value).ok()) continue;  // not published yet (never waited for): next time
    std::istringstream in(value);
    Reading now;
    if (!(in >> now.instance >> now.count)) continue;
    double peer, bytes, ns;
    while (in >> peer >> bytes >> ns) {
      if (peer >= 0 && peer < size_ && peer != r) now.links[static_cast<int>(peer)] = {bytes, ns};
    }
    const Reading& before = last_[r];
    if (now.instance == before.instance && now.count > before.count) {
      for (const auto& [p, link] : now.links) {
        auto old = before.links.find(p);
        const double bytes_before = old == before.links.end() ? 0 : old->second.first;
        const double ns_before = old == before.links.end() ? 0 : old->second.second;
        const double moved = link.first - bytes_before, flow_ns = link.second - ns_before;
        if (moved >= 0 && flow_ns >= 0) samples.push_back({p, r, moved, flow_ns * 1e-9});
      }
    }
    last_[r] = std::move(now);
  }
  const SlowHost slow = FindSlowHost(samples, comm_->host_ids(), kSlowFactor, kMinBytes);
  const bool twice = !slow.host_id.empty() && slow.host_id == suspect_;
  suspect_ = slow.host_id;
  if (twice) Report(slow);
  if (slow.host_id.empty() && !samples.empty()) {
    reported_.clear();
    stats_->Update([](RuntimeStats& s) {
      s.slow_link_host.clear();
      s.slow_link_ranks.clear();
      s.slow_link_ratio = 0;
    });
  }
  return true;
}

void LinkWatch::Report(const SlowHost& slow) {
  const std::string host = comm_->hostname_of(slow.ranks.front());
  std::string ranks;
  for (int r : slow.ranks) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  const double ratio = slow.others_rate / std::max(slow.rate, 1.0);
  const bool warn = reported_ != slow.host_id;
  stats_->Update([&](RuntimeStats& s) {
    s.slow_link_host = host;
    s.slow_link_ranks = slow.ranks;
    s.slow_link_ratio = ratio;
    if (warn) ++s.slow_link_warnings;
  });
  if (!warn) return;
  reported_ = slow.host_id;
  char times[32];
  std::snprintf(times, sizeof(times), "%.1f", ratio);
  TFRING_LOG(LogLevel::kWarning, "stall",
             "host " << host << " (ranks " << ranks << ") is on a slow link: its links to other hosts move "
                     << MegabytesPerSecond(slow.rate) << ", the job's other links between hosts "
                     << MegabytesPerSecond(slow.others_rate) << " (" << times
                     << "x faster); every collective that crosses it waits for it. Look at that host's network "
                        "(NIC, cable, switch port, traffic shaping)");
}

}  // namespace tfring
