// The control thread's connections to other daemons, as the rendezvous (NodeJoins) sees
// them: control messages (node_control.capnp) to and from peer daemons, and data
// connections opened to them and handed to the engine. A composition of three parts, each
// owning its state: PeerConnections (the listener, connectors and handshakes: the sockets),
// ControlChannels (which connection each peer's control messages go on, and failover), and
// RailConnector (which data connections are opened, to whom, and when again). It owns them
// and wires their hooks to one another and to Callbacks.
// Runs on the control thread's libuv loop; nothing here is thread-safe.
#pragma once

#include <uv.h>

#include <capnp/message.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/peers/control_channels.h"
#include "daemon/peers/data_transport.h"
#include "daemon/peers/peer_connections.h"
#include "daemon/peers/peer_nics.h"
#include "daemon/peers/rail_connector.h"
#include "transports/path/data_path.h"
#include "transports/path/sendable_memory.h"
#include "transports/peer/peer_handshake.h"
#include "transports/rdma/rdma_path.h"

namespace plexus::daemon {

class PeerServer {
 public:
  struct Callbacks {
    // A control message from an authenticated peer.
    std::function<void(const transports::PeerIdentity& peer, kj::Array<capnp::word> words)>
        on_control;
    // `instance` cannot be reached for control messages: its control connection failed and
    // no new one could be opened over any of its addresses; the messages still
    // unacknowledged are dropped. `gone`: every address refused (no plexusd listens, or
    // another daemon answers): its daemon stopped. Otherwise it was unreachable for the
    // grace (this node's NICs or its own down, or no route), and its data link, which may
    // still have a path (a backup across rails), is left to its own watch. `name` is its
    // node name when known, else the address tried.
    std::function<void(uint64_t instance, const std::string& name, const std::string& reason,
                       bool gone)>
        on_control_lost;
    // An authenticated data connection over local NIC `nic` ("" when no NIC has its
    // address); `backup`: it crosses rails (its remote end is in another local NIC's
    // subnet). `open` opens the path over it (it owns the connection until then).
    // `rail_key`: the rail this side dialled it for (RailConnector's key; "" when accepted):
    // what rail_lost is given back if its path fails.
    std::function<void(const transports::PeerIdentity& peer, transports::PathOpener open,
                       const std::string& nic, bool backup, bool latency,
                       const std::string& rail_key)>
        on_data_link;
    // No data connection to `instance` could be opened (every rail failed before one was
    // authenticated); rails of a peer already linked are retried instead.
    std::function<void(uint64_t instance, const std::string& reason)> on_data_failed;
    // Whether the control connection to `instance` must stay open however quiet
    // (ControlChannels::Hooks::busy).
    std::function<bool(uint64_t instance)> control_busy;
  };

  struct Settings {
    // Every peer connection's TCP congestion control (empty: the host's).
    std::string tcp_congestion;
    // Beside each rail (not the backups) a second data connection for the latency class's
    // frames, marked with DSCP latency_dscp and socket priority 6 (tcp_traffic_class.h), so
    // that the kernel's and the switches' queues keep it apart from bulk data.
    bool latency_connections = false;
    uint32_t latency_dscp = 0;
    // The NICs peers are reached over (find_peer_nics). Each is a rail: one data connection
    // per peer NIC in its subnet (two with latency_connections).
    std::vector<PeerNic> nics;
    // Longest wait between attempts to reconnect a rail (the backoff doubles up to it).
    std::chrono::milliseconds reconnect_max{0};
    DataTransport transport = DataTransport::kTcp;  // --transport (Config's default)
    transports::rdma::RdmaSettings rdma;            // an RDMA path's rings and queues
    // A control message unacknowledged this long fails the connection carrying it, and they
    // go again on a new one over another address (its NIC, or the peer's, may be down).
    std::chrono::milliseconds control_ack_timeout{0};
    // How long a peer may stay unreachable (no control connection opens, but none was
    // refused either: its NICs or this node's are down) before it is reported lost: the
    // data links' grace (--peer-grace-ms), which also paces redialling a link with no path
    // left (RailConnector::Settings::grace).
    std::chrono::milliseconds control_grace{0};
    // A control connection quiet this long is closed by the side that opened it (0: never;
    // --link-idle-close-ms, as for data links).
    std::chrono::milliseconds control_idle_close{0};
    // The client pools the sessions announce (ControlServer makes it): RDMA paths send
    // large payloads from them without a copy.
    std::shared_ptr<transports::SendableMemory> sendable_memory;
    // The listener's backlog and the handshakes' limit (PeerConnections::Settings).
    int backlog = PeerConnections::Settings{}.backlog;
    std::chrono::milliseconds handshake_timeout = PeerConnections::Settings{}.handshake_timeout;
  };

  PeerServer(uv_loop_t* loop, transports::PeerIdentity me, const transports::ClusterSecret* secret,
             Settings settings, Callbacks callbacks);
  PeerServer(const PeerServer&) = delete;
  PeerServer& operator=(const PeerServer&) = delete;

  // Listens on "ip:port" (port 0: any free one) and sets the addresses this daemon
  // advertises: that address, or every interface's IPv4 address for 0.0.0.0. Throws
  // std::runtime_error with a sentence.
  void listen(const std::string& address);
  const transports::PeerIdentity& identity() const { return connections_.identity(); }
  // The listener's backlog as the kernel applies it (PeerConnections::listen_backlog).
  int listen_backlog() const { return connections_.listen_backlog(); }

  // Sends a control message to `instance`, opening a control connection to one of
  // `addresses` first when there is none (messages wait for it). It is numbered and kept
  // until the peer acknowledges it: when the connection fails (or carries no
  // acknowledgement for Settings::control_ack_timeout), a new one is opened over any of
  // the peer's addresses, the one that failed last, and the unacknowledged messages go
  // again on it; the peer drops those it had.
  void send_control(uint64_t instance, const std::vector<std::string>& addresses,
                    capnp::MessageBuilder& message);
  // Opens a data connection to `instance` on every rail (a local NIC and the peer's address
  // in its subnet; when none match, one connection to any address) not connected or being
  // connected, and with two rails or more a backup from each NIC to the peer's address on
  // the next rail (used where a route joins the rails). This side then keeps them up:
  // rail_lost retries with backoff. With Settings::latency_connections, each rail (not the
  // backups) has a twin for the latency class, kept up alike. `forming`: the engine waits
  // for the link (RailConnector::Forming: retried until its deadline).
  void connect_data(uint64_t instance, const std::vector<std::string>& addresses,
                    std::optional<RailConnector::Forming> forming = std::nullopt);
  // The engine's path to `instance` over local NIC `nic` to the peer's `remote` ("ip:port")
  // failed: reconnect it (with exponential backoff) if this side opened it. A control
  // connection to `instance` over the same NIC or to the same peer address is failed over
  // now rather than after its acknowledgement timeout. `rail_key`: the rail the path was
  // dialled for (Callbacks::on_data_link; "" when the peer dialled it: nothing to redial).
  // `pathless`: it was the link's last path; this side's rails to the peer are then
  // dialled again in a hurry (RailConnector::lost).
  void rail_lost(uint64_t instance, const std::string& nic, const std::string& remote,
                 const std::string& rail_key, bool pathless);
  // Local NIC `nic` is up again: its rails are retried now.
  void nic_up(const std::string& nic);
  // The link to `instance` is gone: stop keeping its rails.
  void forget_data_peer(uint64_t instance);
  // Round trip to `instance` (seconds; 0 when unknown): the kernel's smallest on the
  // control connection, else the smallest of the handshakes this daemon started.
  double control_round_trip_s(uint64_t instance) const;
  // `instance` as its last control handshake told it; null once it is lost (or never met).
  const transports::PeerIdentity* control_peer(uint64_t instance) const;
  // Control connections established and open now, either side's.
  size_t open_control_connections() const;

  // Closes every connection and the listener (the loop must run to finish the closes).
  void close();

 private:
  PeerConnections connections_;  // first: the others hold it
  ControlChannels control_;
  RailConnector rails_;
};

}  // namespace plexus::daemon
