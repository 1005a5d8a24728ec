#include "transport/peer_directory.h"

#include <utility>

namespace tfring {

PeerDirectory::PeerDirectory(int rank, std::shared_ptr<Store> store, PeerCard mine)
    : rank_(rank), store_(std::move(store)) {
  cards_[rank_] = std::move(mine);
}

Status PeerDirectory::Card(int peer, Deadline deadline, PeerCard* out) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cards_.find(peer);
    if (it != cards_.end()) {
      *out = it->second;
      return Status::OK();
    }
  }
  // Two threads asking for one card at once both read it: the same bytes, harmless.
  PeerCard card;
  TFRING_RETURN_IF_ERROR(FetchPeerCard(*store_, peer, deadline.SecondsLeft(), &card));
  std::lock_guard<std::mutex> lock(mu_);
  ++cards_read_;
  *out = cards_.emplace(peer, std::move(card)).first->second;
  return Status::OK();
}

int PeerDirectory::cards_read() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cards_read_;
}

}  // namespace tfring
