#include "transport/connection_park.h"

#include <algorithm>
#include <chrono>

#include "base/logging.h"
#include "base/thread_name.h"

namespace tfring {

void ConnectionPark::Start(Listener listener, Admit admit, int rank) {
  rank_ = rank;
  listener_ = std::move(listener);
  admit_ = std::move(admit);
  thread_ = std::thread([this] {
    NameThisThread("tfring-park");
    Loop();
  });
}

void ConnectionPark::Loop() {
  while (!stop_.load()) {
    ParkedConnection c;
    Socket& s = c.socket;
    Status st = listener_.Accept(Deadline::After(1.0), &s, &stop_);
    if (stop_.load()) break;
    if (!st.ok()) {
      if (st.code() != ErrorCode::kTimeout) {
        TFRING_LOG(LogLevel::kDebug, "transport", "data listener: " << st.message());
        std::this_thread::sleep_for(std::chrono::milliseconds(10));  // EMFILE and the like: do not spin
      }
      continue;
    }
    const int peer = admit_(&c);
    if (peer < 0) continue;
    bool keep;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) break;
      keep = Decide(peer);
      // The verdict travels on the connection itself, before the peer may use it (one byte
      // on a fresh connection: it never waits for buffer space).
      Status sent = s.SendMessage(std::string(1, keep ? kAccept : kDecline), Deadline::After(1.0));
      if (keep && sent.ok()) parked_[peer] = std::move(c);  // a second one from a peer replaces the first
    }
    if (keep) parked_cv_.notify_all();
  }
}

bool ConnectionPark::BeginDial(int peer, ParkedConnection* out) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = parked_.find(peer);
  if (it != parked_.end()) {
    *out = std::move(it->second);
    parked_.erase(it);
    return false;
  }
  dialed_.insert(peer);
  return true;
}

Status ConnectionPark::Take(int peer, Deadline deadline, const std::atomic<bool>* abort, ParkedConnection* out) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    auto it = parked_.find(peer);
    if (it != parked_.end()) {
      *out = std::move(it->second);
      parked_.erase(it);
      return Status::OK();
    }
    if (stopped_ || (abort != nullptr && abort->load())) {
      return Status::Aborted("waiting for rank " + std::to_string(peer) + "'s data connection: aborted");
    }
    if (deadline.expired()) {
      return Status::Timeout("rank " + std::to_string(peer) + " did not open its data connection in time");
    }
    parked_cv_.wait_for(lock, std::chrono::milliseconds(std::min(50, std::max(1, deadline.MillisLeft(50)))));
  }
}

void ConnectionPark::Stop() {
  std::call_once(stop_once_, [this] {
    stop_.store(true);
    listener_.Shutdown();  // wakes Accept()
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    parked_.clear();
  });
  parked_cv_.notify_all();
}

ConnectionPark::~ConnectionPark() {
  Stop();
  if (thread_.joinable()) thread_.join();  // an admission in progress ends within its own bound
}

}  // namespace tfring
