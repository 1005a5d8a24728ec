#include "transport/roster_facts.h"

#include <map>
#include <set>

namespace tfring {

RosterFacts RosterFacts::Alone(const CommunicatorOptions& opt) {
  RosterFacts f;
  f.rank = opt.rank;
  f.size = opt.size;
  f.hostnames.resize(static_cast<size_t>(opt.size));
  f.host_ids.assign(static_cast<size_t>(opt.size), opt.host_id);
  f.host_cpus = static_cast<int>(std::set<int>(opt.cpus.begin(), opt.cpus.end()).size());
  return f;
}

RosterFacts RosterFacts::FromLayout(const CommunicatorOptions& opt, const JobLayout& layout) {
  RosterFacts f;
  f.rank = opt.rank;
  f.size = opt.size;
  f.hostnames.reserve(layout.host_of.size());
  f.host_ids.reserve(layout.host_of.size());
  for (int h : layout.host_of) f.host_ids.push_back(layout.hosts[static_cast<size_t>(h)].id);
  for (int h : layout.hostname_of) f.hostnames.push_back(layout.hostnames[static_cast<size_t>(h)]);
  const JobLayout::Host& mine = layout.hosts[static_cast<size_t>(layout.host_of[static_cast<size_t>(opt.rank)])];
  const JobLayout::Machine& machine = layout.machines[static_cast<size_t>(mine.machine)];
  f.hosts = static_cast<int>(layout.hosts.size());
  f.host_cpus = mine.cpus;
  f.machine_ranks = machine.ranks;
  f.machine_cpus = machine.cpus;
  return f;
}

std::string RosterFacts::DescribePeer(int peer) const {
  std::string out = "rank " + std::to_string(peer);
  if (peer < 0 || peer >= size || static_cast<int>(host_ids.size()) != size) return out;
  const std::string& id = host_ids[peer];
  if (id.empty() || id == host_ids[rank]) return out;  // this host: nothing to tell apart
  const std::string& name = hostnames[peer];
  out += " (host " + (name.empty() ? id.substr(0, id.find('/')) : name);  // host id: hostname/boot id/cross rank
  constexpr int kMaxNamed = 8;
  int named = 0, more = 0;
  for (int p = 0; p < size; ++p) {
    if (p == peer || host_ids[p] != id) continue;
    if (named == kMaxNamed) {
      ++more;
      continue;
    }
    out += (named++ == 0 ? ", with rank " : ", ") + std::to_string(p);
  }
  if (more) out += " and " + std::to_string(more) + " more";
  return out + ")";
}

bool RosterFacts::shares_a_host() const {
  return std::set<std::string>(host_ids.begin(), host_ids.end()).size() < host_ids.size();
}

bool RosterFacts::homogeneous() const {
  std::map<std::string, int> ranks_per_host;
  for (const auto& id : host_ids) ++ranks_per_host[id];
  for (const auto& [id, n] : ranks_per_host) {
    if (n != ranks_per_host.begin()->second) return false;
  }
  return true;
}

void RosterFacts::LabelData(int peer, Socket& s) const {
  const std::string described = DescribePeer(peer), label = s.label();
  const size_t open = label.find(" (");
  if (s.valid() && described.back() == ')' && open != std::string::npos) {
    s.set_label(described.substr(0, described.size() - 1) + "; " + label.substr(open + 2));
  }
}

}  // namespace tfring
