// ConnectionPark: the listener of a communicator whose data connections are made lazily
// (CommunicatorOptions::lazy_data). For the communicator's whole life it accepts
// connections on its own thread, admits each (authentication and hello, by the caller's
// rule) and keeps it under its peer's rank until the background thread takes it.
//
// Whichever rank of a pair needs the connection first dials it, and the peer's park admits
// it on its own thread: a rank never waits for its peer's background thread to make a
// connection (the peer may be busy, e.g. in a transfer with a third rank, or behind a slow
// callback), just as a small send never waited on a full mesh. When both dial, the lower
// rank's connection wins: a park declines the dial of a higher peer that this rank has
// dialled itself (Decide), and that peer then takes this rank's connection from its own
// park instead; a lower rank's dial is always kept.
//
// Threads: Start() and Take() from the owner's (background) thread; Stop() from any thread
// (Communicator::Abort); the accept loop on its own thread; the parked connections under a
// mutex. Every wait is bounded: Take() by its deadline and the abort flag, the loop by
// Stop().
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <sys/types.h>

#include <cstdint>
#include <memory>

#include "base/socket.h"
#include "transport/shm_ring.h"

namespace tfring {

// A data connection as it is handed over: the socket and, between ranks of one host, the
// pair's shared-memory rings and single-copy facts (shm_pairing.h; Link's fields of the
// same names).
struct ParkedConnection {
  Socket socket;
  std::unique_ptr<ShmRing> tx, rx;    // to / from the peer; null: none
  pid_t read_posts_of = 0;            // Link::ReadPostsOf
  size_t post_sends_from = SIZE_MAX;  // Link::PostSendsFrom
};

class ConnectionPark {
 public:
  // The verdict a park sends back on each admitted dial (one byte).
  static constexpr char kAccept = 'A';
  static constexpr char kDecline = 'D';

  // The peer rank a new connection (`c->socket`) is from, after whatever checks and set-up
  // it needs (blocking, bounded by the caller; it may fill the rest of *c); -1 to refuse it
  // (the callback logs why).
  using Admit = std::function<int(ParkedConnection* c)>;

  ConnectionPark() = default;
  ~ConnectionPark();  // Stop(), then joins the accept loop
  ConnectionPark(const ConnectionPark&) = delete;
  ConnectionPark& operator=(const ConnectionPark&) = delete;

  // Takes the listener and starts accepting. `rank`: this rank (for Decide).
  void Start(Listener listener, Admit admit, int rank);
  // Before dialling `peer`: false with *out filled when its connection is already parked
  // (no dial needed); true when this rank should dial (from then on it has dialled `peer`).
  bool BeginDial(int peer, ParkedConnection* out);
  // Waits for `peer`'s connection and moves it to *out. kTimeout at `deadline`, kAborted
  // once `abort` is set or the park stopped.
  Status Take(int peer, Deadline deadline, const std::atomic<bool>* abort, ParkedConnection* out);
  // Closes the listener and drops what is parked; the accept loop ends within an
  // admission's bound (not waited for: any thread may call this, e.g. an abort).
  // Idempotent.
  void Stop();
  bool running() const { return thread_.joinable(); }

 private:
  void Loop();
  // Under mu_: keep `peer`'s dial, unless this rank is the lower one and dialled it too.
  bool Decide(int peer) const { return !(rank_ < peer && dialed_.count(peer)); }

  Listener listener_;
  Admit admit_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;  // guards parked_, stopped_
  std::condition_variable parked_cv_;
  std::map<int, ParkedConnection> parked_;
  std::set<int> dialed_;  // peers this rank dialled (BeginDial returned true)
  int rank_ = 0;
  bool stopped_ = false;
  std::once_flag stop_once_;
};

}  // namespace tfring
