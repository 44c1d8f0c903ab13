// Matching within communicators: validated ops handed to their communicator become
// collectives once every local rank has called (run here, on the GPU, or between daemons)
// and sends paired with their receives; a rank that leaves, or a communicator that fails,
// fails exactly the ops that needed it. Engine thread only: the matching state lives in
// Comm's engine-thread fields, which this writes together with InternodeRunner (ops
// between nodes) and Engine::add_comm (a communicator's start).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "daemon/engine/comm.h"
#include "daemon/engine/gpu_staging.h"
#include "daemon/engine/internode_runner.h"
#include "daemon/engine/op_watch.h"
#include "daemon/engine/session.h"
#include "daemon/local/local_collectives.h"

namespace plexus::daemon {

class CommMatcher {
 public:
  // An op ends (Engine::complete: a GPU result goes back first).
  using Complete =
      std::function<void(Session*, uint64_t user_data, plexus_result_t, const std::string&)>;

  CommMatcher(Complete complete, OpWatch& watch, GpuStaging& gpu, LocalExecutor& executor,
              InternodeRunner& internode);
  CommMatcher(const CommMatcher&) = delete;
  CommMatcher& operator=(const CommMatcher&) = delete;

  // A validated op (its GPU input in, where it has one) to its communicator.
  void dispatch(Comm& comm, Contribution part);
  // Whether `part` would join an op another local rank already waits in (its collective,
  // or the matching send or receive within the node): such an op lets work finish, so a
  // job's cap never refuses it (job_admission.h).
  bool joins_a_waiting_op(const Comm& comm, const Contribution& part) const;
  // Starts the communicator's oldest collectives whose parts have all arrived.
  void run_ready(Comm& comm);
  // The communicator cannot go on: every op waiting on it fails (those of
  // `aborting_session` as aborted by it), and with the first failure so do the other nodes.
  void fail(Comm& comm, plexus_result_t status, const std::string& reason,
            const Session* aborting_session);
  // A rank destroyed its communicator: fail only what needs it (every pending collective,
  // point-to-point ops to or from it); the other ranks may still talk among themselves.
  void rank_departed(Comm& comm, int rank, const std::string& reason);
  // A local rank is no longer a member (left or lost); the last one retires the
  // communicator.
  void member_gone(Comm& comm, int rank);
  // A whole message from another node for `destination`, in its rank pair's order
  // (InternodeRunner).
  void deliver_remote(Comm& comm, int destination, P2pMessage message);
  // Fails the recvs no message can come for any more: their source (every other rank, for
  // one from any source) is gone, or is `leaving` (for `why`).
  void fail_orphaned_recvs(Comm& comm, int leaving = -1, const std::string& why = {});

 private:
  void submit_collective(Comm& comm, Contribution part);
  void submit_p2p(Comm& comm, Contribution part);
  // comm_matcher_p2p.cc. A recv took a message: the bytes move (or the sizes disagree) and
  // both ends complete.
  void finish(Comm& comm, P2pMatch match);
  // A send and a recv of this node: one copy (or the copy engines) moves the bytes.
  void copy_local(Comm& comm, Contribution send, Contribution recv);
  void execute_collective(Comm& comm, PendingCollective& op, uint64_t seq);
  // Why the ranks' calls of collective `seq` disagree, or empty when they agree.
  static std::string find_mismatch(const Comm& comm, const PendingCollective& op, uint64_t seq);
  // When they disagree, fails the communicator with the sentence and returns true.
  bool fail_on_mismatch(Comm& comm, const PendingCollective& op, uint64_t seq);

  Complete complete_;
  OpWatch& watch_;
  GpuStaging& gpu_;
  LocalExecutor& executor_;
  InternodeRunner& internode_;
};

}  // namespace plexus::daemon
