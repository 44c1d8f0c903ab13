// The sockets between this daemon and its peers: the listener, connectors (each trying a
// peer's addresses in turn; a data connector over its rail's NIC), and the handshake on each
// (transports/peer/peer_handshake.h), read exactly so that no byte of a data connection's
// stream is consumed here. An established connection is then either a control connection,
// which ControlChannels reads and writes through Hooks, or a data connection, handed to the
// engine as a PathOpener (Hooks::data_link).
// Owns: the listener, every connection (PeerConn) until it is closed or handed off, this
// daemon's identity as its handshakes give it, and the handshakes' round trips. It decides
// neither to whom control messages go (ControlChannels) nor which rails are opened and when
// (RailConnector): it opens what they ask and tells them what became of it.
// Control thread only (the libuv loop it is given); nothing here is thread-safe.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "daemon/peers/data_transport.h"
#include "daemon/peers/peer_nics.h"
#include "daemon/peers/rail_plan.h"
#include "daemon/peers/rdma_offers.h"
#include "transports/path/data_path.h"
#include "transports/path/sendable_memory.h"
#include "transports/peer/peer_handshake.h"
#include "transports/rdma/rdma_path.h"

namespace plexus::daemon {

struct PeerConn;  // peer_conn.h

class PeerConnections {
 public:
  struct Settings {
    std::string tcp_congestion;  // every connection's TCP congestion control ("": the host's)
    uint32_t latency_dscp = 0;   // the latency class's connections' DSCP
    std::vector<PeerNic> nics;   // what this daemon advertises, and which NIC a socket is on
    DataTransport transport = DataTransport::kTcp;
    transports::rdma::RdmaSettings rdma;
    std::shared_ptr<transports::SendableMemory> sendable_memory;
    // The listener's queue of connections the kernel completed and this thread has not yet
    // accepted: every member of a new communicator connects to its root at once, and
    // a SYN that finds the queue full is dropped (the connector resends it 1 s, then 3 s,
    // later). The kernel caps it at net.core.somaxconn; listen() logs when it did.
    int backlog = 4096;
    // A handshake not finished this long after the connect (connector) or the accept
    // (acceptor) fails its connection; what already arrived is read first.
    std::chrono::milliseconds handshake_timeout{5000};
  };
  struct Hooks {
    // A control connection finished its handshake (ControlChannels::established).
    std::function<void(PeerConn&)> control_established;
    // An established control connection has bytes (or its end) to read (ControlChannels::read).
    std::function<void(PeerConn&)> control_readable;
    // A control connection to or from `instance` failed and is closed; `name` says whom it
    // was with (ControlChannels::failed).
    std::function<void(uint64_t instance, PeerConn&, const std::string& name,
                       const std::string& reason)>
        control_failed;
    // Whether rail `rail_key` to `instance` is being dialled again after failing: its
    // connect failures are then logged only at debug (RailConnector::redialing).
    std::function<bool(uint64_t instance, const std::string& rail_key)> redialing;
    // Data connector `dial` to `instance` over rail `rail_key` failed before its handshake
    // finished (RailConnector::dial_failed); `refused`: every address refused the connection
    // (no plexusd listens there), or the handshake was refused (another daemon answered).
    std::function<void(uint64_t instance, const std::string& rail_key, uint64_t dial,
                       const std::string& reason, bool refused)>
        dial_failed;
    // Data connector `dial` to `instance` was refused as crossed: `instance` dialled this node
    // at the same time and keeps its own connection (RailConnector::dial_crossed).
    std::function<void(uint64_t instance, const std::string& rail_key, uint64_t dial)> dial_crossed;
    // A data connection from `instance` was accepted, about to be handed off
    // (RailConnector::accepted).
    std::function<void(uint64_t instance)> data_accepted;
    // Whether a data connection from `instance` crosses this node's own dial to it, which
    // is then the one kept (the lower instance id's, and RailConnector::keeps).
    std::function<bool(uint64_t instance)> crossing;
    // A data connector to `instance` over rail `rail_key` is authenticated, about to be
    // handed off (RailConnector::dial_established).
    std::function<void(uint64_t instance, const std::string& rail_key)> dial_established;
    // An authenticated data connection, opened by either side
    // (PeerServer::Callbacks::on_data_link).
    std::function<void(const transports::PeerIdentity& peer, transports::PathOpener open,
                       const std::string& nic, bool backup, bool latency,
                       const std::string& rail_key)>
        data_link;
  };

  PeerConnections(uv_loop_t* loop, transports::PeerIdentity me,
                  const transports::ClusterSecret* secret, Settings settings, Hooks hooks);
  ~PeerConnections();
  PeerConnections(const PeerConnections&) = delete;
  PeerConnections& operator=(const PeerConnections&) = delete;

  // Listens on "ip:port" (port 0: any free one) and sets the addresses this daemon
  // advertises: that address, or every interface's IPv4 address for 0.0.0.0. Throws
  // std::runtime_error with a sentence.
  void listen(const std::string& address);
  const transports::PeerIdentity& identity() const { return me_; }
  // Whether sockets can be bound to a NIC (CAP_NET_RAW), as listen found with two NICs or
  // more: backups across rails need it.
  bool binds_to_nics() const { return binds_to_nics_; }
  // The listener's backlog as the kernel applies it (TCP_INFO on the listener: the
  // setting, capped at net.core.somaxconn); 0 when not listening.
  int listen_backlog() const;
  // Every connection not yet closed or handed off.
  const std::vector<PeerConn*>& connections() const { return conns_; }

  // Opens a control connection to `instance`, trying `addresses` in order; a failure at
  // once comes back through Hooks::control_failed before it returns.
  void open_control(uint64_t instance, const std::vector<std::string>& addresses);
  // Opens data connector `dial` to `instance` over `rail`; a failure at once comes back
  // through Hooks::dial_failed before it returns. `connect_within`: how long each address's
  // connect may take (0: kConnectAttemptMs); the handshake then has its own limit.
  void dial(uint64_t instance, const Rail& rail, uint64_t dial,
            std::chrono::milliseconds connect_within);
  // Fails `c` with `reason`: logged, closed, and the hooks told.
  void fail(PeerConn& c, const std::string& reason);
  // Closes `c` by agreement (a control connection quiet on both ends): no hook is told.
  void retire(PeerConn& c) { close_conn(c); }
  // Queues `bytes` on `c` and writes what the socket takes (a failure fails `c`).
  void send(PeerConn& c, const std::vector<std::byte>& bytes);
  // The local NIC `c` leaves over ("" when unknown).
  std::string local_nic(const PeerConn& c) const;
  // The smallest round trip (seconds) of the handshakes this daemon started with
  // `instance`; 0 when none.
  double handshake_round_trip_s(uint64_t instance) const;

  // Closes every connection and the listener (the loop must run to finish the closes).
  void close();

 private:
  // A connector to `instance`; with `rail`, a data connector over it.
  PeerConn& connector(uint64_t instance, const std::vector<std::string>& addresses,
                      transports::PeerRole role, const Rail* rail);
  bool start_connect(PeerConn& c);
  void on_listen_readable();
  void on_event(PeerConn& c, int status, int events);
  void on_connected(PeerConn& c);
  // A connector that is still connecting moves on to its next address (or fails).
  void next_address(PeerConn& c, const std::string& reason);
  bool read_handshake(PeerConn& c);
  // `c`'s handshake timer expired: fails it unless what already arrived finishes it (the
  // loop runs timers before it polls, so a busy thread sees its timer before the answer).
  void handshake_late(PeerConn& c);
  // Bytes read (> 0), 0 when none are there yet, -1 once `c` has failed (closed or error).
  ssize_t recv_some(PeerConn& c, std::byte* at, size_t bytes);
  void established(PeerConn& c);
  bool flush(PeerConn& c);
  void update_poll(PeerConn& c);
  void close_conn(PeerConn& c);

  uv_loop_t* loop_;
  transports::PeerIdentity me_;
  const transports::ClusterSecret* secret_;
  Settings settings_;
  Hooks hooks_;
  std::vector<LocalNic> local_nics_;
  RdmaOffers rdma_offers_;
  bool binds_to_nics_ = true;
  int listen_fd_ = -1;
  uv_poll_t listen_poll_{};
  bool listening_ = false;
  std::vector<PeerConn*> conns_;
  std::unordered_map<uint64_t, double> round_trip_s_;
};

}  // namespace plexus::daemon
