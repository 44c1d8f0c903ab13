// A communicator: the ranks that joined one unique id (fixed when it forms), and the
// engine thread's state that matches their submissions into ops. The control thread makes
// it and keeps a const view (for plexusctl); the engine gets it through its queue.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "daemon/algorithms/cost_model.h"
#include "daemon/engine/job_metrics.h"
#include "daemon/engine/p2p_mailboxes.h"
#include "daemon/internode/node_topology.h"
#include "daemon/local/contribution.h"
#include "monitor/rank_skew.h"
#include "monitor/stall_watch.h"
#include "shm/entry_validation.h"

namespace plexus::daemon {

class Session;
struct InternodeState;

// How a communicator spans nodes; absent for one whose ranks are all on this node.
struct NodeSpan {
  NodeTopology topology;
  std::vector<uint64_t> node_ids;  // daemon instance ids, by node index
  // By node index: where its daemon accepts data connections ("ip:port" each). Paths open on
  // first use (InternodeRunner::reach), so the engine must be able to ask for any of them.
  std::vector<std::vector<std::string>> node_addresses;
  // How long a data connection the engine asks for may take to open before the link is lost.
  std::chrono::milliseconds open_timeout{0};
  uint64_t comm_id = 0;  // names the communicator in data frames
  algo::LinkCost cost;   // communicator-wide, from the root
  std::optional<algo::Algorithm> forced;
};

using CommToken = std::array<uint8_t, 16>;

std::string token_prefix(const CommToken& token);

struct PendingCollective {
  std::vector<Contribution> parts;  // by rank; session == nullptr until it arrives
  int arrived = 0;
  // With telemetry on: when the first and the last local rank submitted it, and which
  // rank was last (op timing and the rank-skew rule).
  std::chrono::steady_clock::time_point first_arrival{};
  std::chrono::steady_clock::time_point all_arrived{};
  int last_rank = -1;
};

class Comm {
 public:
  // Who a rank is: fixed when the communicator forms.
  struct Member {
    uint32_t handle = 0;
    pid_t pid = 0;
    uint64_t session_id = 0;
    bool remote = false;  // a rank of another node (multi-node communicators)
  };
  // Whether a rank is still a member (engine thread only).
  struct Presence {
    bool present = true;     // false once it left or was lost
    bool heard = false;      // a notice of its departure came (from its node or relayed)
    std::string departure;   // why it left, for ops that need it
    bool suspended = false;  // a rank of this node parked it (plexus_comm_suspend)
  };

  // What it succeeds: a shrink or a growth of another communicator (plexusctl comms).
  struct Origin {
    CommToken predecessor{};
    std::string how;    // "shrink of 1a2b3c4d without rank(s) 3"
    std::string event;  // the event its formation is: comm_shrunk, comm_grown
  };

  Comm(CommToken token, std::vector<Member> members, std::optional<NodeSpan> span = {},
       std::optional<Origin> origin = {});
  ~Comm();

  const CommToken& token() const { return token_; }
  int nranks() const { return static_cast<int>(members_.size()); }
  const std::vector<Member>& members() const { return members_; }
  const std::optional<NodeSpan>& span() const { return span_; }
  const std::optional<Origin>& origin() const { return origin_; }
  // Ranks on this node: each collective waits for this many parts.
  int local_ranks() const { return local_ranks_; }

  // Engine thread only from here to the atomics: the control thread, which makes the
  // communicator, keeps only a const view of it.
  std::vector<Presence> presence;  // by rank
  // Why `rank` is no longer a member, or nullptr while it is.
  const std::string* departure(int rank) const {
    const Presence& p = presence[static_cast<size_t>(rank)];
    return p.present ? nullptr : &p.departure;
  }
  std::deque<PendingCollective> collectives;  // collectives[i] is op number first_seq + i
  uint64_t first_seq = 0;
  std::vector<uint64_t> next_seq;             // per rank
  P2pMailboxes p2p;                           // sends and recvs waiting for each other
  int members_present = 0;                    // of the local ranks
  std::unique_ptr<InternodeState> internode;  // multi-node: ops between daemons
  std::string first_departure;  // why the first rank to go went: collectives fail with it
  // A rank of another node left after submitting remote_limit collectives: those before
  // it may still finish (its node sent their data first), later ones fail.
  std::string remote_departure;
  uint64_t remote_limit = UINT64_MAX;
  std::string job;  // its first local rank's job (Session::job), for reports and metrics
  std::shared_ptr<JobCounters> job_counters;      // that job's (null if it had no session)
  monitor::StallWatch stall_watch;                // on the oldest pending collective
  std::optional<monitor::RankSkewDetector> skew;  // with telemetry on

  // Any thread.
  std::atomic<uint64_t> ops_completed{0};
  std::atomic<uint64_t> bytes_moved{0};
  std::atomic<bool> finished{false};   // every member left: the control thread may drop it
  std::atomic<bool> suspended{false};  // every local rank parked it (plexusctl comms)

  bool broken() const { return broken_.load(std::memory_order_acquire); }
  std::string broken_reason() const;
  plexus_result_t broken_status() const { return broken_status_; }
  // First reason wins; engine thread only.
  void mark_broken(plexus_result_t status, std::string reason);

 private:
  CommToken token_;
  std::vector<Member> members_;
  std::optional<NodeSpan> span_;
  std::optional<Origin> origin_;
  int local_ranks_ = 0;
  std::atomic<bool> broken_{false};
  plexus_result_t broken_status_ = PLEXUS_SUCCESS;
  mutable std::mutex reason_mutex_;
  std::string broken_reason_;
};

// The name of node `node` of a multi-node communicator.
inline const std::string& node_name(const Comm& comm, int node) {
  return comm.span()->topology.node_names[static_cast<size_t>(node)];
}

}  // namespace plexus::daemon
