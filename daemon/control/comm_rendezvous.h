// Joining communicators on one node: ranks arrive one by one with the same token; the
// communicator forms when all nranks are present. Pure bookkeeping (no I/O), so the
// control thread drives it and tests can too.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "daemon/engine/comm.h"

namespace plexus::daemon {

class CommRendezvous {
 public:
  using Clock = std::chrono::steady_clock;

  struct Joiner {
    uint64_t session_id = 0;
    pid_t pid = 0;
    uint32_t request_id = 0;
    int rank = 0;
    Clock::time_point deadline;
    uint64_t root = 0;  // the root daemon's instance named by the unique id (0: this node)
  };

  struct JoinResult {
    enum Outcome { kWaiting, kFormed, kRejected } outcome = kWaiting;
    std::string error;            // kRejected
    std::vector<Joiner> members;  // kFormed: one per rank, in rank order
  };

  struct Expired {
    Joiner joiner;
    std::string message;
  };

  // With form_when_complete (a single-node communicator) the last rank forms it and the
  // joiners are returned; otherwise the joiners wait here until take() (a multi-node
  // communicator forms at its root daemon, which counts every node's ranks).
  JoinResult join(const CommToken& token, int nranks, const Joiner& joiner,
                  bool form_when_complete = true);
  // This node's joiners of `token`, in rank order; the rendezvous is dropped.
  std::vector<Joiner> take(const CommToken& token);
  bool has(const CommToken& token) const { return pending_.count(token) != 0; }
  // Every joiner of each rendezvous whose earliest deadline passed by `now`, with the
  // sentence naming the ranks that never joined; those rendezvous are dropped.
  std::vector<Expired> expire(Clock::time_point now);
  // A session went away: forget its joiners.
  void drop_session(uint64_t session_id);
  std::optional<Clock::time_point> next_deadline() const;
  size_t pending_comms() const { return pending_.size(); }

 private:
  struct Pending {
    int nranks = 0;
    std::vector<std::optional<Joiner>> ranks;
    int joined = 0;
  };
  static std::string missing_ranks(const Pending& pending);

  std::map<CommToken, Pending> pending_;
};

}  // namespace plexus::daemon
