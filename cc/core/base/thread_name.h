// Names for tfring's threads, as `top -H`, `ps -L`, perf, gdb and /proc/<pid>/task/*/comm
// show them ("tfring-loop" rather than the process's name on every thread).
//
//   tfring-loop   the background thread: negotiation and collectives (runtime/job.cc)
//   tfring-live   the liveness watch over peers' connections (transport/liveness.cc)
//   tfring-park   accepts the connections of lazily connected peers (transport/connection_park.cc)
//   tfring-store  the rendezvous store's acceptor and its clients (rendezvous/tcp_store.cc)
//   tfring-hier   a hierarchical allreduce's cross-host helper (collectives/hierarchical_allreduce.cc)
//
// Call from the thread to be named, first thing. Linux keeps 15 characters; elsewhere, or on
// failure, the name is left as it was (a name is diagnostics only). Thread-safe.
#pragma once

#include <pthread.h>

namespace tfring {

inline void NameThisThread(const char* name) {
#if defined(__linux__)
  pthread_setname_np(pthread_self(), name);
#else
  (void)name;
#endif
}

}  // namespace tfring
