#include "daemon/control/comm_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "daemon/control/daemon_reply.h"

namespace plexus::daemon {

namespace control = shm::control;

CommService::CommService(const ControlConfig& config, Engine& engine, Hooks hooks)
    : config_(config),
      engine_(engine),
      hooks_(std::move(hooks)),
      nodes_(config_, engine, rendezvous_,
             NodeJoins::Hooks{.send_error = hooks_.send_error,
                              .form_comm =
                                  [this](const CommToken& token, int nranks,
                                         const std::vector<CommRendezvous::Joiner>& joiners,
                                         std::optional<NodeSpan> span) {
                                    form_comm(token, nranks, joiners, std::move(span));
                                  },
                              .arm_timer = [this] { arm_timer(); },
                              .comms = [this]() -> const std::vector<std::shared_ptr<const Comm>>& {
                                return comms_;
                              }}) {}

void CommService::start(uv_loop_t* loop) {
  uv_timer_init(loop, &timer_);
  timer_.data = this;
  nodes_.start(loop);
}

void CommService::close() {
  nodes_.close();
  uv_close(reinterpret_cast<uv_handle_t*>(&timer_), nullptr);
}

const std::vector<std::shared_ptr<const Comm>>& CommService::comms() {
  std::erase_if(comms_, [](const auto& comm) { return comm->finished.load(); });
  return comms_;
}

bool CommService::forming() const {
  return rendezvous_.pending_comms() > 0 || nodes_.next_deadline().has_value();
}

void CommService::session_closed(uint64_t session_id) {
  rendezvous_.drop_session(session_id);
  next_handle_.erase(session_id);
}

void CommService::init(const Session& session, uint32_t request_id,
                       control::CommInit::Reader init) {
  const uint64_t id = session.id();
  if (session.role() != SessionRole::kRank) {
    hooks_.send_error(id, request_id, PLEXUS_ERR_PROTOCOL,
                      "an admin session cannot join communicators");
    return;
  }
  auto token_data = init.getToken();
  const uint32_t nranks = init.getNranks();
  const uint32_t rank = init.getRank();
  if (token_data.size() != sizeof(CommToken)) {
    hooks_.send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                      "the unique id's token has " + std::to_string(token_data.size()) +
                          " bytes, expected 16 (was it made by plexus_get_unique_id?)");
    return;
  }
  if (nranks == 0 || nranks > kMaxRanks || rank >= nranks) {
    hooks_.send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                      "rank " + std::to_string(rank) + " of " + std::to_string(nranks) +
                          " is not a valid position (need 0 <= rank < nranks <= 65536)");
    return;
  }
  CommToken token;
  std::memcpy(token.data(), token_data.begin(), token.size());
  for (const auto& comm : comms()) {
    if (comm->token() == token) {
      hooks_.send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                        "communicator " + token_prefix(token) + " already formed with all " +
                            std::to_string(comm->nranks()) + " ranks; rank " +
                            std::to_string(rank) + " cannot join it again");
      return;
    }
  }
  const uint32_t timeout_ms = std::min<uint32_t>(init.getTimeoutMs(), kMaxJoinTimeoutMs);
  NodeJoins::RootRef root{init.getRootInstance(), {}};
  for (auto address : init.getRootAddresses()) {
    if (root.addresses.size() < 8 && address.size() <= 64)
      root.addresses.emplace_back(address.cStr());
  }
  // A draining node lets a communicator that some of its ranks have joined already form (it
  // was admitted before the drain); it refuses only new ones, and tells a multi-node one's
  // root, which fails it for the other nodes at once. DAEMON_UNAVAILABLE: the job may go
  // elsewhere; this node is being taken out of service.
  if (hooks_.draining() && !rendezvous_.has(token)) {
    const std::string why = "node " + config_.node_name +
                            " is draining (plexusctl node drain): it admits no new "
                            "communicator; rank " +
                            std::to_string(rank) + " of " + std::to_string(nranks) + " was refused";
    hooks_.send_error(id, request_id, PLEXUS_ERR_DAEMON_UNAVAILABLE, why);
    if (!local_only(root)) nodes_.refuse_join(token, root, PLEXUS_ERR_DAEMON_UNAVAILABLE, why);
    return;
  }
  route_join(session, request_id, token, static_cast<int>(nranks), static_cast<int>(rank),
             timeout_ms, root, std::string(init.getAlgorithm()).substr(0, 33));
}

bool CommService::local_only(const NodeJoins::RootRef& root) const {
  // A unique id made by this daemon while it serves no peers, or made where no daemon was
  // reachable, names a communicator of this node alone.
  return root.instance == 0 ||
         (nodes_.identity() == nullptr && root.instance == nodes_.instance_id());
}

void CommService::route_join(const Session& session, uint32_t request_id, const CommToken& token,
                             int nranks, int rank, uint32_t timeout_ms,
                             const NodeJoins::RootRef& root, const std::string& algorithm,
                             const NodeJoins::ShrinkOf* shrink) {
  if (local_only(root)) {
    join_here(session, request_id, token, nranks, rank, timeout_ms);
    return;
  }
  nodes_.join(session, request_id, token, nranks, rank, timeout_ms, root, algorithm, shrink);
}

void CommService::expect_successor(const CommToken& token, Comm::Origin origin) {
  if (pending_successors_.insert_or_assign(token, std::move(origin)).second) {
    pending_order_.push_back(token);
  }
  while (pending_order_.size() > kSuccessorsKept) {
    pending_successors_.erase(pending_order_.front());
    pending_order_.pop_front();
  }
}

void CommService::join_here(const Session& session, uint32_t request_id, const CommToken& token,
                            int nranks, int rank, uint32_t timeout_ms) {
  CommRendezvous::Joiner joiner{
      session.id(),
      session.creds().pid,
      request_id,
      rank,
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms),
      0};
  auto result = rendezvous_.join(token, nranks, joiner);
  if (result.outcome == CommRendezvous::JoinResult::kRejected) {
    hooks_.send_error(session.id(), request_id, PLEXUS_ERR_INVALID_ARGUMENT, result.error);
    return;
  }
  if (result.outcome == CommRendezvous::JoinResult::kFormed) {
    form_comm(token, nranks, result.members, std::nullopt);
  }
  arm_timer();
}

void CommService::form_comm(const CommToken& token, int nranks,
                            const std::vector<CommRendezvous::Joiner>& joiners,
                            std::optional<NodeSpan> span) {
  std::vector<Comm::Member> members(static_cast<size_t>(nranks));
  if (span) {
    for (int r = 0; r < nranks; ++r) {
      members[static_cast<size_t>(r)].remote =
          span->topology.rank_node[static_cast<size_t>(r)] != span->topology.my_node;
    }
  }
  for (const auto& joiner : joiners) {
    Comm::Member& member = members[static_cast<size_t>(joiner.rank)];
    member.session_id = joiner.session_id;
    member.pid = joiner.pid;
    uint32_t& next = next_handle_.try_emplace(joiner.session_id, 1).first->second;
    member.handle = next++;
  }
  const bool multi = span.has_value();
  const size_t nodes = multi ? span->node_ids.size() : 1;
  std::optional<Comm::Origin> origin;
  if (auto it = pending_successors_.find(token); it != pending_successors_.end()) {
    origin = std::move(it->second);
    pending_successors_.erase(it);
    std::erase(pending_order_, token);
    formed_successors_.push_back(token);
    if (formed_successors_.size() > kSuccessorsKept) formed_successors_.pop_front();
  }
  auto comm = std::make_shared<Comm>(token, members, std::move(span), origin);
  comms_.push_back(comm);
  if (origin) {
    engine_.events().emit(origin->event, "info",
                          "communicator " + token_prefix(token) + " formed as the " + origin->how +
                              " (" + std::to_string(nranks) + " ranks)",
                          {{"comm", token_prefix(token)},
                           {"predecessor", token_prefix(origin->predecessor)},
                           {"nranks", nranks}});
  }
  if (multi) {
    spdlog::info("communicator {} ready: {} ranks on {} nodes, {} here", token_prefix(token),
                 nranks, nodes, comm->local_ranks());
  } else {
    spdlog::info("communicator {} formed with {} ranks", token_prefix(token), nranks);
  }
  // Each rank hears its handle only once the engine holds the communicator: an entry that
  // names the handle can then never reach the engine before the communicator does.
  struct Reply {
    uint64_t session_id;
    uint32_t request_id;
    uint32_t handle;
  };
  std::vector<Reply> replies;
  for (const auto& joiner : joiners) {
    replies.push_back(
        {joiner.session_id, joiner.request_id, members[static_cast<size_t>(joiner.rank)].handle});
  }
  engine_.post([this, comm, replies = std::move(replies)](Engine& e) {
    e.add_comm(comm);
    hooks_.post([this, replies] {
      for (const Reply& r : replies) {
        capnp::MallocMessageBuilder reply;
        auto root = daemon_reply(reply, r.request_id);
        root.initCommInitReply().setComm(r.handle);
        hooks_.reply(r.session_id, reply);
      }
    });
  });
  arm_timer();
}

void CommService::leave(uint64_t id, uint32_t request_id, control::CommLeave::Reader leave) {
  const uint32_t handle = leave.getComm();
  const bool abort = leave.getAbort();
  // Reply once the engine has failed what was pending, so the client sees those
  // completions before the reply.
  engine_.post([this, id, handle, abort, request_id](Engine& e) {
    e.leave_comm(id, handle, abort);
    hooks_.post([this, id, request_id] {
      capnp::MallocMessageBuilder reply;
      daemon_reply(reply, request_id).setCommLeaveReply();
      hooks_.reply(id, reply);
    });
  });
}

void CommService::arm_timer() {
  auto next = rendezvous_.next_deadline();
  if (auto multi = nodes_.next_deadline(); multi && (!next || *multi < *next)) next = multi;
  if (!next) {
    uv_timer_stop(&timer_);
    return;
  }
  auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
      *next - std::chrono::steady_clock::now());
  uv_timer_start(
      &timer_, [](uv_timer_t* h) { static_cast<CommService*>(h->data)->on_timer(); },
      static_cast<uint64_t>(std::max<int64_t>(0, wait.count()) + 1), 0);
}

void CommService::on_timer() {
  const auto now = std::chrono::steady_clock::now();
  nodes_.expire(now);
  for (const auto& expired : rendezvous_.expire(now)) {
    spdlog::warn("{} (rank {} pid {} gave up)", expired.message, expired.joiner.rank,
                 expired.joiner.pid);
    hooks_.send_error(expired.joiner.session_id, expired.joiner.request_id, PLEXUS_ERR_TIMEOUT,
                      expired.message);
  }
  nodes_.forget_abandoned();
  arm_timer();
}

}  // namespace plexus::daemon
