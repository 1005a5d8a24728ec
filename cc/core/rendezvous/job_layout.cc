#include "rendezvous/job_layout.h"

#include <map>
#include <set>

#include "base/wire.h"
#include "rendezvous/roster.h"

namespace tfring {
namespace {

// A host id is "hostname/boot id/cross rank" (communicator_options.cc): its first two parts
// name the machine, which emulated hosts (network namespaces) share.
std::string MachineOf(const std::string& host_id) { return host_id.substr(0, host_id.rfind('/')); }

// The index of `key` in `order` (appended when new).
int IndexOf(const std::string& key, std::map<std::string, int>* index, std::vector<std::string>* order) {
  auto [it, added] = index->emplace(key, static_cast<int>(order->size()));
  if (added) order->push_back(key);
  return it->second;
}

// Per-rank indices as (index, ranks in a row) runs.
void WriteRuns(const std::vector<int>& by_rank, WireWriter* w) {
  std::vector<std::pair<int, uint32_t>> runs;
  for (int i : by_rank) {
    if (runs.empty() || runs.back().first != i) runs.emplace_back(i, 0);
    ++runs.back().second;
  }
  w->U32(static_cast<uint32_t>(runs.size()));
  for (const auto& [i, n] : runs) {
    w->U32(static_cast<uint32_t>(i));
    w->U32(n);
  }
}

// False when an index is not below `limit` or the runs cover more than `size` ranks.
bool ReadRuns(WireReader* r, size_t limit, int size, std::vector<int>* by_rank) {
  by_rank->clear();
  const uint32_t runs = r->Count(8);
  for (uint32_t k = 0; k < runs && r->ok(); ++k) {
    const uint32_t i = r->U32(), n = r->U32();
    if (i >= limit || n > static_cast<uint32_t>(size) - by_rank->size()) return false;
    by_rank->insert(by_rank->end(), n, static_cast<int>(i));
  }
  return r->ok() && by_rank->size() == static_cast<size_t>(size);
}

}  // namespace

JobLayout JobLayout::FromEntries(const std::vector<RosterEntry>& entries) {
  JobLayout layout;
  std::map<std::string, int> host_index, machine_index, hostname_index;
  std::vector<std::string> host_ids, machine_ids;
  std::vector<std::set<int>> host_cpus, machine_cpus;
  for (const RosterEntry& e : entries) {
    const int h = IndexOf(e.host_id, &host_index, &host_ids);
    if (static_cast<size_t>(h) == layout.hosts.size()) {
      const int m = IndexOf(MachineOf(e.host_id), &machine_index, &machine_ids);
      if (static_cast<size_t>(m) == layout.machines.size()) {
        layout.machines.emplace_back();
        machine_cpus.emplace_back();
      }
      layout.hosts.push_back(Host{e.host_id, 0, m});
      host_cpus.emplace_back();
    }
    const int m = layout.hosts[static_cast<size_t>(h)].machine;
    layout.host_of.push_back(h);
    layout.hostname_of.push_back(IndexOf(e.hostname, &hostname_index, &layout.hostnames));
    ++layout.machines[static_cast<size_t>(m)].ranks;
    host_cpus[static_cast<size_t>(h)].insert(e.cpus.begin(), e.cpus.end());
    machine_cpus[static_cast<size_t>(m)].insert(e.cpus.begin(), e.cpus.end());
  }
  for (size_t h = 0; h < layout.hosts.size(); ++h) layout.hosts[h].cpus = static_cast<int>(host_cpus[h].size());
  for (size_t m = 0; m < layout.machines.size(); ++m) {
    layout.machines[m].cpus = static_cast<int>(machine_cpus[m].size());
  }
  return layout;
}

std::string JobLayout::Encode() const {
  WireWriter w;
  w.U32(static_cast<uint32_t>(machines.size()));
  for (const Machine& m : machines) {
    w.U32(static_cast<uint32_t>(m.ranks));
    w.U32(static_cast<uint32_t>(m.cpus));
  }
  w.U32(static_cast<uint32_t>(hosts.size()));
  for (const Host& h : hosts) {
    w.Str(h.id);
    w.U32(static_cast<uint32_t>(h.cpus));
    w.U32(static_cast<uint32_t>(h.machine));
  }
  w.U32(static_cast<uint32_t>(hostnames.size()));
  for (const std::string& name : hostnames) w.Str(name);
  WriteRuns(host_of, &w);
  WriteRuns(hostname_of, &w);
  return w.Take();
}

bool JobLayout::Decode(const std::string& bytes, int size, JobLayout* out) {
  WireReader r(bytes);
  JobLayout layout;
  layout.machines.resize(r.Count(8));
  for (Machine& m : layout.machines) {
    m.ranks = static_cast<int>(r.U32());
    m.cpus = static_cast<int>(r.U32());
  }
  layout.hosts.resize(r.Count(12));
  for (Host& h : layout.hosts) {
    h.id = r.Str();
    h.cpus = static_cast<int>(r.U32());
    const uint32_t machine = r.U32();
    if (machine >= layout.machines.size()) return false;
    h.machine = static_cast<int>(machine);
  }
  layout.hostnames.resize(r.Count(4));
  for (std::string& name : layout.hostnames) name = r.Str();
  if (!ReadRuns(&r, layout.hosts.size(), size, &layout.host_of) ||
      !ReadRuns(&r, layout.hostnames.size(), size, &layout.hostname_of) || !r.AtEnd()) {
    return false;
  }
  *out = std::move(layout);
  return true;
}

}  // namespace tfring
