// Point-to-point matching (p2p_mailboxes.h): waiting recvs and waiting messages per
// destination rank, each matched oldest first.
#include "daemon/engine/p2p_mailboxes.h"

#include <algorithm>
#include <utility>

namespace plexus::daemon {

bool recv_accepts(const Contribution& recv, int source, int32_t tag) {
  return (recv.entry.any_source || recv.entry.peer == source) && recv.entry.tag == tag;
}

std::optional<P2pMatch> P2pMailboxes::deliver(int destination, P2pMessage message) {
  Mailbox& box = boxes_[destination];
  auto it = std::find_if(box.recvs.begin(), box.recvs.end(), [&](const Contribution& r) {
    return recv_accepts(r, message.source, message.tag);
  });
  if (it == box.recvs.end()) {
    held_bytes_ += message.data.size();
    box.messages.push_back(std::move(message));
    return std::nullopt;
  }
  P2pMatch match{std::move(*it), std::move(message)};
  box.recvs.erase(it);
  if (box.recvs.empty() && box.messages.empty()) boxes_.erase(destination);
  return match;
}

std::optional<P2pMatch> P2pMailboxes::post(Contribution recv) {
  const int destination = recv.rank;
  Mailbox& box = boxes_[destination];
  auto it = std::find_if(box.messages.begin(), box.messages.end(),
                         [&](const P2pMessage& m) { return recv_accepts(recv, m.source, m.tag); });
  if (it == box.messages.end()) {
    box.recvs.push_back(std::move(recv));
    return std::nullopt;
  }
  P2pMatch match{std::move(recv), std::move(*it)};
  box.messages.erase(it);
  held_bytes_ -= match.message.data.size();
  if (box.recvs.empty() && box.messages.empty()) boxes_.erase(destination);
  return match;
}

bool P2pMailboxes::recv_waits(int destination, int source, int32_t tag) const {
  auto box = boxes_.find(destination);
  if (box == boxes_.end()) return false;
  return std::any_of(box->second.recvs.begin(), box->second.recvs.end(),
                     [&](const Contribution& r) { return recv_accepts(r, source, tag); });
}

bool P2pMailboxes::message_waits(const Contribution& recv) const {
  auto box = boxes_.find(recv.rank);
  if (box == boxes_.end()) return false;
  return std::any_of(box->second.messages.begin(), box->second.messages.end(),
                     [&](const P2pMessage& m) { return recv_accepts(recv, m.source, m.tag); });
}

bool P2pMailboxes::recv_waits_on(const std::function<bool(int source)>& from) const {
  for (const auto& [destination, box] : boxes_) {
    for (const Contribution& r : box.recvs) {
      if (r.entry.any_source || from(r.entry.peer)) return true;
    }
  }
  return false;
}

P2pTaken P2pMailboxes::take(
    const std::function<bool(const Contribution& recv)>& recv,
    const std::function<bool(const P2pMessage&, int destination)>& message) {
  P2pTaken taken;
  for (auto box = boxes_.begin(); box != boxes_.end();) {
    const int destination = box->first;
    auto& recvs = box->second.recvs;
    auto& messages = box->second.messages;
    for (auto it = recvs.begin(); it != recvs.end();) {
      if (!recv(*it)) {
        ++it;
        continue;
      }
      taken.recvs.push_back(std::move(*it));
      it = recvs.erase(it);
    }
    for (auto it = messages.begin(); it != messages.end();) {
      if (!message(*it, destination)) {
        ++it;
        continue;
      }
      held_bytes_ -= it->data.size();
      if (it->send) taken.sends.push_back(std::move(*it->send));
      it = messages.erase(it);
    }
    box = recvs.empty() && messages.empty() ? boxes_.erase(box) : std::next(box);
  }
  return taken;
}

std::vector<Contribution> P2pMailboxes::take_orphans(int nranks,
                                                     const std::function<bool(int rank)>& gone) {
  auto orphan = [&](const Contribution& r) {
    if (!r.entry.any_source) return gone(r.entry.peer);
    for (int rank = 0; rank < nranks; ++rank) {
      if (rank != r.rank && !gone(rank)) return false;
    }
    return true;
  };
  return take(orphan, [](const P2pMessage&, int) { return false; }).recvs;
}

}  // namespace plexus::daemon
