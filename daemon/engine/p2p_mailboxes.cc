// Point-to-point matching (p2p_mailboxes.h): waiting recvs and waiting messages per
// destination rank, queued by (source, tag) and by tag, the older candidate matched first.
#include "daemon/engine/p2p_mailboxes.h"

#include <utility>

namespace plexus::daemon {

bool recv_accepts(const Contribution& recv, int source, int32_t tag) {
  return (recv.entry.any_source || recv.entry.peer == source) && recv.entry.tag == tag;
}

template <typename Map, typename K>
auto P2pMailboxes::pop(Map& map, const K& k) -> decltype(map.begin()->second.front().item) {
  auto it = map.find(k);
  auto item = std::move(it->second.front().item);
  it->second.pop_front();
  if (it->second.empty()) map.erase(it);
  return item;
}

void P2pMailboxes::forget_if_empty(int destination) {
  auto box = boxes_.find(destination);
  if (box != boxes_.end() && box->second.waiting == 0) boxes_.erase(box);
}

std::optional<P2pMatch> P2pMailboxes::deliver(int destination, P2pMessage message) {
  Mailbox& box = boxes_[destination];
  const uint64_t k = key(message.source, message.tag);
  auto named = box.named_recvs.find(k);
  auto any = box.any_recvs.find(message.tag);
  const bool has_named = named != box.named_recvs.end();
  const bool has_any = any != box.any_recvs.end();
  if (!has_named && !has_any) {
    const uint64_t stamp = next_stamp_++;
    held_bytes_ += message.data.size();
    box.message_order[message.tag].emplace(stamp, message.source);
    box.messages[k].push_back({stamp, std::move(message)});
    ++box.waiting;
    return std::nullopt;
  }
  const bool take_named =
      has_named && (!has_any || named->second.front().stamp < any->second.front().stamp);
  Contribution recv = take_named ? pop(box.named_recvs, k) : pop(box.any_recvs, message.tag);
  --box.waiting;
  forget_if_empty(destination);
  return P2pMatch{std::move(recv), std::move(message)};
}

std::optional<P2pMatch> P2pMailboxes::post(Contribution recv) {
  const int destination = recv.rank;
  const int32_t tag = recv.entry.tag;
  Mailbox& box = boxes_[destination];
  auto order = box.message_order.find(tag);
  int source = recv.entry.peer;
  if (recv.entry.any_source) {
    if (order != box.message_order.end()) source = order->second.begin()->second;
  }
  auto queue = box.messages.find(key(source, tag));
  if (order == box.message_order.end() || queue == box.messages.end()) {
    const uint64_t stamp = next_stamp_++;
    if (recv.entry.any_source) {
      box.any_recvs[tag].push_back({stamp, std::move(recv)});
    } else {
      box.named_recvs[key(source, tag)].push_back({stamp, std::move(recv)});
    }
    ++box.waiting;
    return std::nullopt;
  }
  // The front of the (source, tag) queue: the oldest from that source with that tag, and
  // for any source the oldest with that tag (its stamp is the first in message_order).
  order->second.erase(queue->second.front().stamp);
  if (order->second.empty()) box.message_order.erase(order);
  P2pMessage message = pop(box.messages, key(source, tag));
  held_bytes_ -= message.data.size();
  --box.waiting;
  forget_if_empty(destination);
  return P2pMatch{std::move(recv), std::move(message)};
}

bool P2pMailboxes::recv_waits(int destination, int source, int32_t tag) const {
  auto box = boxes_.find(destination);
  if (box == boxes_.end()) return false;
  return box->second.named_recvs.contains(key(source, tag)) || box->second.any_recvs.contains(tag);
}

bool P2pMailboxes::message_waits(const Contribution& recv) const {
  auto box = boxes_.find(recv.rank);
  if (box == boxes_.end()) return false;
  if (recv.entry.any_source) return box->second.message_order.contains(recv.entry.tag);
  return box->second.messages.contains(key(recv.entry.peer, recv.entry.tag));
}

bool P2pMailboxes::recv_waits_on(const std::function<bool(int source)>& from) const {
  for (const auto& [destination, box] : boxes_) {
    for (const auto& [k, queue] : box.named_recvs) {
      if (from(static_cast<int>(k >> 32))) return true;
    }
  }
  return false;
}

P2pTaken P2pMailboxes::take(
    const std::function<bool(const Contribution& recv)>& recv,
    const std::function<bool(const P2pMessage&, int destination)>& message) {
  P2pTaken taken;
  // Each queue is rebuilt from what stays; what goes is moved out on the way.
  auto take_recvs = [&](auto& queues, Mailbox& box) {
    for (auto q = queues.begin(); q != queues.end();) {
      std::deque<Stamped<Contribution>> stays;
      for (auto& r : q->second) {
        if (!recv(r.item)) {
          stays.push_back(std::move(r));
          continue;
        }
        taken.recvs.push_back(std::move(r.item));
        --box.waiting;
      }
      q->second.swap(stays);
      q = q->second.empty() ? queues.erase(q) : std::next(q);
    }
  };
  for (auto& [destination, box] : boxes_) {
    take_recvs(box.named_recvs, box);
    take_recvs(box.any_recvs, box);
    for (auto q = box.messages.begin(); q != box.messages.end();) {
      std::deque<Stamped<P2pMessage>> stays;
      for (auto& m : q->second) {
        if (!message(m.item, destination)) {
          stays.push_back(std::move(m));
          continue;
        }
        auto order = box.message_order.find(m.item.tag);
        order->second.erase(m.stamp);
        if (order->second.empty()) box.message_order.erase(order);
        held_bytes_ -= m.item.data.size();
        if (m.item.send) taken.sends.push_back(std::move(*m.item.send));
        --box.waiting;
      }
      q->second.swap(stays);
      q = q->second.empty() ? box.messages.erase(q) : std::next(q);
    }
  }
  std::erase_if(boxes_, [](const auto& box) { return box.second.waiting == 0; });
  return taken;
}

std::vector<Contribution> P2pMailboxes::take_orphans(
    const std::function<bool(const Contribution&)>& orphaned) {
  return take(orphaned, [](const P2pMessage&, int) { return false; }).recvs;
}

}  // namespace plexus::daemon
