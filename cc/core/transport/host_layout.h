// The one model of where a group's ranks run:
//   * HostLayout: how the ranks of a group sit on hosts, in the group's own indices
//     (0..size-1: global ranks for the whole job, set-local indices for a process set),
//     made from the host ids the roster exchanged (roster_facts.h) by MakeHostLayout /
//     HostLayoutOf (communicator.h). The hierarchical algorithms
//     (collectives/hierarchical_*.cc) run inside and across hosts by it. A Group carries
//     one (communicator.h, Group::host_layout) where its ranks allow a hierarchical
//     algorithm.
//   * Topology: a derived view, the few numbers the algorithm selection table
//     (collectives/algorithm.h) reads of a group: its size, its HostLayout's shape and
//     whether the job's transport has shared memory inside hosts. Made in one place,
//     Group::topology() (communicator.h); tests of the selection make one directly.
// Immutable once made; shared between threads freely.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tfring {

struct HostLayout {
  std::vector<int32_t> local;  // the indices on this rank's host, ascending
  std::vector<int32_t> cross;  // per host (ordered by lowest index): its index of this rank's local position
  std::vector<std::vector<int32_t>> hosts;  // every host's indices, ascending, hosts as in `cross`
  // The same groups as ranks of the group's communicator (global ranks), so that a
  // collective makes its local, cross and leaders groups without allocating (Group::Local,
  // Cross, Leaders). Filled by HostLayoutOf (communicator.h), the only layout a Group carries;
  // empty from MakeHostLayout.
  std::vector<int32_t> local_ranks, cross_ranks, leader_ranks;  // leaders: each host's first
};

// What the selection table reads of a group (Group::topology()). Every rank of the group
// gets the same values (host ids are exchanged at init and TFRING_SHM must match).
struct Topology {
  int ranks = 1;
  // The group (the whole job or a process set) spans >= 2 hosts of the same number (>= 2)
  // of its ranks each (it carries a HostLayout): only then can a hierarchical algorithm run.
  bool across_hosts = false;
  int hosts = 1;           // with across_hosts: the layout's hosts.size()
  int ranks_per_host = 1;  // with across_hosts: the layout's local.size()
  // Two ranks of the job share a host and shared memory is on (TFRING_SHM), else TCP only
  // (Communicator::shm_inside_hosts).
  bool shm_inside_hosts = false;
};

// The layout of a group whose member i runs on host `host_of[i]`, seen from member `me`.
// False (no layout: the flat algorithms run) for one host, one rank per host, or hosts with
// different rank counts. Pure: every member computes the same hosts from the same ids.
bool MakeHostLayout(const std::vector<std::string>& host_of, int me, HostLayout* layout);

}  // namespace tfring
