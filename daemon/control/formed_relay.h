// The topologies this node passed on down the tree (formed_tree.h), kept a while so that a
// node below that is lost before it could pass one on does not leave the nodes below it
// waiting out their init timeout: when a node it sent one to is lost, this node sends it to
// that node's children itself (and, should one of those be lost too, to theirs). Also the
// communicators formed here lately, so that a topology that comes again (from the parent and
// from a node that took the lost parent's place) is dropped. Bounded: the last kKept
// topologies, each until its deadline, and the last kSeen tokens. Pure bookkeeping (NodeJoins
// sends); control thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <set>
#include <vector>

#include "daemon/control/formed_message.h"
#include "daemon/engine/comm.h"

namespace plexus::daemon {

class FormedRelay {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kKept = 32;
  static constexpr size_t kSeen = 256;

  // Whether `token`'s topology came here already; marks it seen.
  bool seen_before(const CommToken& token);
  // This node sent `topology` for `token` to `sent_to` (indexes into its nodes); kept until
  // `until`.
  void passed_on(const CommToken& token, const TopologyMessage& topology,
                 const std::vector<size_t>& sent_to, Clock::time_point until);
  // Node `instance` is lost. For each topology kept that went to it: the nodes to send it to
  // now (the lost node's children), recorded as sent to.
  struct Resend {
    CommToken token;
    const TopologyMessage* topology;  // valid until the next call
    std::vector<size_t> to;
  };
  std::vector<Resend> lost(uint64_t instance, Clock::time_point now);
  size_t kept() const { return kept_.size(); }

 private:
  struct Kept {
    CommToken token;
    TopologyMessage topology;
    std::set<size_t> sent_to;
    Clock::time_point until;
  };
  std::deque<Kept> kept_;
  std::set<CommToken> seen_;
  std::deque<CommToken> seen_order_;
};

}  // namespace plexus::daemon
