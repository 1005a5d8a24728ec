// CommunicatorOptions: what a Communicator is built from (communicator.h), filled from the
// loaded settings by FromConfig (communicator_options.cc, the one place where settings
// become transport options) and by the job with what depends on reaching the store.
// A plain value; read by every step of Communicator::Create (mesh_bootstrap.h,
// shm_setup.h, lazy_connections.h).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/config.h"

namespace tfring {

// Single-copy reads between local ranks (TFRING_SHM_CMA).
enum class CmaMode {
  kOff,   // never
  kAuto,  // where the connection-time probe succeeds; silently not elsewhere
  kOn,    // required: Create() fails when a local pair cannot use it
};

struct CommunicatorOptions {
  int rank = 0;
  int size = 1;
  std::string secret;
  std::string advertise_host = "127.0.0.1";  // address other ranks use to reach us
  std::string bind_host;                      // "" = same as advertise_host
  double start_timeout_s = 120;               // whole mesh setup
  double timeout_s = 30;                      // each transfer once running
  bool shm = true;                            // shared-memory rings between local ranks
  size_t shm_ring_bytes = 4 << 20;            // per direction, power of two
  bool shm_control = true;                    // control messages through shared memory too
  std::string host_id;                        // ranks with equal ids share memory
  std::vector<int> cpus;                      // this process's CPU affinity mask (RosterFacts::host_cpus)
  // Settings that change what goes on the wire, as one string ("NAME=value;..."): Create()
  // fails, naming the rank and both values, when a rank's differs from rank 0's.
  std::string must_match;
  CmaMode cma = CmaMode::kOff;                // single-copy sends between local ranks
  size_t cma_min_bytes = 1 << 20;             // ... of at least this many bytes
  double peer_timeout_s = 30;                 // TCP keepalive / user timeout (0 = kernel default)
  std::string hostname;                       // told to the peers watching this rank
  // Data connections made on first use instead of a full mesh at Create()
  // (TFRING_DATA_CONNECTIONS). The shared-memory rings are still made at Create().
  bool lazy_data = false;
  int control_fanout = 4;                     // children per rank in the control tree (0: star)
  int spin_us = 0;                            // data and control waits spin first (Socket::spin_us)
  // Names this init of the job (the store prefix of its rendezvous): a hello from another
  // session, e.g. a process of an elastic job's earlier generation, is refused.
  std::string session;

  // Every field a loaded Config decides, and this process's host id (hostname, boot id and
  // TFRING_CROSS_RANK), hostname and CPU mask (communicator_options.cc). The job fills what
  // depends on reaching the store: advertise_host, bind_host and session.
  static CommunicatorOptions FromConfig(const Config& config);
};

}  // namespace tfring
