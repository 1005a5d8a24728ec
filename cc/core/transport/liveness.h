// PeerLiveness: tells a frozen or cut-off peer from a slow one, on its own thread.
//
// Progress (a tensor every rank submitted) depends on the user's code; liveness must not.
// Each rank runs one liveness thread that owns its heartbeat sockets (Communicator::heartbeat:
// a ring, each rank watching its two neighbours): every `interval` it pings each peer,
// answers the peers' pings at once, and counts any message from a peer as a sign of life.
// A peer judges by its own interval, so ranks with different settings never blame each
// other. Any set of peers works (tests also build stars).
// The thread never touches the user's code, the GIL or the runtime's background thread,
// so a rank busy in a long evaluation, a checkpoint or a huge transfer keeps beating; only
// a rank whose process cannot run at all (SIGSTOP, a paused VM, a host swapped out) or
// whose network drops packets without a reset falls silent.
//
// A peer silent for `timeout` is lost: the thread calls `on_lost(rank, status)` once with a
// kPeerLost status naming the rank, its host and how long it was silent, and stops. It
// first passes the verdict to its other peers, and every rank that receives one passes it
// on to its other peers before declaring it too: around a ring the verdict reaches every
// rank from both of the lost rank's neighbours (n/2 hops, each at once, not at a beat), so
// a rank blocked in a transfer with the lost one learns of it without watching it.
//
// Departures are not losses: a peer that closes its heartbeat socket (exited, crashed: the
// control channel reports that with its own message) or says goodbye (Stop(), orderly
// shutdown) is no longer watched.
//
// A rank that was itself frozen reads everything its peers sent meanwhile before it judges
// them, so waking up from SIGSTOP never blames a live peer.
//
// Thread-safety: Start() and Stop() from one thread (the runtime's), never from on_lost.
// on_lost runs on the liveness thread and must not block on the runtime's thread.
// Ownership: the sockets belong to the Communicator, which must outlive Stop().
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/socket.h"
#include "base/status.h"
#include "base/unique_fd.h"

namespace tfring {

struct LivenessPeer {
  int rank = 0;
  std::string host;  // hostname the peer reported at connection time
  Socket* socket = nullptr;
  // The other ranks on the peer's host as the verdict names them (", with rank 5, 6";
  // PeerLiveness::MatesOf): a lost host takes them all. Empty: none, or not known.
  std::string mates;
};

class PeerLiveness {
 public:
  using LostCallback = std::function<void(int rank, const Status& status)>;

  // Beat interval for a timeout: a tenth of it, between 50 ms and 1 s.
  static double IntervalFor(double timeout_s);
  // LivenessPeer::mates of `peer`, from every rank's host id (Communicator::host_ids()):
  // ", with rank A, B" (at most 8 named, then "and N more"; Communicator::DescribePeer's
  // words), or "" when it is alone on its host.
  static std::string MatesOf(int peer, const std::vector<std::string>& host_ids);

  // `timeout_s` <= 0 or no peers: Start() does nothing (liveness off).
  PeerLiveness(int rank, std::vector<LivenessPeer> peers, double timeout_s, LostCallback on_lost);
  ~PeerLiveness();  // Stop()
  PeerLiveness(const PeerLiveness&) = delete;
  PeerLiveness& operator=(const PeerLiveness&) = delete;

  void Start();
  // Says goodbye to the peers still watched (best effort, bounded) and joins the thread.
  // Idempotent.
  void Stop();

 private:
  struct Watched;
  void Run();
  void Beat(std::vector<Watched>& watched);
  void Read(std::vector<Watched>* watched, Watched& w);
  // Sends a verdict about `lost` to every watched peer still active but `lost` and `from`.
  void PassOn(std::vector<Watched>& watched, const std::string& verdict, int lost, int from);
  void Declare(int rank, const std::string& host, const std::string& mates, double silent_s,
               const std::string& how);

  const int rank_;
  std::vector<LivenessPeer> peers_;
  const double timeout_s_;
  const double interval_s_;
  LostCallback on_lost_;
  std::atomic<bool> stop_{false};
  bool declared_ = false;  // liveness thread only
  UniqueFd wake_fd_;       // eventfd: Stop() wakes the thread at once
  std::thread thread_;
};

}  // namespace tfring
