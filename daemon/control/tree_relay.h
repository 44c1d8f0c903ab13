// What this node passed on down a tree of a communicator's nodes (formed_tree.h: a
// topology from its root, a revoke from its revoker), kept a while so that a node below
// that is lost before it could pass one on does not leave the nodes below it without it:
// when a node it was sent to is lost, this node sends it to that node's children itself
// (and, should one of those be lost too, to theirs). Also the communicators whose message
// came lately, so that one that comes again (from the parent and from a node that took the
// lost parent's place) is dropped. Bounded: the last kKept messages, each until its
// deadline, and the last kSeen tokens. Pure bookkeeping (the caller sends); control thread
// only. `Message` says where a daemon is in its tree and whom that daemon sends it to:
//   size_t index_of(uint64_t instance) const;
//   std::vector<size_t> children_of(uint64_t instance) const;
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <set>
#include <vector>

#include "daemon/engine/comm.h"

namespace plexus::daemon {

template <typename Message>
class TreeRelay {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kKept = 32;
  static constexpr size_t kSeen = 256;

  // Whether `token`'s message came here already; marks it seen.
  bool seen_before(const CommToken& token) {
    if (!seen_.insert(token).second) return true;
    seen_order_.push_back(token);
    if (seen_order_.size() > kSeen) {
      seen_.erase(seen_order_.front());
      seen_order_.pop_front();
    }
    return false;
  }
  // This node sent `message` for `token` to `sent_to` (indexes into its tree); kept until
  // `until`.
  void passed_on(const CommToken& token, const Message& message, const std::vector<size_t>& sent_to,
                 Clock::time_point until) {
    if (sent_to.empty()) return;
    kept_.push_back(Kept{token, message, std::set<size_t>(sent_to.begin(), sent_to.end()), until});
    if (kept_.size() > kKept) kept_.pop_front();
  }
  // Node `instance` is lost. For each message kept that went to it: the nodes to send it to
  // now (the lost node's children), recorded as sent to. A copy of the message: sending it
  // may find another node lost and call this again, which drops kept messages.
  struct Resend {
    CommToken token;
    Message message;
    std::vector<size_t> to;
  };
  std::vector<Resend> lost(uint64_t instance, Clock::time_point now) {
    std::erase_if(kept_, [&](const Kept& k) { return k.until <= now; });
    std::vector<Resend> out;
    for (Kept& k : kept_) {
      if (k.sent_to.count(k.message.index_of(instance)) == 0) continue;  // never went to it
      Resend resend{k.token, k.message, {}};
      for (size_t child : k.message.children_of(instance)) {
        if (k.sent_to.insert(child).second) resend.to.push_back(child);
      }
      if (!resend.to.empty()) out.push_back(std::move(resend));
    }
    return out;
  }
  size_t kept() const { return kept_.size(); }

 private:
  struct Kept {
    CommToken token;
    Message message;
    std::set<size_t> sent_to;
    Clock::time_point until;
  };
  std::deque<Kept> kept_;
  std::set<CommToken> seen_;
  std::deque<CommToken> seen_order_;
};

}  // namespace plexus::daemon
