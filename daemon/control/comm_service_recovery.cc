// Recovering from a lost member: a rank revokes a communicator (its ops fail on every node),
// the survivors shrink it to a successor the daemons agree on, without a unique id, and the
// members grow it again with new ranks (a replacement node) that join with an id a member
// made.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "daemon/algorithms/algorithm.h"
#include "daemon/control/comm_service.h"
#include "daemon/control/comm_successor.h"
#include "daemon/control/daemon_reply.h"

namespace plexus::daemon {

namespace control = shm::control;

std::optional<CommService::Member> CommService::member(const Session& session, uint32_t request_id,
                                                       uint32_t handle, const char* to) {
  for (const auto& comm : comms_) {
    if (comm->finished.load()) continue;
    for (int r = 0; r < comm->nranks(); ++r) {
      const Comm::Member& m = comm->members()[static_cast<size_t>(r)];
      if (!m.remote && m.session_id == session.id() && m.handle == handle) {
        return Member{comm, r};
      }
    }
  }
  hooks_.send_error(session.id(), request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                    "this process holds no communicator with handle " + std::to_string(handle) +
                        " to " + to + " (destroyed already?)");
  return std::nullopt;
}

std::string CommService::revoked_by(const Member& m, const Session& session,
                                    const std::string& why) const {
  return "communicator " + token_prefix(m.comm->token()) + " was revoked by rank " +
         std::to_string(m.rank) + " (" + session.describe() + ") on node " + config_.node_name +
         why;
}

bool CommService::made_already(const Session& session, uint32_t request_id, const CommToken& token,
                               const std::string& what) {
  const bool here = std::any_of(comms_.begin(), comms_.end(),
                                [&](const auto& comm) { return comm->token() == token; });
  if (!here && std::find(formed_successors_.begin(), formed_successors_.end(), token) ==
                   formed_successors_.end()) {
    return false;
  }
  // Its token follows from what it succeeds: made twice, the nodes would take the second
  // for the first (and drop its topology).
  hooks_.send_error(session.id(), request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                    what + " was made already (communicator " + token_prefix(token) +
                        "); destroying it does not undo that: shrink or grow that one instead");
  return true;
}

uint32_t CommService::timeout_of(uint32_t ms) {
  return std::clamp<uint32_t>(ms, 1, kMaxJoinTimeoutMs);
}

void CommService::revoke_comm(const std::shared_ptr<const Comm>& comm, uint64_t session_id,
                              uint32_t handle, const std::string& text,
                              std::function<void()> then) {
  spdlog::warn("{}", text);
  // The other nodes first: they need not wait for this node's engine.
  if (comm->span()) nodes_.revoke(comm, text);
  engine_.post([this, session_id, handle, text, then = std::move(then)](Engine& e) {
    e.revoke_comm(session_id, handle, text);
    hooks_.post(then);
  });
}

void CommService::revoke(const Session& session, uint32_t request_id,
                         control::CommRevoke::Reader revoke_request) {
  const uint32_t handle = revoke_request.getComm();
  auto m = member(session, request_id, handle, "revoke");
  if (!m) return;
  std::string reason = revoke_request.getReason().cStr();
  if (reason.size() > 256) reason.resize(256);
  const uint64_t id = session.id();
  // Answered once the engine failed this node's ops, so the client sees their completions
  // before the reply.
  revoke_comm(m->comm, id, handle, revoked_by(*m, session, reason.empty() ? "" : ": " + reason),
              [this, id, request_id] {
                capnp::MallocMessageBuilder reply;
                daemon_reply(reply, request_id).setCommRevokeReply();
                hooks_.reply(id, reply);
              });
}

void CommService::suspend(const Session& session, uint32_t request_id,
                          control::CommSuspend::Reader suspend) {
  const uint32_t handle = suspend.getComm();
  const bool parks = suspend.getSuspend();
  auto m = member(session, request_id, handle, parks ? "suspend" : "resume");
  if (!m) return;
  const uint64_t id = session.id();
  engine_.post([this, id, request_id, handle, parks](Engine& e) {
    const uint64_t released = e.suspend_comm(id, handle, parks);
    hooks_.post([this, id, request_id, released] {
      capnp::MallocMessageBuilder reply;
      daemon_reply(reply, request_id).setCommSuspendReply(released);
      hooks_.reply(id, reply);
    });
  });
}

void CommService::shrink(const Session& session, uint32_t request_id,
                         control::CommShrink::Reader shrink) {
  const uint64_t id = session.id();
  const uint32_t handle = shrink.getComm();
  auto m = member(session, request_id, handle, "shrink");
  if (!m) return;
  const std::shared_ptr<const Comm> parent = m->comm;
  const std::string of = "the shrink of communicator " + token_prefix(parent->token());
  if (shrink.getExclude().size() > static_cast<unsigned>(parent->nranks())) {
    hooks_.send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                      of + ": more ranks to exclude than it has");
    return;
  }
  std::vector<int> excluded;
  for (uint32_t r : shrink.getExclude()) excluded.push_back(static_cast<int>(r));
  if (std::string problem = exclude_problem(excluded, parent->nranks(), m->rank);
      !problem.empty()) {
    hooks_.send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                      of + " (rank " + std::to_string(m->rank) + "): " + problem);
    return;
  }
  std::string without;
  for (int r : excluded) without += (without.empty() ? "" : ",") + std::to_string(r);
  const std::string what =
      of + (without.empty() ? std::string(" with every rank") : " without rank(s) " + without);
  const CommToken token = successor_token(parent->token(), excluded);
  if (made_already(session, request_id, token, what)) return;
  const int nranks = parent->nranks() - static_cast<int>(excluded.size());
  const int new_rank = successor_rank(excluded, m->rank);
  const uint32_t timeout_ms = timeout_of(shrink.getTimeoutMs());
  spdlog::info("rank {} of communicator {} shrinks it to {} rank(s) (communicator {})", m->rank,
               token_prefix(parent->token()), nranks, token_prefix(token));
  expect_successor(token, Comm::Origin{parent->token(), what.substr(4), "comm_shrunk"});
  auto join = [this, parent, id, request_id, token, nranks, new_rank, timeout_ms, excluded] {
    std::shared_ptr<const Session> held = hooks_.session(id);
    if (!held) return;  // its connection closed meanwhile
    if (!parent->span()) {
      join_here(*held, request_id, token, nranks, new_rank, timeout_ms);
      return;
    }
    const NodeSpan& span = *parent->span();
    const size_t root = successor_root(*parent, excluded);
    const NodeJoins::ShrinkOf shrink_of{parent->token(), excluded};
    nodes_.join(*held, request_id, token, nranks, new_rank, timeout_ms,
                NodeJoins::RootRef{span.node_ids[root], span.node_addresses[root]},
                span.forced ? algo::algorithm_name(*span.forced) : "", &shrink_of);
  };
  if (!shrink.getAbort()) {
    join();
    return;
  }
  // NCCL_SHRINK_ABORT: the parent's ops in flight end first, on every node.
  revoke_comm(parent, id, handle, revoked_by(*m, session, " to shrink it"), join);
}

NodeJoins::RootRef CommService::growth_root(const Comm& parent) const {
  if (parent.span()) {
    const NodeSpan& span = *parent.span();
    const auto node = static_cast<size_t>(span.topology.rank_node[0]);
    return {span.node_ids[node], span.node_addresses[node]};
  }
  // A communicator of this node alone grows across nodes where this daemon serves peers.
  const transports::PeerIdentity* me = nodes_.identity();
  if (me == nullptr) return {};
  return {nodes_.instance_id(), me->addresses};
}

void CommService::grow_id(const Session& session, uint32_t request_id,
                          control::CommGrow::Reader grow) {
  auto m = member(session, request_id, grow.getComm(), "grow");
  if (!m) return;
  const CommToken token = growth_token(m->comm->token(), grow.getSequence());
  const NodeJoins::RootRef root = growth_root(*m->comm);
  capnp::MallocMessageBuilder reply;
  auto id = daemon_reply(reply, request_id).initGrowIdReply();
  id.setToken(kj::arrayPtr(token.data(), token.size()));
  id.setRootInstance(root.instance);
  auto addresses = id.initRootAddresses(static_cast<unsigned>(root.addresses.size()));
  for (unsigned i = 0; i < addresses.size(); ++i) addresses.set(i, root.addresses[i]);
  hooks_.reply(session.id(), reply);
}

void CommService::grow(const Session& session, uint32_t request_id,
                       control::CommGrow::Reader grow) {
  const uint64_t id = session.id();
  auto m = member(session, request_id, grow.getComm(), "grow");
  if (!m) return;
  const std::shared_ptr<const Comm> parent = m->comm;
  const int rank = m->rank;
  const uint32_t nranks = grow.getNranks();
  if (nranks <= static_cast<uint32_t>(parent->nranks()) || nranks > kMaxRanks) {
    hooks_.send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                      "communicator " + token_prefix(parent->token()) + " has " +
                          std::to_string(parent->nranks()) + " ranks: it cannot grow to " +
                          std::to_string(nranks) + " (need more, at most " +
                          std::to_string(kMaxRanks) + ")");
    return;
  }
  const CommToken token = growth_token(parent->token(), grow.getSequence());
  const std::string what = "the growth number " + std::to_string(grow.getSequence()) +
                           " of communicator " + token_prefix(parent->token());
  if (made_already(session, request_id, token, what)) return;
  spdlog::info("rank {} of communicator {} grows it to {} rank(s) (communicator {})", rank,
               token_prefix(parent->token()), nranks, token_prefix(token));
  expect_successor(token, Comm::Origin{parent->token(),
                                       "growth of " + token_prefix(parent->token()) + " to " +
                                           std::to_string(nranks) + " ranks",
                                       "comm_grown"});
  const auto& forced = parent->span() ? parent->span()->forced : std::nullopt;
  route_join(session, request_id, token, static_cast<int>(nranks), rank,
             timeout_of(grow.getTimeoutMs()), growth_root(*parent),
             forced ? algo::algorithm_name(*forced) : "");
}

}  // namespace plexus::daemon
