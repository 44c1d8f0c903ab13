// A peer connection's record and the helpers its users share (PeerConnections, which owns
// every record: peer_connections.cc listens, connects, polls and fails them, and
// peer_messages.cc reads their handshakes and hands data connections off; ControlChannels
// reads and writes the established control connections). Private to daemon/peers.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/frame_codec.h"
#include "daemon/peers/peer_connections.h"
#include "daemon/peers/rail_plan.h"
#include "transports/peer/peer_handshake.h"
#include "transports/rdma/pinned_budget.h"

namespace plexus::daemon {
namespace peer_detail {

using transports::PeerHandshake;
using transports::PeerRole;

// How long a connector waits for one address to accept before it tries the next: past two
// SYN retransmits (1 s, then 2 s), so an address behind a NIC that is down is left in time.
inline constexpr uint64_t kConnectAttemptMs = 3500;
inline constexpr size_t kMaxControlFrameBytes = 1 << 20;

// Binds `fd` to interface `nic`; false where not permitted (it needs CAP_NET_RAW).
inline bool bind_to_device(int fd, const std::string& nic) {
  return ::setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, nic.c_str(),
                      static_cast<socklen_t>(nic.size())) == 0;
}

// The local NIC (of `nics`) holding `fd`'s local address: "lo" for a loopback address, ""
// when none has it.
std::string nic_of_local_end(int fd, const std::vector<LocalNic>& nics);
// Whether accepted connection `fd` is a backup across rails (crosses_rails).
bool accepted_backup(int fd, const std::vector<LocalNic>& nics);
// Marks data connection `fd` (to `address`) as the latency class's with DSCP `dscp`; a
// failure is logged (the connection still works, queued as bulk data).
void mark_latency(int fd, const std::string& address, uint32_t dscp);

}  // namespace peer_detail

// Control thread only; freed once its libuv handles have closed.
struct PeerConn {
  using PeerHandshake = transports::PeerHandshake;
  using PeerRole = transports::PeerRole;
  PeerConnections* owner = nullptr;
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
  std::string rail_key;  // data connector: its rail (Rail::key)
  uint64_t dial = 0;     // data connector: the attempt, as RailConnector numbered it
  // How long each address gets to accept: kConnectAttemptMs, or a redial's shorter limit.
  uint64_t connect_ms = peer_detail::kConnectAttemptMs;
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
  // The rings of the RDMA path this connection would carry, held from its offer until the
  // path takes them over (released with the connection, or when RDMA was not agreed).
  transports::rdma::PinnedBudget::Hold rdma_reserved;
  std::string name() const {
    return handshake && !handshake->peer().node_name.empty()
               ? "node " + handshake->peer().node_name + " (" + address + ")"
               : address;
  }
};

}  // namespace plexus::daemon
