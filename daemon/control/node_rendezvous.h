// Multi-node communicators at the root daemon (the one named in the unique id): every
// node's daemon registers the ranks it holds for a token, as they arrive; the
// communicator forms when all nranks are present, and every node gets the same topology.
// Pure bookkeeping (no I/O): the control thread drives it and tests can too.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "daemon/engine/comm.h"

namespace plexus::daemon {

// The most ranks a communicator may have: a bound on what a rank or a peer can make a daemon
// hold.
inline constexpr uint32_t kMaxRanks = 65536;
// The longest a join may wait (a rank's or a peer's timeout is cut to it): a day.
inline constexpr uint32_t kMaxJoinTimeoutMs = 24u * 3600 * 1000;

struct NodeInfo {
  uint64_t instance_id = 0;            // a daemon's random id for this run
  std::string name;                    // host name, for messages
  std::vector<std::string> addresses;  // where its data connections are accepted
};

class NodeRendezvous {
 public:
  using Clock = std::chrono::steady_clock;

  struct Join {
    NodeInfo node;
    std::vector<int> ranks;  // ranks this node holds (more may follow in a later join)
    Clock::time_point deadline;
    std::string algorithm;  // PLEXUS_ALGO of these ranks; every rank must ask for the same
  };

  struct Formed {
    std::vector<NodeInfo> nodes;  // participant order: by the lowest rank each holds
    std::vector<int> rank_node;   // by rank: index into nodes
    std::string algorithm;
  };

  struct Failure {
    CommToken token;
    std::vector<uint64_t> notify;
    std::string message;
    plexus_result_t code = PLEXUS_ERR_INTERNAL;  // what the ranks get
  };

  struct Result {
    enum Outcome { kWaiting, kFormed, kRejected } outcome = kWaiting;
    std::string error;                           // kRejected: sent to every node in `notify`
    plexus_result_t code = PLEXUS_ERR_INTERNAL;  // kRejected: what the ranks get
    Formed formed;                               // kFormed
    std::vector<uint64_t> notify;                // instance ids of the nodes involved
    // kRejected for ranks that disagree on whom to exclude: the other successor, failed too.
    std::optional<Failure> other;
  };

  // A successor of communicator `parent` (plexus_comm_shrink), which every node holding a
  // rank of it kept must join: one such node lost fails it at once, naming the node, as do
  // ranks that disagree on whom to exclude (two successors of one parent waiting at once).
  struct Successor {
    CommToken parent{};
    std::vector<int> excluded;  // ranks of the parent left out, ascending
    struct Node {
      std::string name;
      std::vector<int> parent_ranks;  // its ranks of the parent that are kept
      std::vector<int> ranks;         // the same in the successor: all it may join with
    };
    std::map<uint64_t, Node> expected;  // by instance id: the nodes that must join
  };

  Result join(const CommToken& token, int nranks, const Join& join,
              const Successor* successor = nullptr);
  // Rendezvous whose earliest deadline passed, with a sentence naming the missing ranks
  // and the nodes that did join (PLEXUS_ERR_TIMEOUT); they are dropped.
  std::vector<Failure> expire(Clock::time_point now);
  // A node's daemon went away: every rendezvous it was part of fails, naming it
  // (PLEXUS_ERR_PEER_LOST), and so does every successor it was expected in (a node that
  // joins that one later is refused the same way).
  std::vector<Failure> drop_node(uint64_t instance_id);
  // A node refused its ranks' part (it is draining): the rendezvous fails at once for the
  // nodes that joined (nothing if none has), and a node that joins it later is refused
  // with the same code and message instead of waiting out its timeout.
  std::optional<Failure> refuse(const CommToken& token, plexus_result_t code,
                                const std::string& message);
  std::optional<Clock::time_point> next_deadline() const;
  size_t pending() const { return pending_.size(); }
  bool waiting(const CommToken& token) const { return pending_.count(token) != 0; }
  // The successor a shrink waiting here as `token` expects, or null: later joins of it use
  // this one rather than work it out again from the parent (O(ranks) each).
  const Successor* pending_successor(const CommToken& token) const {
    auto it = pending_.find(token);
    return it == pending_.end() || !it->second.successor ? nullptr : &*it->second.successor;
  }
  // Whether `token` failed here lately: a join of it is refused at once (join()).
  bool refused(const CommToken& token) const { return refused_.count(token) != 0; }
  // Whether a rendezvous waiting here has a node of `instance_id` in it, or expects it.
  bool involves(uint64_t instance_id) const;

 private:
  struct Pending {
    int nranks = 0;
    std::vector<int> rank_node;   // by rank: index into nodes, -1 until it joins
    std::vector<NodeInfo> nodes;  // in order of first join
    int joined = 0;
    Clock::time_point deadline;
    std::string algorithm;
    std::string algorithm_from;  // the node that set it
    std::optional<Successor> successor;
  };
  // A successor's failure: `message` for the nodes that joined and, when `refuse_later`, for
  // any that joins it later (a straggler of the failed attempt must not wait anew).
  Failure fail_successor(std::map<CommToken, Pending>::iterator it, std::string message,
                         plexus_result_t code, bool refuse_later);
  static std::vector<uint64_t> ids(const Pending& p);
  static std::string describe_missing(const Pending& p);

  std::map<CommToken, Pending> pending_;
  // Tokens refused, and why: the last kRefusedKept (a token is random and used once).
  static constexpr size_t kRefusedKept = 256;
  struct Refusal {
    plexus_result_t code;
    std::string message;
  };
  std::map<CommToken, Refusal> refused_;
  std::deque<CommToken> refused_order_;
};

}  // namespace plexus::daemon
