#include "transport/liveness.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "base/logging.h"
#include "base/thread_name.h"
#include "base/wire.h"

namespace tfring {
namespace {

using Clock = std::chrono::steady_clock;

enum class BeatKind : uint8_t {
  kPing = 1,  // are you there? (sent every interval; answered at once)
  kPong = 2,  // yes
  kBye = 3,   // I am leaving in order: stop watching me
  kLost = 4,  // a verdict, passed on: rank R (host H, mates M) was silent to rank J for S seconds
};

constexpr size_t kMaxBeatMessage = 4096;
constexpr double kByeTimeoutS = 0.2;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", s);
  return buf;
}

std::string Encode(BeatKind kind) {
  WireWriter w;
  w.U8(static_cast<uint8_t>(kind));
  return w.Take();
}

}  // namespace

struct PeerLiveness::Watched {
  LivenessPeer peer;
  Clock::time_point last_heard;
  bool active = true;
};

double PeerLiveness::IntervalFor(double timeout_s) {
  if (timeout_s <= 0) return 1.0;
  return std::min(1.0, std::max(0.05, timeout_s / 10));
}

PeerLiveness::PeerLiveness(int rank, std::vector<LivenessPeer> peers, double timeout_s, LostCallback on_lost)
    : rank_(rank),
      peers_(std::move(peers)),
      timeout_s_(timeout_s),
      interval_s_(IntervalFor(timeout_s)),
      on_lost_(std::move(on_lost)) {}

PeerLiveness::~PeerLiveness() {
  Stop();  // wake_fd_ closes after the thread is joined
}

void PeerLiveness::Start() {
  if (peers_.empty() || thread_.joinable()) return;
  wake_fd_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  thread_ = std::thread([this] {
    NameThisThread("tfring-live");
    Run();
  });
}

void PeerLiveness::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd_.get(), &one, sizeof(one));
  (void)ignored;
  thread_.join();
}

void PeerLiveness::Run() {
  std::vector<Watched> watched;
  for (const auto& p : peers_) watched.push_back(Watched{p, Clock::now(), true});
  auto next_beat = Clock::now();
  while (!stop_.load() && !declared_) {
    if (Clock::now() >= next_beat) {
      Beat(watched);
      next_beat = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(interval_s_));
    }
    std::vector<pollfd> fds{pollfd{wake_fd_.get(), POLLIN, 0}};
    std::vector<Watched*> polled;
    for (auto& w : watched) {
      if (!w.active) continue;
      fds.push_back(pollfd{w.peer.socket->fd(), POLLIN, 0});
      polled.push_back(&w);
    }
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_beat - Clock::now()).count();
    if (poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, wait))) < 0) continue;
    for (size_t i = 1; i < fds.size() && !declared_; ++i) {
      if (fds[i].revents) Read(&watched, *polled[i - 1]);
    }
    // Judge only after reading what arrived: a rank that was frozen itself finds its peers'
    // beats waiting and does not blame them.
    for (auto& w : watched) {
      if (declared_ || timeout_s_ <= 0 || !w.active) continue;
      const double silent = Since(w.last_heard);
      if (silent < timeout_s_) continue;
      // Tell the other watched peers first: each passes it on (a ring of watchers floods
      // it both ways around; rank 0 of a star tells every worker).
      WireWriter msg;
      msg.U8(static_cast<uint8_t>(BeatKind::kLost));
      msg.I32(w.peer.rank);
      msg.F64(silent);
      msg.Str(w.peer.host);
      msg.I32(rank_);
      msg.Str(w.peer.mates);
      PassOn(watched, msg.Take(), w.peer.rank, -1);
      Declare(w.peer.rank, w.peer.host, w.peer.mates, silent, "has not answered");
    }
  }
  // Goodbye: an orderly end (or a failure the control channel reports) is not a loss.
  if (!declared_) {
    const std::string bye = Encode(BeatKind::kBye);
    for (auto& w : watched) {
      if (w.active) w.peer.socket->SendMessage(bye, Deadline::After(kByeTimeoutS));
    }
  }
}

void PeerLiveness::Beat(std::vector<Watched>& watched) {
  const std::string ping = Encode(BeatKind::kPing);
  for (auto& w : watched) {
    if (!w.active) continue;
    // A frozen peer stops reading; its socket buffer still takes years of beats, and the
    // short deadline keeps this thread on time even if it fills.
    Status st = w.peer.socket->SendMessage(ping, Deadline::After(interval_s_));
    if (!st.ok() && st.code() != ErrorCode::kTimeout) {
      TFRING_LOG(LogLevel::kDebug, "runtime", "heartbeat to rank " << w.peer.rank << " ended: " << st.message());
      w.active = false;  // closed: it left (the control channel says why)
    }
  }
}

void PeerLiveness::Read(std::vector<Watched>* watched, Watched& w) {
  std::string bytes;
  Status st = w.peer.socket->RecvMessage(&bytes, kMaxBeatMessage, Deadline::After(interval_s_));
  if (!st.ok()) {
    TFRING_LOG(LogLevel::kDebug, "runtime", "heartbeat from rank " << w.peer.rank << " ended: " << st.message());
    w.active = false;
    return;
  }
  w.last_heard = Clock::now();
  WireReader r(bytes);
  const auto kind = static_cast<BeatKind>(r.U8());
  if (kind == BeatKind::kPing) {  // answered at once: the peer judges by its own interval
    w.peer.socket->SendMessage(Encode(BeatKind::kPong), Deadline::After(interval_s_));
  } else if (kind == BeatKind::kBye) {
    w.active = false;
  } else if (kind == BeatKind::kLost) {
    const int lost = r.I32();
    const double silent = r.F64();
    const std::string host = r.Str();
    const int judge = r.I32();
    const std::string mates = r.Str();
    if (!r.ok() || lost == rank_) return;
    PassOn(*watched, bytes, lost, w.peer.rank);
    Declare(lost, host, mates, silent, "was silent to rank " + std::to_string(judge));
  }
}

void PeerLiveness::PassOn(std::vector<Watched>& watched, const std::string& verdict, int lost, int from) {
  for (auto& other : watched) {
    if (other.active && other.peer.rank != lost && other.peer.rank != from) {
      other.peer.socket->SendMessage(verdict, Deadline::After(interval_s_));
    }
  }
}

std::string PeerLiveness::MatesOf(int peer, const std::vector<std::string>& host_ids) {
  if (peer < 0 || peer >= static_cast<int>(host_ids.size()) || host_ids[peer].empty()) return "";
  constexpr int kMaxNamed = 8;
  std::string out;
  int named = 0, more = 0;
  for (int p = 0; p < static_cast<int>(host_ids.size()); ++p) {
    if (p == peer || host_ids[p] != host_ids[peer]) continue;
    if (named == kMaxNamed) {
      ++more;
      continue;
    }
    out += (named++ == 0 ? ", with rank " : ", ") + std::to_string(p);
  }
  if (more) out += " and " + std::to_string(more) + " more";
  return out;
}

void PeerLiveness::Declare(int rank, const std::string& host, const std::string& mates, double silent_s,
                           const std::string& how) {
  declared_ = true;
  char timeout[32];
  std::snprintf(timeout, sizeof(timeout), "%g", timeout_s_);
  Status lost = Status::PeerLost(
      "rank " + std::to_string(rank) + " (host " + (host.empty() ? "?" : host) + mates + ") " + how + " for " +
      Seconds(silent_s) + " s (TFRING_PEER_TIMEOUT_S=" + timeout +
      "): its process is frozen (stopped by a signal or a debugger, a paused VM, a host swapped "
      "out) or the network to it drops packets. Collectives need every rank.");
  TFRING_LOG(LogLevel::kDebug, "runtime", lost.message());  // Fail() logs it with context
  on_lost_(rank, lost);
}

}  // namespace tfring
