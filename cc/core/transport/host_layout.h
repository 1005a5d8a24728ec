// HostLayout: how the ranks of a group sit on hosts, in the group's own indices (0..size-1:
// global ranks for the whole job, set-local indices for a process set). The hierarchical
// algorithms (collectives/hierarchical_*.cc) run inside and across hosts by it, and the
// selection table (collectives/algorithm.h) reads its shape. A Group carries one
// (communicator.h, Group::host_layout) where its ranks allow a hierarchical algorithm.
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

// The layout of a group whose member i runs on host `host_of[i]`, seen from member `me`.
// False (no layout: the flat algorithms run) for one host, one rank per host, or hosts with
// different rank counts. Pure: every member computes the same hosts from the same ids.
bool MakeHostLayout(const std::vector<std::string>& host_of, int me, HostLayout* layout);

}  // namespace tfring
