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
#include <string>
#include <vector>

#include "daemon/engine/comm.h"

namespace plexus::daemon {

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

  struct Result {
    enum Outcome { kWaiting, kFormed, kRejected } outcome = kWaiting;
    std::string error;                           // kRejected: sent to every node in `notify`
    plexus_result_t code = PLEXUS_ERR_INTERNAL;  // kRejected: what the ranks get
    Formed formed;                               // kFormed
    std::vector<uint64_t> notify;                // instance ids of the nodes involved
  };

  struct Failure {
    CommToken token;
    std::vector<uint64_t> notify;
    std::string message;
    plexus_result_t code = PLEXUS_ERR_INTERNAL;  // what the ranks get
  };

  Result join(const CommToken& token, int nranks, const Join& join);
  // Rendezvous whose earliest deadline passed, with a sentence naming the missing ranks
  // and the nodes that did join (PLEXUS_ERR_TIMEOUT); they are dropped.
  std::vector<Failure> expire(Clock::time_point now);
  // A node's daemon went away: every rendezvous it was part of fails, naming it
  // (PLEXUS_ERR_PEER_LOST).
  std::vector<Failure> drop_node(uint64_t instance_id);
  // A node refused its ranks' part (it is draining): the rendezvous fails at once for the
  // nodes that joined (nothing if none has), and a node that joins it later is refused
  // with the same code and message instead of waiting out its timeout.
  std::optional<Failure> refuse(const CommToken& token, plexus_result_t code,
                                const std::string& message);
  std::optional<Clock::time_point> next_deadline() const;
  size_t pending() const { return pending_.size(); }
  // Whether a rendezvous waiting here has a node of `instance_id` in it.
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
  };
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
