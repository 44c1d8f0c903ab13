// The control thread's communicators: ranks joining one (within the node through
// CommRendezvous, across nodes through NodeJoins), the communicator formed and handed to the
// engine before any rank hears its handle, ranks leaving, a rank revoking one, survivors
// shrinking one to a successor without a unique id, and the rendezvous timer that times
// joins out naming the missing ranks. Control thread only: it owns the rendezvous, the
// multi-node joins, the handle numbers and the const views of the communicators formed
// (the engine owns their state), and answers ranks through Hooks.
#pragma once

#include <uv.h>

#include <capnp/message.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "daemon/control/comm_rendezvous.h"
#include "daemon/control/control_config.h"
#include "daemon/control/node_joins.h"
#include "daemon/engine/engine.h"
#include "shm/control.capnp.h"

namespace plexus::daemon {

class CommService {
 public:
  struct Hooks {
    // Sends `message` to session `session_id` (false: its connection is gone).
    std::function<bool(uint64_t session_id, capnp::MessageBuilder& message)> reply;
    std::function<void(uint64_t session_id, uint32_t request_id, plexus_result_t,
                       const std::string& message)>
        send_error;
    // Runs `fn` on the control thread later (after what the engine runs before it).
    std::function<void(std::function<void()> fn)> post;
    // Whether this node admits no new communicator (plexusctl node drain).
    std::function<bool()> draining;
    // Session `session_id` while its connection is open (null once it closed).
    std::function<std::shared_ptr<const Session>(uint64_t session_id)> session;
  };

  CommService(const ControlConfig& config, Engine& engine, Hooks hooks);
  CommService(const CommService&) = delete;
  CommService& operator=(const CommService&) = delete;

  // On the control thread's loop: the timer, and the peer listener (NodeJoins::start,
  // which throws when it cannot listen). close(), as the loop ends; stop(), after it.
  void start(uv_loop_t* loop);
  void close();
  void stop() { nodes_.stop(); }

  NodeJoins& nodes() { return nodes_; }
  // The communicators formed here that still have a member (the finished ones dropped).
  const std::vector<std::shared_ptr<const Comm>>& comms();
  // Whether a communicator is still forming here (a node drain waits for none).
  bool forming() const;
  // Its connection closed: its joins are dropped.
  void session_closed(uint64_t session_id);

  void init(const Session& session, uint32_t request_id, shm::control::CommInit::Reader init);
  void leave(uint64_t session_id, uint32_t request_id, shm::control::CommLeave::Reader leave);
  // comm_service_recovery.cc
  void revoke(const Session& session, uint32_t request_id, shm::control::CommRevoke::Reader revoke);
  void shrink(const Session& session, uint32_t request_id, shm::control::CommShrink::Reader shrink);
  // A member joins the communicator's growth (plexus_comm_grow), or asks for its unique id.
  void grow(const Session& session, uint32_t request_id, shm::control::CommGrow::Reader grow);
  void grow_id(const Session& session, uint32_t request_id, shm::control::CommGrow::Reader grow);
  // A member parks the communicator or takes it up again (plexus_comm_suspend, _resume).
  void suspend(const Session& session, uint32_t request_id,
               shm::control::CommSuspend::Reader suspend);

 private:
  // A rank joins a communicator of this node alone.
  void join_here(const Session& session, uint32_t request_id, const CommToken& token, int nranks,
                 int rank, uint32_t timeout_ms);
  // A rank joins `token` where `root` says: this node alone (no root, or this daemon serving
  // no peers), else through the root across nodes (`shrink`: as a shrink's).
  void route_join(const Session& session, uint32_t request_id, const CommToken& token, int nranks,
                  int rank, uint32_t timeout_ms, const NodeJoins::RootRef& root,
                  const std::string& algorithm, const NodeJoins::ShrinkOf* shrink = nullptr);
  bool local_only(const NodeJoins::RootRef& root) const;
  // Where the members of `parent` and its new ranks meet to grow it: the node of its rank 0,
  // or this daemon for a communicator of this node alone.
  NodeJoins::RootRef growth_root(const Comm& parent) const;
  // `token`, asked for here, succeeds another communicator: said when it forms.
  void expect_successor(const CommToken& token, Comm::Origin origin);
  // Replies to every joiner and hands the communicator to the engine.
  void form_comm(const CommToken& token, int nranks,
                 const std::vector<CommRendezvous::Joiner>& joiners, std::optional<NodeSpan> span);
  // The communicator `session` holds as `handle`, and its rank there; when none, the
  // request is answered with an error saying it cannot `to` it.
  struct Member {
    std::shared_ptr<const Comm> comm;
    int rank = -1;
  };
  std::optional<Member> member(const Session& session, uint32_t request_id, uint32_t handle,
                               const char* to);
  // "communicator X was revoked by rank r (pid p ...) on node n" and `why`.
  std::string revoked_by(const Member& m, const Session& session, const std::string& why) const;
  // Whether the successor `token` (`what`) formed here already: answered with an error then.
  bool made_already(const Session& session, uint32_t request_id, const CommToken& token,
                    const std::string& what);
  // A request's timeout, within 1 ms .. a day.
  static uint32_t timeout_of(uint32_t ms);
  // Fails `comm`'s ops here with PLEXUS_ERR_REVOKED and `text`, tells its other nodes, and
  // then runs `then` on this thread.
  void revoke_comm(const std::shared_ptr<const Comm>& comm, uint64_t session_id, uint32_t handle,
                   const std::string& text, std::function<void()> then);
  void arm_timer();
  void on_timer();

  ControlConfig config_;
  Engine& engine_;
  Hooks hooks_;
  CommRendezvous rendezvous_;
  NodeJoins nodes_;  // after rendezvous_, which it shares
  std::vector<std::shared_ptr<const Comm>> comms_;
  std::unordered_map<uint64_t, uint32_t> next_handle_;  // by session: its next handle number
  // Successors asked for here and not formed yet (a shrink's token: what it succeeds), and
  // the order they were asked for in; bounded: the oldest go past kSuccessorsKept. And the
  // successors formed here lately, which a shrink or a growth may not make again.
  std::map<CommToken, Comm::Origin> pending_successors_;
  std::deque<CommToken> pending_order_;
  std::deque<CommToken> formed_successors_;
  static constexpr size_t kSuccessorsKept = 256;
  uv_timer_t timer_{};
};

}  // namespace plexus::daemon
