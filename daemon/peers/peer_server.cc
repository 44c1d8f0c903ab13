// The peer server's parts wired together: PeerConnections tells ControlChannels of its
// control connections and RailConnector of its data connectors; RailConnector dials through
// PeerConnections; what the rendezvous hears goes to Callbacks.
#include "daemon/peers/peer_server.h"

#include <utility>

#include "daemon/peers/peer_conn.h"
#include "daemon/peers/route_table.h"

namespace plexus::daemon {

static_assert(static_cast<uint64_t>(RailConnector::kMostRedialConnect.count()) ==
                  peer_detail::kConnectAttemptMs,
              "a redial's connect limit is capped at the dialler's own");

namespace {

std::vector<LocalNic> rails_of(const std::vector<PeerNic>& nics) {
  std::vector<LocalNic> rails;
  for (const PeerNic& nic : nics) rails.push_back(nic.rail);
  return rails;
}

}  // namespace

PeerServer::PeerServer(uv_loop_t* loop, transports::PeerIdentity me,
                       const transports::ClusterSecret* secret, Settings settings,
                       Callbacks callbacks)
    : connections_(
          loop, std::move(me), secret,
          PeerConnections::Settings{.tcp_congestion = settings.tcp_congestion,
                                    .latency_dscp = settings.latency_dscp,
                                    .nics = settings.nics,
                                    .transport = settings.transport,
                                    .rdma = settings.rdma,
                                    .sendable_memory = settings.sendable_memory,
                                    .backlog = settings.backlog,
                                    .handshake_timeout = settings.handshake_timeout},
          PeerConnections::Hooks{
              .control_established = [this](PeerConn& c) { control_.established(c); },
              .control_readable = [this](PeerConn& c) { control_.read(c); },
              .control_failed =
                  [this](uint64_t instance, PeerConn& c, const std::string& name,
                         const std::string& reason) { control_.failed(instance, c, name, reason); },
              .redialing = [this](
                               uint64_t instance,
                               const std::string& key) { return rails_.redialing(instance, key); },
              .dial_failed =
                  [this](uint64_t instance, const std::string& key, uint64_t dial,
                         const std::string& reason, bool refused) {
                    rails_.dial_failed(instance, key, dial, reason, refused);
                  },
              .dial_crossed = [this](uint64_t instance, const std::string& key,
                                     uint64_t dial) { rails_.dial_crossed(instance, key, dial); },
              .data_accepted = [this](uint64_t instance) { rails_.accepted(instance); },
              .crossing =
                  [this](uint64_t instance) {
                    return connections_.identity().instance_id < instance && rails_.keeps(instance);
                  },
              .dial_established =
                  [this](uint64_t instance, const std::string& key) {
                    rails_.dial_established(instance, key);
                  },
              .data_link = std::move(callbacks.on_data_link)}),
      control_(loop, connections_,
               ControlChannels::Settings{.ack_timeout = settings.control_ack_timeout,
                                         .grace = settings.control_grace,
                                         .idle_close = settings.control_idle_close},
               ControlChannels::Hooks{.delivered = std::move(callbacks.on_control),
                                      .lost = std::move(callbacks.on_control_lost),
                                      .busy = std::move(callbacks.control_busy)}),
      rails_(loop,
             RailConnector::Settings{.nics = rails_of(settings.nics),
                                     .latency_connections = settings.latency_connections,
                                     .reconnect_max = settings.reconnect_max,
                                     .grace = settings.control_grace,
                                     .jitter_seed = connections_.identity().instance_id},
             RailConnector::Hooks{.dial =
                                      [this](uint64_t instance, const Rail& rail, uint64_t dial,
                                             std::chrono::milliseconds connect_within) {
                                        connections_.dial(instance, rail, dial, connect_within);
                                      },
                                  .failed = std::move(callbacks.on_data_failed),
                                  .routes = &RouteTable::read}) {}

void PeerServer::listen(const std::string& address) {
  connections_.listen(address);
  rails_.start(connections_.binds_to_nics());
  control_.start();
}

void PeerServer::send_control(uint64_t instance, const std::vector<std::string>& addresses,
                              capnp::MessageBuilder& message) {
  control_.send(instance, addresses, message);
}

void PeerServer::connect_data(uint64_t instance, const std::vector<std::string>& addresses,
                              std::optional<RailConnector::Forming> forming) {
  rails_.connect(instance, addresses, forming);
}

void PeerServer::rail_lost(uint64_t instance, const std::string& nic, const std::string& remote,
                           const std::string& rail_key, bool pathless) {
  control_.path_lost(instance, nic, remote);
  rails_.lost(instance, rail_key, pathless);
}

void PeerServer::nic_up(const std::string& nic) { rails_.nic_up(nic); }

void PeerServer::forget_data_peer(uint64_t instance) { rails_.forget(instance); }

double PeerServer::control_round_trip_s(uint64_t instance) const {
  return control_.round_trip_s(instance);
}

const transports::PeerIdentity* PeerServer::control_peer(uint64_t instance) const {
  return control_.peer(instance);
}

size_t PeerServer::open_control_connections() const {
  size_t n = 0;
  for (const PeerConn* c : connections_.connections()) {
    n += c->is_established && !c->closing && c->handshake->role() == transports::PeerRole::kControl
             ? 1
             : 0;
  }
  return n;
}

void PeerServer::close() {
  connections_.close();
  control_.close();
  rails_.close();
}

}  // namespace plexus::daemon
