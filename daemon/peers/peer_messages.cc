// What arrives on a peer connection: the handshake's frames, read exactly (length, then
// that many bytes, so that no byte of a data connection's stream is consumed here), the
// established connection handed on (control connections to ControlChannels, data
// connections to the engine), and which NIC, rail and class a connection is.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <capnp/serialize.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/frame_codec.h"
#include "daemon/peers/peer_conn.h"
#include "daemon/peers/route_table.h"
#include "transports/tcp/tcp_path.h"
#include "transports/tcp/tcp_traffic_class.h"

namespace plexus::daemon {

using namespace peer_detail;  // the helpers this room's files share (peer_conn.h)

ssize_t PeerConnections::recv_some(PeerConn& c, std::byte* at, size_t bytes) {
  const ssize_t n = ::recv(c.fd, at, bytes, 0);
  if (n > 0) return n;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
  fail(c, n == 0 ? std::string("the peer closed the connection during the handshake")
                 : std::string("recv: ") + std::strerror(errno));
  return -1;
}

bool PeerConnections::read_handshake(PeerConn& c) {
  // Exact reads: length, then that many bytes, so that nothing after the handshake's
  // last frame is taken from the socket.
  for (int frames = 0; frames < 8 && !c.is_established; ++frames) {
    if (c.length_got < c.length.size()) {
      const ssize_t n =
          recv_some(c, c.length.data() + c.length_got, c.length.size() - c.length_got);
      if (n <= 0) return n == 0;
      c.length_got += static_cast<size_t>(n);
      if (c.length_got < c.length.size()) return true;
      const uint32_t bytes = common::frame_length(c.length);
      if (!common::check_frame_length(bytes, transports::kMaxHandshakeFrameBytes).empty()) {
        fail(c, "a handshake frame of " + std::to_string(bytes) +
                    " bytes (not a plexusd peer, or a corrupt stream)");
        return false;
      }
      c.body.assign(bytes, std::byte{0});
      c.body_got = 0;
    }
    const ssize_t n = recv_some(c, c.body.data() + c.body_got, c.body.size() - c.body_got);
    if (n <= 0) return n == 0;
    c.body_got += static_cast<size_t>(n);
    if (c.body_got < c.body.size()) return true;
    c.length_got = 0;
    auto words = kj::heapArray<capnp::word>(c.body.size() / sizeof(capnp::word));
    std::memcpy(words.begin(), c.body.data(), c.body.size());
    const std::string error = c.handshake->on_frame(words);
    std::vector<std::byte> reply = c.handshake->take_output();
    c.out.insert(c.out.end(), reply.begin(), reply.end());
    if (!error.empty()) {
      c.handshake_refused = true;  // the peer answered: not as the daemon this side expected
      flush(c);                    // best effort: tell the peer why
      if (!c.closing) fail(c, error);
      return false;
    }
    if (c.handshake->done()) {
      c.is_established = true;
      uv_timer_stop(&c.timer);
      if (c.handshake->role() == PeerRole::kControl) {
        established(c);
        if (c.closing) return false;
      }
    }
    if (!flush(c)) return false;
  }
  return true;
}

void PeerConnections::established(PeerConn& c) {
  const transports::PeerIdentity& peer = c.handshake->peer();
  // What the offer held for an RDMA path: to the path if RDMA was agreed, else released now
  // (a control connection, or TCP).
  transports::rdma::PinnedBudget::Hold reserved = std::move(c.rdma_reserved);
  if (c.connector) {
    // The smallest round trip seen: a handshake that met a busy peer measures its load,
    // not the path, and the cost model must not change its choices with every comm.
    const double seconds = std::chrono::duration<double>(c.handshake->round_trip()).count();
    auto [it, first] = round_trip_s_.try_emplace(peer.instance_id, seconds);
    if (!first) it->second = std::min(it->second, seconds);
  }
  if (c.handshake->role() == PeerRole::kData) {
    // The acceptor's "accepted" is out (flush finished): hand the socket to the engine.
    c.handed_off = true;
    const int fd = c.fd;
    const std::string nic = c.rail_nic.empty() ? nic_of_local_end(fd, local_nics_) : c.rail_nic;
    if (c.connector) {
      hooks_.dial_established(c.expected, c.rail_key);
    } else {
      if (hooks_.data_accepted) hooks_.data_accepted(peer.instance_id);
      if (!nic.empty() && nic != "lo" && RouteTable::read().covers(nic, c.address)) {
        // Replies leave over the NIC the peer chose where a route allows (and CAP_NET_RAW):
        // a backup that crosses rails must not answer over this node's NIC on the peer's
        // rail, which may be the one that is down.
        bind_to_device(fd, nic);
      }
    }
    const bool backup = c.connector ? c.backup_rail : accepted_backup(fd, local_nics_);
    const bool latency = c.handshake->latency_class();
    if (latency && !c.connector) mark_latency(fd, c.address, settings_.latency_dscp);
    // Both sides decided alike in the handshake (which refuses a connection --transport rdma
    // cannot have).
    const bool rdma = c.handshake->rdma_agreed();
    c.fd = -1;
    spdlog::info("data connection with node {} ({}) over {} established, {}{}{}", peer.node_name,
                 c.address, nic.empty() ? "?" : nic, rdma ? "RDMA" : "TCP",
                 latency ? " (the latency class's)" : "", backup ? " (a backup across rails)" : "");
    close_conn(c);
    // From here on a transport-neutral path: the engine's links open it over this socket.
    transports::PathOpener open;
#ifdef PLEXUS_HAVE_RDMA
    if (rdma)
      open = transports::rdma::rdma_path_opener(fd, settings_.rdma, settings_.sendable_memory,
                                                rdma_offers_.devices(), std::move(reserved));
#endif
    if (!open) open = transports::tcp_path_opener(fd);
    if (hooks_.data_link) {
      hooks_.data_link(peer, std::move(open), nic, backup, latency,
                       c.connector ? c.rail_key : std::string());
    }
    return;
  }
  hooks_.control_established(c);
}

namespace peer_detail {

std::string nic_of_local_end(int fd, const std::vector<LocalNic>& nics) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      addr.ss_family != AF_INET) {
    return {};
  }
  const uint32_t local = ntohl(reinterpret_cast<sockaddr_in*>(&addr)->sin_addr.s_addr);
  for (const LocalNic& nic : nics) {
    if (nic.address == local) return nic.name;
  }
  return (local >> 24) == 127 ? "lo" : "";
}

bool accepted_backup(int fd, const std::vector<LocalNic>& nics) {
  sockaddr_storage local{};
  sockaddr_storage remote{};
  socklen_t local_len = sizeof(local);
  socklen_t remote_len = sizeof(remote);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_len) != 0 ||
      local.ss_family != AF_INET || remote.ss_family != AF_INET) {
    return false;
  }
  return crosses_rails(nics, ntohl(reinterpret_cast<sockaddr_in*>(&local)->sin_addr.s_addr),
                       ntohl(reinterpret_cast<sockaddr_in*>(&remote)->sin_addr.s_addr));
}

void mark_latency(int fd, const std::string& address, uint32_t dscp) {
  const std::string error = transports::mark_latency_class(fd, dscp);
  if (!error.empty()) {
    spdlog::warn("the latency class's connection to {} keeps the bulk data's priority: {}", address,
                 error);
  }
}

}  // namespace peer_detail

}  // namespace plexus::daemon
