// Group (communicator.h): a view of the Communicator's links for one collective's ranks,
// and the host layout of those ranks (host_layout.h).
#include "transport/communicator.h"


namespace tfring {

Group::Group(Communicator& comm, const std::vector<int32_t>& members)
    : comm_(&comm), members_(&members), rank_(-1), size_(static_cast<int>(members.size())) {
  rank_ = local_index(comm.rank());
}

const std::string& Group::host_id(int i) const {
  static const std::string kNone;
  const std::vector<std::string>& ids = comm_->host_ids();
  const size_t global = static_cast<size_t>(global_rank(i));
  return global < ids.size() ? ids[global] : kNone;
}

Group Group::Subgroup(const std::vector<int32_t>& indices) const {
  auto members = std::make_shared<std::vector<int32_t>>();
  members->reserve(indices.size());
  for (int32_t i : indices) members->push_back(global_rank(i));
  Group sub(*comm_, *members);
  sub.owned_members_ = std::move(members);  // members_ keeps pointing at the same vector
  return sub;
}

// The layout came from HostLayoutOf (WithHostLayout's contract), which fills its *_ranks.
Group Group::Local() const { return Group(*comm_, host_layout_->local_ranks); }
Group Group::Cross() const { return Group(*comm_, host_layout_->cross_ranks); }
Group Group::Leaders() const { return Group(*comm_, host_layout_->leader_ranks); }

Topology Group::topology() const {
  Topology t;
  t.ranks = size_;
  t.across_hosts = host_layout_ != nullptr;
  if (t.across_hosts) {
    t.hosts = static_cast<int>(host_layout_->hosts.size());
    t.ranks_per_host = static_cast<int>(host_layout_->local.size());
  }
  t.shm_inside_hosts = comm_->shm_inside_hosts();
  return t;
}

Group Group::WithHostLayout(std::shared_ptr<const HostLayout> layout) const {
  Group g = *this;
  g.host_layout_ = std::move(layout);
  return g;
}

std::shared_ptr<const HostLayout> HostLayoutOf(const Group& group) {
  std::vector<std::string> host_of;
  host_of.reserve(static_cast<size_t>(group.size()));
  for (int i = 0; i < group.size(); ++i) host_of.push_back(group.host_id(i));
  auto layout = std::make_shared<HostLayout>();
  if (!MakeHostLayout(host_of, group.rank(), layout.get())) return nullptr;
  for (int32_t i : layout->local) layout->local_ranks.push_back(group.global_rank(i));
  for (int32_t i : layout->cross) layout->cross_ranks.push_back(group.global_rank(i));
  for (const auto& host : layout->hosts) layout->leader_ranks.push_back(group.global_rank(host[0]));
  return layout;
}

int Group::local_index(int global) const {
  if (members_ == nullptr) return global >= 0 && global < size_ ? global : -1;
  for (size_t i = 0; i < members_->size(); ++i) {
    if ((*members_)[i] == global) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace tfring
