// The control thread's connections to other daemons: a listener for peers, connectors to
// them, the handshake on each (transports/peer/peer_handshake.h), then either control
// messages (node_control.capnp) for the rendezvous, or, for a data connection, the
// authenticated socket handed to the engine. Runs on the control thread's libuv loop;
// nothing here is thread-safe.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <capnp/message.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "daemon/peers/control_reach.h"
#include "daemon/peers/control_sequence.h"
#include "daemon/peers/data_transport.h"
#include "daemon/peers/peer_nics.h"
#include "daemon/peers/rail_plan.h"
#include "daemon/peers/route_table.h"
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
    std::function<void(const transports::PeerIdentity& peer, transports::PathOpener open,
                       const std::string& nic, bool backup, bool latency)>
        on_data_link;
    // No data connection to `instance` could be opened (every rail failed before one was
    // authenticated); rails of a peer already linked are retried instead.
    std::function<void(uint64_t instance, const std::string& reason)> on_data_failed;
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
    // data links' grace (--peer-grace-ms).
    std::chrono::milliseconds control_grace{0};
    // The client pools the sessions announce (ControlServer makes it): RDMA paths send
    // large payloads from them without a copy.
    std::shared_ptr<transports::SendableMemory> sendable_memory;
  };

  PeerServer(uv_loop_t* loop, transports::PeerIdentity me, const transports::ClusterSecret* secret,
             Settings settings, Callbacks callbacks);
  ~PeerServer();
  PeerServer(const PeerServer&) = delete;
  PeerServer& operator=(const PeerServer&) = delete;

  // Listens on "ip:port" (port 0: any free one) and sets the addresses this daemon
  // advertises: that address, or every interface's IPv4 address for 0.0.0.0. Throws
  // std::runtime_error with a sentence.
  void listen(const std::string& address);
  const transports::PeerIdentity& identity() const { return me_; }

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
  // backups) has a twin for the latency class, kept up alike.
  void connect_data(uint64_t instance, const std::vector<std::string>& addresses);
  // The engine's path to `instance` over local NIC `nic` to the peer's `remote` ("ip:port")
  // failed: reconnect it (with exponential backoff) if this side opened it. A control
  // connection to `instance` over the same NIC or to the same peer address is failed over
  // now rather than after its acknowledgement timeout. `latency`: the rail's latency-class
  // twin (Settings::latency_connections).
  void rail_lost(uint64_t instance, const std::string& nic, const std::string& remote,
                 bool latency);
  // Local NIC `nic` is up again: its rails are retried now.
  void nic_up(const std::string& nic);
  // The link to `instance` is gone: stop keeping its rails.
  void forget_data_peer(uint64_t instance);
  // Round trip to `instance` (seconds; 0 when unknown): the kernel's smallest on the
  // control connection, else the smallest of the handshakes this daemon started.
  double control_round_trip_s(uint64_t instance) const;
  // `instance` as its last control handshake told it; null once it is lost (or never met).
  const transports::PeerIdentity* control_peer(uint64_t instance) const;

  // Closes every connection and the listener (the loop must run to finish the closes).
  void close();

  uint64_t refused() const { return refused_; }

 private:
  struct Conn;
  // Whether a connection over `fd` can offer RDMA: --transport allows it and a verbs port
  // holds its local address (remembered per address: finding one opens the devices).
  bool offers_rdma(int fd);
  std::map<uint32_t, bool> rdma_addresses_;
  struct RailRetry {
    int attempts = 0;
    std::chrono::steady_clock::time_point due{};
    bool scheduled = false;
  };
  struct DataPeer {  // a peer this side opens data connections to
    std::vector<std::string> addresses;
    bool linked = false;                       // a rail has been established since the last forget
    std::map<std::string, Conn*> connecting;   // by Rail::key
    std::map<std::string, RailRetry> retries;  // by Rail::key
    std::string last_error;
  };
  // The rails to a peer (plan_rails), without backups when they cannot be bound to a NIC.
  std::vector<Rail> rails_to(const std::vector<std::string>& addresses) const;
  // Whether `rail` can be opened now: a backup needs a route over its NIC. `routes` is
  // read on first need, once for all the rails a caller looks at.
  static bool openable(const Rail& rail, std::optional<RouteTable>& routes);
  void schedule_retry(uint64_t instance, const std::string& key,
                      std::chrono::milliseconds at_least = std::chrono::milliseconds(0));
  void run_retries();
  void arm_retry_timer();
  std::string nic_of_local_end(int fd) const;
  // Whether accepted connection `fd` is a backup across rails (crosses_rails).
  bool accepted_backup(int fd) const;
  // Marks data connection `fd` (to `address`) as the latency class's; a failure is logged
  // (the connection still works, queued as bulk data).
  void mark_latency(int fd, const std::string& address) const;
  // Whether data connector `c` is a rail's second or later reconnection attempt.
  bool reconnecting(const Conn& c) const;
  void on_listen_readable();
  // A connector to `instance`; with `rail`, a data connection over that rail (registered
  // as the peer's connecting rail before the first attempt).
  Conn* open(uint64_t instance, const std::vector<std::string>& addresses,
             transports::PeerRole role, const Rail* rail = nullptr);
  bool start_connect(Conn& c);
  void on_event(Conn& c, int status, int events);
  void on_connected(Conn& c);
  bool read_handshake(Conn& c);
  // Bytes read (> 0), 0 when none are there yet, -1 once `c` has failed (closed or error).
  ssize_t recv_some(Conn& c, std::byte* at, size_t bytes);
  void established(Conn& c);
  bool flush(Conn& c);
  void update_poll(Conn& c);
  void fail(Conn& c, const std::string& reason);
  void close_conn(Conn& c);

  uv_loop_t* loop_;
  transports::PeerIdentity me_;
  const transports::ClusterSecret* secret_;
  Callbacks callbacks_;
  int listen_fd_ = -1;
  uv_poll_t listen_poll_{};
  bool listening_ = false;
  std::vector<Conn*> conns_;
  static uint64_t draw_stream_id();
  struct ControlPeer {  // a peer daemon this one exchanges control messages with
    ControlSequence sequence{draw_stream_id()};
    Conn* current = nullptr;                           // the established connection messages go on
    std::vector<std::string> addresses;                // where it accepts peers
    std::optional<transports::PeerIdentity> identity;  // from the last handshake
    std::string suspect;  // the peer IP of the last connection that failed: tried last
    // Connections failed, with messages waiting, since the peer last answered.
    int failovers = 0;
    bool taking_over = false;  // the next connection established replaces one that failed
    ControlReach reach;        // with no connection: unreachable for the grace, then lost
  };
  // By instance; a map, so that references stay valid while callbacks add peers.
  std::map<uint64_t, ControlPeer> control_peers_;
  // Where the streams of peers given up stood on receipt (a bounded few), so that a peer
  // that did not give this one up is not delivered a message twice (ControlSequence::resume).
  std::map<uint64_t, ControlSequence::Received> control_given_up_;
  // The record of `instance`, made (and resumed from control_given_up_) if it has none.
  ControlPeer& control_record(uint64_t instance);
  // Control connections (peer_control.cc).
  void control_established(Conn& c);
  void read_control(Conn& c);
  void write_control(Conn& c, const std::vector<std::byte>& frames);
  // Conn `c` (a control connection to or from `instance`) failed or was closed: another
  // established one, or a new one, carries the unacknowledged messages; reported lost when
  // none can be opened.
  void control_conn_failed(uint64_t instance, Conn& c, const std::string& name,
                           const std::string& reason);
  // Opens a control connection to `instance` over its addresses, the suspect one last,
  // unless one is being opened already.
  void open_control(uint64_t instance);
  // Whether a connection to `instance` for control (other than `except`) is being opened.
  bool control_opening(uint64_t instance, const Conn* except = nullptr) const;
  void check_control_acks();
  // rail_lost's part for control: the connection to `instance`, if it shares the NIC or
  // the peer address of the failed data path, is failed over now.
  void control_path_lost(uint64_t instance, const std::string& nic, const std::string& remote);
  uv_timer_t control_timer_{};
  bool control_timer_open_ = false;
  // A connector that is still connecting moves on to its next address (or fails).
  void next_address(Conn& c, const std::string& reason);
  std::map<uint64_t, DataPeer> data_peers_;
  uint64_t opening_ = 0;                     // connect_data is trying this peer's rails
  std::vector<std::string> opening_failed_;  // rails of opening_ that failed at once
  std::unordered_map<uint64_t, double> round_trip_s_;
  uint64_t refused_ = 0;
  Settings settings_;
  std::vector<LocalNic> local_nics_;
  bool backups_ = true;  // off where sockets cannot be bound to a NIC (no CAP_NET_RAW)
  uv_timer_t retry_timer_{};
  bool retry_timer_open_ = false;
};

}  // namespace plexus::daemon
