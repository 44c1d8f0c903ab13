// NodeJoins' side of the data links to peer daemons: connections handed to the engine, a
// link wanted or lost or retired, a path lost (its rail redialled), a NIC back.
#include "daemon/control/node_joins.h"

namespace plexus::daemon {

using Clock = std::chrono::steady_clock;

void NodeJoins::data_path_lost(uint64_t instance, const std::string& nic, const std::string& remote,
                               const std::string& rail_key, bool pathless) {
  if (peers_) peers_->rail_lost(instance, nic, remote, rail_key, pathless);
}

void NodeJoins::nic_up(const std::string& nic) {
  if (peers_) peers_->nic_up(nic);
}

void NodeJoins::on_data_link(const transports::PeerIdentity& peer, transports::PathOpener open,
                             const std::string& nic, bool backup, bool latency,
                             const std::string& rail_key) {
  data_links_.insert(peer.instance_id);
  dormant_links_.erase(peer.instance_id);
  engine_.post(
      [id = peer.instance_id, name = peer.node_name, open = std::move(open), nic, backup, latency,
       rail_key](Engine& e) { e.links().add(id, name, open, nic, backup, latency, rail_key); });
}

void NodeJoins::on_data_failed(uint64_t instance, const std::string& reason) {
  engine_.post([instance, reason](Engine& e) { e.links().open_failed(instance, reason); });
}

void NodeJoins::path_wanted(uint64_t instance, const std::vector<std::string>& addresses) {
  // Dialled again (jittered backoff) after a timeout or an unfinished handshake until the
  // engine's own deadline for the link; refused everywhere gives up at once.
  // A connection the peer opened may have come meanwhile (the engine had no link when it asked).
  if (peers_ && data_links_.count(instance) == 0) {
    peers_->connect_data(
        instance, addresses,
        RailConnector::Forming{.deadline = Clock::now() + config_.connect_timeout});
  }
}

void NodeJoins::data_link_lost(uint64_t instance) {
  data_links_.erase(instance);
  dormant_links_.erase(instance);
  if (peers_) peers_->forget_data_peer(instance);
  // A shrink waiting here for that node cannot form with it, nor one that waits for it as
  // its root (the idle control connection to it may not notice for a while).
  drop_from_rendezvous(instance);
  const transports::PeerIdentity* peer = peers_ ? peers_->control_peer(instance) : nullptr;
  drop_root(instance, "lost the data connection to the root daemon" +
                          (peer != nullptr ? " (node " + peer->node_name + ")" : std::string()) +
                          " before the communicator formed");
  if (revokes_) {
    revokes_->lost(instance);
    revokes_->node_lost(instance, hooks_.comms(), config_.node_name);
  }
}

void NodeJoins::data_link_retired(uint64_t instance) {
  data_links_.erase(instance);
  dormant_links_.insert(instance);
  if (peers_) peers_->forget_data_peer(instance);
}

}  // namespace plexus::daemon
