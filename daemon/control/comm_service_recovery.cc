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

std::pair<std::shared_ptr<const Comm>, int> CommService::membership(uint64_t session_id,
                                                                    uint32_t handle) const {
  for (const auto& comm : comms_) {
    if (comm->finished.load()) continue;
    for (int r = 0; r < comm->nranks(); ++r) {
      const Comm::Member& m = comm->members()[static_cast<size_t>(r)];
      if (!m.remote && m.session_id == session_id && m.handle == handle) return {comm, r};
    }
  }
  return {nullptr, -1};
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
  const uint64_t id = session.id();
  const uint32_t handle = revoke_request.getComm();
  auto [comm, rank] = membership(id, handle);
  if (!comm) {
    hooks_.send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                      "this process holds no communicator with handle " + std::to_string(handle) +
                          " (destroyed already?)");
    return;
  }
  std::string reason = revoke_request.getReason().cStr();
  if (reason.size() > 256) reason.resize(256);
  const std::string text = "communicator " + token_prefix(comm->token()) + " was revoked by rank " +
                           std::to_string(rank) + " (" + session.describe() + ") on node " +
                           config_.node_name + (reason.empty() ? std::string() : ": " + reason);
  // Answered once the engine failed this node's ops, so the client sees their completions
  // before the reply.
  revoke_comm(comm, id, handle, text, [this, id, request_id] {
    capnp::MallocMessageBuilder reply;
    daemon_reply(reply, request_id).setCommRevokeReply();
    hooks_.reply(id, reply);
  });
}

void CommService::shrink(const Session& session, uint32_t request_id,
                         control::CommShrink::Reader shrink) {
  const uint64_t id = session.id();
  const uint32_t handle = shrink.getComm();
  auto [parent, rank] = membership(id, handle);
  if (!parent) {
    hooks_.send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                      "this process holds no communicator with handle " + std::to_string(handle) +
                          " to shrink (destroyed already?)");
    return;
  }
  const std::string of = "the shrink of communicator " + token_prefix(parent->token());
  std::vector<int> excluded;
  if (shrink.getExclude().size() > static_cast<unsigned>(parent->nranks())) {
    hooks_.send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                      of + ": more ranks to exclude than it has");
    return;
  }
  for (uint32_t r : shrink.getExclude()) excluded.push_back(static_cast<int>(r));
  if (std::string problem = exclude_problem(excluded, parent->nranks(), rank); !problem.empty()) {
    hooks_.send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                      of + " (rank " + std::to_string(rank) + "): " + problem);
    return;
  }
  const CommToken token = successor_token(parent->token(), excluded);
  for (const auto& comm : comms_) {
    if (comm->token() == token) {
      hooks_.send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                        of + ": its successor without these ranks formed already (communicator " +
                            token_prefix(token) + ")");
      return;
    }
  }
  const int nranks = parent->nranks() - static_cast<int>(excluded.size());
  const int new_rank = successor_rank(excluded, rank);
  const uint32_t timeout_ms = std::clamp<uint32_t>(shrink.getTimeoutMs(), 1, 24u * 3600 * 1000);
  spdlog::info("rank {} of communicator {} shrinks it to {} rank(s) (communicator {})", rank,
               token_prefix(parent->token()), nranks, token_prefix(token));
  std::string without;
  for (int r : excluded) without += (without.empty() ? "" : ",") + std::to_string(r);
  expect_successor(token, Comm::Origin{parent->token(),
                                       "shrink of " + token_prefix(parent->token()) +
                                           (without.empty() ? std::string(" with every rank")
                                                            : " without rank(s) " + without),
                                       "comm_shrunk"});
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
  revoke_comm(parent, id, handle,
              "communicator " + token_prefix(parent->token()) + " was revoked by rank " +
                  std::to_string(rank) + " (" + session.describe() + ") on node " +
                  config_.node_name + " to shrink it",
              join);
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
  auto [parent, rank] = membership(session.id(), grow.getComm());
  if (!parent) {
    hooks_.send_error(session.id(), request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                      "this process holds no communicator with handle " +
                          std::to_string(grow.getComm()) + " to grow (destroyed already?)");
    return;
  }
  const CommToken token = growth_token(parent->token(), grow.getSequence());
  const NodeJoins::RootRef root = growth_root(*parent);
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
  auto [parent, rank] = membership(id, grow.getComm());
  if (!parent) {
    hooks_.send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                      "this process holds no communicator with handle " +
                          std::to_string(grow.getComm()) + " to grow (destroyed already?)");
    return;
  }
  const uint32_t nranks = grow.getNranks();
  if (nranks <= static_cast<uint32_t>(parent->nranks()) || nranks > 65536) {
    hooks_.send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                      "communicator " + token_prefix(parent->token()) + " has " +
                          std::to_string(parent->nranks()) + " ranks: it cannot grow to " +
                          std::to_string(nranks) + " (need more, at most 65536)");
    return;
  }
  const CommToken token = growth_token(parent->token(), grow.getSequence());
  spdlog::info("rank {} of communicator {} grows it to {} rank(s) (communicator {})", rank,
               token_prefix(parent->token()), nranks, token_prefix(token));
  expect_successor(token, Comm::Origin{parent->token(),
                                       "growth of " + token_prefix(parent->token()) + " to " +
                                           std::to_string(nranks) + " ranks",
                                       "comm_grown"});
  const auto& forced = parent->span() ? parent->span()->forced : std::nullopt;
  route_join(session, request_id, token, static_cast<int>(nranks), rank,
             std::clamp<uint32_t>(grow.getTimeoutMs(), 1, 24u * 3600 * 1000), growth_root(*parent),
             forced ? algo::algorithm_name(*forced) : "");
}

}  // namespace plexus::daemon
