#include "transport/host_layout.h"

#include <algorithm>
#include <map>

namespace tfring {

bool MakeHostLayout(const std::vector<std::string>& host_of, int me, HostLayout* layout) {
  const int n = static_cast<int>(host_of.size());
  if (me < 0 || me >= n) return false;
  // Hosts in the order of their lowest index; each host's indices ascending.
  std::vector<std::vector<int32_t>> hosts;
  std::map<std::string, size_t> index_of;
  for (int i = 0; i < n; ++i) {
    auto [it, added] = index_of.emplace(host_of[static_cast<size_t>(i)], hosts.size());
    if (added) hosts.emplace_back();
    hosts[it->second].push_back(i);
  }
  const size_t per_host = hosts[0].size();
  for (const auto& h : hosts) {
    if (h.size() != per_host) return false;  // hosts with different rank counts: flat ring
  }
  if (hosts.size() < 2 || per_host < 2) return false;  // one host, or one rank per host
  const auto& mine = hosts[index_of[host_of[static_cast<size_t>(me)]]];
  const size_t local_index = static_cast<size_t>(std::find(mine.begin(), mine.end(), me) - mine.begin());
  layout->local = mine;
  layout->cross.clear();
  for (const auto& h : hosts) layout->cross.push_back(h[local_index]);
  layout->hosts = std::move(hosts);
  return true;
}

}  // namespace tfring
