// The peer server's connection record and the helpers its files share (peer_server.cc:
// listening, connecting, polling, failing; peer_messages.cc: the handshake's exact reads and
// control messages; peer_rails.cc: rails, retries and backups). Private to daemon/peers.
#pragma once

#include <sys/socket.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/frame_codec.h"
#include "daemon/peers/peer_server.h"
#include "transports/peer/peer_handshake.h"

namespace plexus::daemon {
namespace peer_detail {

using transports::PeerHandshake;
using transports::PeerRole;

inline constexpr uint64_t kHandshakeTimeoutMs = 5000;
// How long a connector waits for one address to accept before it tries the next: past two
// SYN retransmits (1 s, then 2 s), so an address behind a NIC that is down is left in time.
inline constexpr uint64_t kConnectAttemptMs = 3500;
// How often the control connections' acknowledgement timeouts are looked at.
inline constexpr uint64_t kControlCheckMs = 100;
// How soon an unreachable peer's control connection is tried again.
inline constexpr uint64_t kControlRetryMs = 200;
// Control connections to one peer that may fail in a row, without the peer answering in
// between, before it is reported lost.
inline constexpr int kMaxControlFailovers = 6;
// Peers given up whose receive position is kept (PeerServer::control_given_up_).
inline constexpr size_t kControlGivenUpKept = 64;
inline constexpr size_t kMaxControlFrameBytes = 1 << 20;
// Appended to a rail's key to name its latency-class twin.
inline constexpr const char* kLatencyRailSuffix = "+latency";
// How often a backup with no route between the rails is looked at again.
inline constexpr std::chrono::milliseconds kUnroutedBackupRecheck{10000};

// Binds `fd` to interface `nic`; false where not permitted (it needs CAP_NET_RAW).
inline bool bind_to_device(int fd, const std::string& nic) {
  return ::setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, nic.c_str(),
                      static_cast<socklen_t>(nic.size())) == 0;
}

}  // namespace peer_detail

struct PeerServer::Conn {
  using PeerHandshake = transports::PeerHandshake;
  using PeerRole = transports::PeerRole;
  PeerServer* server = nullptr;
  uv_poll_t poll{};
  uv_timer_t timer{};
  int fd = -1;
  bool polling = false;
  int open_handles = 0;
  bool connector = false;
  bool connecting = false;
  std::string address;                 // the remote end, for messages
  std::vector<std::string> addresses;  // connector: those still to try
  uint64_t expected = 0;
  PeerRole role = PeerRole::kControl;
  std::string rail_key;       // data connector: its rail (Rail::key)
  std::string rail_nic;       // data connector: its rail's NIC ("" for the fallback)
  bool backup_rail = false;   // data connector: a backup across rails
  bool latency_rail = false;  // data connector: the latency class's connection (Rail::latency)
  uint32_t bind_address = 0;  // data connector: the local NIC's IPv4 address (host order)
  std::optional<PeerHandshake> handshake;
  bool is_established = false;
  bool handed_off = false;
  std::array<std::byte, common::kFrameLengthBytes> length{};
  size_t length_got = 0;
  std::vector<std::byte> body;
  size_t body_got = 0;
  common::FrameDecoder decoder{peer_detail::kMaxControlFrameBytes};
  std::vector<std::byte> out;
  size_t out_sent = 0;
  bool closing = false;
  // Connector: addresses tried, and how many of them refused the connection (no plexusd
  // listens there); whether a handshake was refused (another daemon, or a wrong secret).
  int tried = 0;
  int refused = 0;
  bool handshake_refused = false;
  std::string name() const {
    return handshake && !handshake->peer().node_name.empty()
               ? "node " + handshake->peer().node_name + " (" + address + ")"
               : address;
  }
};

}  // namespace plexus::daemon
