// What the internode runner tells and asks of the links beyond an op's own frames: notices
// (a communicator failed here, a rank left) to the nodes this one has links to, relayed
// once; which links must stay open while idle (waits_on); a peer's addresses for reopening
// one (addresses_of).
#include <algorithm>
#include <string>
#include <vector>

#include "daemon/engine/internode_runner.h"

namespace plexus::daemon {

// Notices go only to the nodes this one has a link to, never opening one per node: each
// node that hears relays them to its own links (remote_rank_departed, comm_failed), so they
// spread along the links the communicator's plans opened (start_op links every node an op
// exchanges with, receive-only ones too); a link closed while idle opens again for them
// (told()). A node none of them reached hears when it links to a node that failed the
// communicator or when its data arrives there (on_peer_linked, tell_late_node), or, where
// every rank of that node left, the reply for a retired id.
bool InternodeRunner::told(Comm& comm, size_t node) {
  const NodeSpan& span = *comm.span();
  if (static_cast<int>(node) == span.topology.my_node || !links_.known(span.node_ids[node])) {
    return false;
  }
  reach(comm, static_cast<int>(node));  // a dormant link opens again
  return true;
}

void InternodeRunner::send_departed(Comm& comm, int rank, const std::string& reason) {
  const NodeSpan& span = *comm.span();
  for (size_t node = 0; node < span.node_ids.size(); ++node) {
    if (!told(comm, node)) continue;
    links_.send_departed(span.node_ids[node], span.comm_id, rank,
                         comm.next_seq[static_cast<size_t>(rank)], reason);
  }
}

void InternodeRunner::tell_peers_failed(Comm& comm, const std::string& reason) {
  const NodeSpan& span = *comm.span();
  InternodeState& state = *comm.internode;
  state.abort_text = "node " + node_name(comm, span.topology.my_node) + ": " + reason;
  state.told.assign(span.node_ids.size(), false);
  for (size_t node = 0; node < span.node_ids.size(); ++node) {
    if (!told(comm, node)) continue;
    state.told[node] = true;
    links_.send_abort(span.node_ids[node], span.comm_id, state.abort_text,
                      static_cast<uint32_t>(comm.broken_status()));
  }
}

bool InternodeRunner::waits_on(uint64_t peer) const {
  if (weights_.busy_with(peer)) return true;
  for (const auto& [id, comm] : comm_by_id_) {
    if (!comm->internode) continue;
    const int node = node_of(*comm, peer);
    if (node < 0) continue;
    if (comm->internode->active) {
      const std::vector<int>& peers = comm->internode->active->peers();
      if (std::find(peers.begin(), peers.end(), node) != peers.end()) return true;
    }
    // A recv here naming one of that node's ranks: its link stays, so that the node's failure
    // reaches the recv (a dormant link would hear of it only on its next use). A recv from
    // any source keeps no link: it hears of a lost node from the communicator's revoke.
    const NodeTopology& topology = comm->span()->topology;
    if (comm->p2p.recv_waits_on(
            [&](int source) { return topology.rank_node[static_cast<size_t>(source)] == node; })) {
      return true;
    }
  }
  return false;
}

std::vector<std::string> InternodeRunner::addresses_of(uint64_t peer) const {
  for (const auto& [id, comm] : comm_by_id_) {
    const int node = node_of(*comm, peer);
    const NodeSpan& span = *comm->span();
    if (node >= 0 && static_cast<size_t>(node) < span.node_addresses.size()) {
      return span.node_addresses[static_cast<size_t>(node)];
    }
  }
  return {};
}

void InternodeRunner::on_peer_linked(uint64_t peer) {
  // A node that links to this one only now (it receives from it, say) may not have heard that
  // a communicator they share failed here: it hears now.
  for (auto& [id, comm] : comm_by_id_) {
    if (!comm->broken() || !comm->internode) continue;
    const int node = node_of(*comm, peer);
    if (node >= 0) tell_late_node(*comm, node);
  }
}

void InternodeRunner::tell_late_node(Comm& comm, int node) {
  InternodeState& state = *comm.internode;
  const auto n = static_cast<size_t>(node);
  if (state.abort_text.empty() || n >= state.told.size() || state.told[n]) return;
  state.told[n] = true;
  links_.send_abort(comm.span()->node_ids[n], comm.span()->comm_id, state.abort_text,
                    static_cast<uint32_t>(comm.broken_status()));
}

void InternodeRunner::remote_rank_departed(Comm& comm, int from, int rank, uint64_t collectives,
                                           const std::string& text) {
  if (rank < 0 || rank >= comm.nranks()) return;
  Comm::Presence& member = comm.presence[static_cast<size_t>(rank)];
  if (!comm.members()[static_cast<size_t>(rank)].remote || !member.present) return;
  const NodeSpan& span = *comm.span();
  const int node = span.topology.rank_node[static_cast<size_t>(rank)];
  const std::string reason = "node " + node_name(comm, node) + ": " + text;
  if (!member.heard) {  // relayed once, the first time (see send_departed)
    member.heard = true;
    for (size_t other = 0; other < span.node_ids.size(); ++other) {
      const auto o = static_cast<int>(other);
      if (o == from || o == node || !told(comm, other)) continue;
      links_.send_departed(span.node_ids[other], span.comm_id, rank, collectives, text);
    }
  }
  if (comm.remote_departure.empty()) comm.remote_departure = reason;
  comm.remote_limit = std::min(comm.remote_limit, collectives);
  InternodeState& state = *comm.internode;
  if (from != node) {
    // Relayed: it came by another route than the node's own frames to this one, which may
    // still be on the way. Only what the rank never joined is sure: the collectives from
    // `collectives` on (the running one too, if it is one of them). The node's own notice,
    // if it has a link here, does the rest.
    if (state.active && state.active_seq >= collectives && state.active->expects_from(node)) {
      defer_failure(comm, reason + " before collective #" + std::to_string(state.active_seq) +
                              ", which needs its data");
      return;
    }
    fail_unjoined(comm, reason);
    return;
  }
  member.present = false;
  member.departure = reason;
  // Everything it sent came before this notice and was delivered; recvs only it could
  // satisfy never will be.
  hooks_.p2p_source_gone(comm);
  if (state.active && state.active->expects_from(node)) {
    // Its node sent everything it will ever send for this op: the rest never comes.
    defer_failure(comm, reason + " while collective #" + std::to_string(state.active_seq) +
                            " still needed its data");
    return;
  }
  fail_unjoined(comm, reason);
}

void InternodeRunner::fail_unjoined(Comm& comm, const std::string& reason) {
  // Queued collectives a departed rank never joined can never run; earlier ones still can
  // (its node sent their data before its notice). Later submissions fail in
  // submit_collective.
  InternodeState& state = *comm.internode;
  while (!comm.collectives.empty() &&
         comm.first_seq + comm.collectives.size() - 1 >= comm.remote_limit &&
         !(state.active && comm.collectives.size() == 1)) {
    for (auto& part : comm.collectives.back().parts) {
      hooks_.complete(part.session, part.entry.user_data, PLEXUS_ERR_PEER_LOST, reason);
    }
    comm.collectives.pop_back();
  }
}

}  // namespace plexus::daemon
