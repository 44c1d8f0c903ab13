// Control messages between daemons, which must survive a NIC as data does: messages are
// numbered and kept until acknowledged (ControlSequence); a connection that fails, closes,
// or carries no acknowledgement in time is replaced by another established one or a new one
// over any of the peer's addresses, and the unacknowledged messages go again on it. A peer
// is reported lost only when no connection to it can be opened at all (ControlReach).
// A connection quiet on both ends for Settings::idle_close is closed by the side that
// opened it, with a bye so that the other side takes it for no failure; the next message
// either way opens a new one. A daemon that stops meanwhile is found by that next message
// (the connection is refused), not at once: the control thread's own users say when a peer
// must stay watched (Hooks::busy).
// Owns: each peer daemon's record (its sequence, the connection its messages go on, its
// addresses and identity, how long it has been unreachable), where the streams of peers
// given up stood, and the acknowledgement timer. The connections are PeerConnections': it
// opens, writes, reads and fails them through it, and hears of them through its hooks.
// Control thread only (the libuv loop it is given); nothing here is thread-safe.
#pragma once

#include <uv.h>

#include <capnp/message.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "daemon/peers/control_reach.h"
#include "daemon/peers/control_sequence.h"
#include "daemon/peers/loop_timer.h"
#include "transports/peer/peer_handshake.h"

namespace plexus::daemon {

class PeerConnections;
struct PeerConn;

class ControlChannels {
 public:
  struct Settings {
    // A message unacknowledged this long fails the connection carrying it.
    std::chrono::milliseconds ack_timeout{0};
    // How long a peer may stay unreachable (no connection opens, none refused) before it is
    // reported lost.
    std::chrono::milliseconds grace{0};
    // A connection this side opened that has carried nothing either way this long, with
    // nothing unacknowledged, is closed (0: never).
    std::chrono::milliseconds idle_close{0};
  };
  struct Hooks {
    // A control message from an authenticated peer (PeerServer::Callbacks::on_control).
    std::function<void(const transports::PeerIdentity& peer, kj::Array<capnp::word> words)>
        delivered;
    // `instance` cannot be reached for control messages; `gone`: its daemon stopped
    // (PeerServer::Callbacks::on_control_lost).
    std::function<void(uint64_t instance, const std::string& name, const std::string& reason,
                       bool gone)>
        lost;
    // Whether `instance` must keep its connection however quiet (a join waits on it).
    std::function<bool(uint64_t instance)> busy;
  };

  ControlChannels(uv_loop_t* loop, PeerConnections& connections, Settings settings, Hooks hooks);
  ControlChannels(const ControlChannels&) = delete;
  ControlChannels& operator=(const ControlChannels&) = delete;

  // The listener is up: acknowledgements are watched from now on.
  void start();
  // Sends `message` to `instance` (PeerServer::send_control).
  void send(uint64_t instance, const std::vector<std::string>& addresses,
            capnp::MessageBuilder& message);

  // Control connection `c` finished its handshake: the peer's messages go on it.
  void established(PeerConn& c);
  // Established control connection `c` is readable: its frames are delivered and acknowledged.
  void read(PeerConn& c);
  // `c` (a control connection to or from `instance`) failed or was closed: another
  // established one, or a new one, carries the unacknowledged messages; reported lost when
  // none can be opened.
  void failed(uint64_t instance, PeerConn& c, const std::string& name, const std::string& reason);
  // A data path to `instance` over local NIC `nic` to `remote` failed: the control
  // connection, if it shares the NIC or the peer's address, is failed over now.
  void path_lost(uint64_t instance, const std::string& nic, const std::string& remote);

  // PeerServer::control_round_trip_s and control_peer.
  double round_trip_s(uint64_t instance) const;
  const transports::PeerIdentity* peer(uint64_t instance) const;

  // Forgets every peer and closes the timer (the loop must run to finish the close).
  void close();

 private:
  static uint64_t draw_stream_id();
  struct Peer {  // a peer daemon this one exchanges control messages with
    ControlSequence sequence{draw_stream_id()};
    PeerConn* current = nullptr;                       // the established connection messages go on
    std::vector<std::string> addresses;                // where it accepts peers
    std::optional<transports::PeerIdentity> identity;  // from the last handshake
    std::string suspect;  // the peer IP of the last connection that failed: tried last
    // Connections failed, with messages waiting, since the peer last answered.
    int failovers = 0;
    bool taking_over = false;  // the next connection established replaces one that failed
    ControlReach reach;        // with no connection: unreachable for the grace, then lost
    std::chrono::steady_clock::time_point last_io{};  // a message or frame sent or received
  };
  // The record of `instance`, made (and resumed from given_up_) if it has none.
  Peer& record(uint64_t instance);
  // Opens a connection to `instance` over its addresses, the suspect one last, unless one
  // is being opened already.
  void open(uint64_t instance);
  // Whether a connection to `instance` (other than `except`) is being opened.
  bool opening(uint64_t instance, const PeerConn* except = nullptr) const;
  void check_acks();
  // Closes the connections this side opened that stayed quiet for Settings::idle_close.
  void close_idle(std::chrono::steady_clock::time_point now);
  // The peer said bye on `c`: closed here too, no failure; what still waits goes on a new one.
  void said_bye(uint64_t instance, PeerConn& c);
  // Another established control connection to `instance` (dials that crossed), if any,
  // becomes the current one and carries the unacknowledged messages again.
  bool take_over(uint64_t instance, Peer& p);

  uv_loop_t* loop_;
  PeerConnections& connections_;
  Settings settings_;
  Hooks hooks_;
  // By instance; a map, so that references stay valid while callbacks add peers.
  std::map<uint64_t, Peer> peers_;
  // Where the streams of peers given up stood on receipt (a bounded few), so that a peer
  // that did not give this one up is not delivered a message twice (ControlSequence::resume).
  std::map<uint64_t, ControlSequence::Received> given_up_;
  LoopTimer timer_;
};

}  // namespace plexus::daemon
