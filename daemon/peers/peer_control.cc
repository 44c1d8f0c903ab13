// Control connections between daemons, which must survive a NIC as data does: messages are
// numbered and kept until acknowledged (ControlSequence); a connection that fails, closes,
// or carries no acknowledgement in time is replaced by another established one or a new one
// over any of the peer's addresses, and the unacknowledged messages go again on it. A peer
// is reported lost only when no connection to it can be opened at all.
#include <sys/socket.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "daemon/peers/peer_conn.h"
#include "transports/tcp/tcp_path_latency.h"

namespace plexus::daemon {

using namespace peer_detail;  // the helpers this room's files share (peer_conn.h)

namespace {

// "ip:port" -> "ip" ("[ip]:port" -> "[ip]").
std::string host_of(const std::string& address) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

}  // namespace

uint64_t PeerServer::draw_stream_id() {
  static std::mt19937_64 draw{std::random_device{}()};
  uint64_t id = 0;
  while (id == 0) id = draw();
  return id;
}

PeerServer::ControlPeer& PeerServer::control_record(uint64_t instance) {
  auto [it, made] = control_peers_.try_emplace(instance);
  if (made) {
    auto given_up = control_given_up_.find(instance);
    if (given_up != control_given_up_.end()) {
      it->second.sequence.resume(given_up->second);
      control_given_up_.erase(given_up);
    }
  }
  return it->second;
}

void PeerServer::control_established(Conn& c) {
  const transports::PeerIdentity& peer = c.handshake->peer();
  ControlPeer& p = control_record(peer.instance_id);
  p.identity = peer;
  if (!peer.addresses.empty()) p.addresses = peer.addresses;
  const bool failover = p.taking_over;
  p.taking_over = false;
  p.current = &c;
  p.reach.connected();
  const size_t resent = p.sequence.unacknowledged();
  write_control(c, p.sequence.resend(std::chrono::steady_clock::now()));
  if (failover) {
    spdlog::info(
        "control connection with node {} ({}) established, taking over from the one "
        "that failed ({} message(s) sent again)",
        peer.node_name, c.address, resent);
  } else {
    spdlog::info("control connection with node {} ({}) established", peer.node_name, c.address);
  }
}

void PeerServer::write_control(Conn& c, const std::vector<std::byte>& frames) {
  if (frames.empty() || c.closing) return;
  c.out.insert(c.out.end(), frames.begin(), frames.end());
  // flush fails the connection on an error; its messages are kept for the next.
  if (c.is_established && flush(c)) update_poll(c);
}

void PeerServer::send_control(uint64_t instance, const std::vector<std::string>& addresses,
                              capnp::MessageBuilder& message) {
  ControlPeer& p = control_record(instance);
  if (p.addresses.empty()) p.addresses = addresses;
  const auto now = std::chrono::steady_clock::now();
  if (p.current == nullptr) p.reach.message_waiting(now, p.sequence.unacknowledged() == 0);
  std::vector<std::byte> frame = p.sequence.push(message, now);
  if (p.current != nullptr) {
    write_control(*p.current, frame);
    return;
  }
  open_control(instance);  // the message goes once it is established; `p` may be gone now
}

bool PeerServer::control_opening(uint64_t instance, const Conn* except) const {
  for (const Conn* c : conns_) {
    if (c != except && c->connector && !c->closing && !c->is_established &&
        c->expected == instance && c->role == PeerRole::kControl) {
      return true;
    }
  }
  return false;
}

void PeerServer::open_control(uint64_t instance) {
  // One being opened carries every unacknowledged message once established.
  if (control_opening(instance)) return;
  auto it = control_peers_.find(instance);
  if (it == control_peers_.end()) return;
  it->second.reach.opening(std::chrono::steady_clock::now());
  // The address of the connection that failed last goes last: its NIC, or the peer's, may
  // be down, and a connect to it may take kConnectAttemptMs to give up.
  std::vector<std::string> order = it->second.addresses;
  std::stable_partition(order.begin(), order.end(), [&](const std::string& a) {
    return it->second.suspect.empty() || host_of(a) != it->second.suspect;
  });
  open(instance, order, PeerRole::kControl);
}

void PeerServer::read_control(Conn& c) {
  const uint64_t instance = c.handshake->peer().instance_id;
  std::byte buffer[16 * 1024];
  bool came = false;  // a message (new or sent again) came over `c`
  for (int reads = 0; reads < 64; ++reads) {
    const ssize_t n = ::recv(c.fd, buffer, sizeof(buffer), 0);
    if (n == 0) {
      fail(c, "the connection closed (the peer daemon stopped or its node went away)");
      return;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      fail(c, std::string("recv: ") + std::strerror(errno));
      return;
    }
    c.decoder.append(buffer, static_cast<size_t>(n));
    std::string error;
    while (true) {
      auto next = c.decoder.next();
      if (!next.ok()) error = next.error();
      if (!next.ok() || !*next) break;
      kj::Array<capnp::word> words = std::move(**next);
      // Looked up per frame: the callback may add peers (the map keeps references) or lose
      // this one.
      ControlPeer& p = control_record(instance);
      if (!p.identity) p.identity = c.handshake->peer();
      const uint64_t delivered = p.sequence.delivered();
      const size_t unacked = p.sequence.unacknowledged();
      std::string why;
      auto message = p.sequence.receive(words, std::chrono::steady_clock::now(), &why);
      if (!why.empty()) {
        fail(c, "malformed control frame: " + why);
        return;
      }
      if (p.sequence.ack_due()) came = true;
      if (p.sequence.delivered() != delivered || p.sequence.unacknowledged() != unacked)
        p.failovers = 0;  // the peer answers over this connection
      if (message) callbacks_.on_control(c.handshake->peer(), std::move(*message));
      if (c.closing) return;
    }
    if (!error.empty()) {
      fail(c, "malformed control frame: " + error);
      return;
    }
  }
  // One acknowledgement for what this read delivered, on the connection it came over,
  // unless a message the callbacks sent on it carried it already (a message they sent on
  // another connection carried it too, but the peer may be waiting on this one).
  auto it = control_peers_.find(instance);
  if (it != control_peers_.end() &&
      (it->second.sequence.ack_due() || (came && it->second.current != &c)))
    write_control(c, it->second.sequence.ack_frame());
}

void PeerServer::control_conn_failed(uint64_t instance, Conn& c, const std::string& name,
                                     const std::string& reason) {
  auto it = control_peers_.find(instance);
  if (it == control_peers_.end()) return;         // never used, or already reported lost
  if (!c.is_established && !c.connector) return;  // an accepted one refused in its handshake
  ControlPeer& p = it->second;
  bool gone = false;  // refused everywhere: its daemon stopped
  if (c.is_established) {
    if (p.current != &c) return;  // one it had replaced: nothing waits on it
    p.current = nullptr;
    p.suspect = host_of(c.address);
    p.reach.lost(std::chrono::steady_clock::now());
    // Another established connection (both sides may have opened one) takes over.
    for (Conn* other : conns_) {
      if (other != &c && !other->closing && other->is_established &&
          other->handshake->role() == PeerRole::kControl &&
          other->handshake->peer().instance_id == instance) {
        p.current = other;
        spdlog::info("control messages to {} go on its other control connection ({})", name,
                     other->address);
        write_control(*other, p.sequence.resend(std::chrono::steady_clock::now()));
        return;
      }
    }
    // Only failures with messages waiting count: an idle connection that failed now and
    // then says nothing about whether the peer answers.
    if (p.sequence.unacknowledged() == 0 || ++p.failovers <= kMaxControlFailovers) {
      p.taking_over = true;
      spdlog::info(
          "control connection with {} failed ({}): opening another over any of its "
          "addresses{}",
          name, reason,
          p.sequence.unacknowledged() > 0
              ? ", " + std::to_string(p.sequence.unacknowledged()) + " message(s) to send again"
              : std::string());
      open_control(instance);  // a failure at once comes back here, through fail()
      return;
    }
    // Connections that opened, one after another, and carried no acknowledgement: its
    // daemon answers handshakes but not messages (stuck), gone for control.
    gone = true;
  } else {
    if (p.current != nullptr) return;  // a connector that lost a race to an established one
    if (control_opening(instance, &c)) return;  // another is still trying
    // Refused everywhere (no plexusd listens, or another answers): the daemon is gone.
    // Unreachable (this node's NICs or the peer's down, or a handshake unanswered): kept,
    // and tried again, for the data links' grace, as its data link is.
    gone = c.handshake_refused || (c.tried > 0 && c.refused == c.tried);
    if (!gone && p.reach.keep_trying(std::chrono::steady_clock::now(), settings_.control_grace,
                                     std::chrono::milliseconds(kControlRetryMs))) {
      spdlog::debug("{}: no control connection yet ({}); trying again", name, reason);
      return;
    }
  }
  const size_t dropped = p.sequence.unacknowledged();
  // Bounded: which one goes is by instance id, which is random; a peer given up that long
  // ago has given this side up too.
  if (control_given_up_.size() >= kControlGivenUpKept)
    control_given_up_.erase(control_given_up_.begin());
  control_given_up_[instance] = p.sequence.received();
  control_peers_.erase(it);
  if (dropped > 0) {
    spdlog::warn(
        "{}: no control connection could be opened; {} unacknowledged control "
        "message(s) dropped",
        name, dropped);
  }
  if (callbacks_.on_control_lost) callbacks_.on_control_lost(instance, name, reason, gone);
}

void PeerServer::check_control_acks() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<Conn*> stalled;
  std::vector<uint64_t> unsent;
  for (auto& [instance, p] : control_peers_) {
    const auto since = p.sequence.waiting_since();
    if (p.current == nullptr) {
      // open_control does nothing while one is being opened: messages queued meanwhile
      // are seen to here.
      if (p.reach.due(now, since.has_value())) unsent.push_back(instance);
    } else if (since && now - *since > settings_.control_ack_timeout) {
      stalled.push_back(p.current);
    }
  }
  const auto ms = settings_.control_ack_timeout.count();
  for (Conn* c : stalled) {
    fail(*c, "no acknowledgement of control messages within " + std::to_string(ms) +
                 " ms (its NIC, or the peer's, may be down)");
  }
  for (uint64_t instance : unsent) open_control(instance);
}

void PeerServer::control_path_lost(uint64_t instance, const std::string& nic,
                                   const std::string& remote) {
  auto it = control_peers_.find(instance);
  if (it == control_peers_.end() || it->second.current == nullptr) return;
  Conn& c = *it->second.current;
  const bool shares = host_of(c.address) == host_of(remote) ||
                      (!nic.empty() && c.fd >= 0 && nic_of_local_end(c.fd) == nic);
  if (!shares) return;
  fail(c, "the data path over " + (nic.empty() ? std::string("?") : nic) + " to " + remote +
              ", which this control connection shares, failed");
}

double PeerServer::control_round_trip_s(uint64_t instance) const {
  // The kernel's smallest round trip on the control connection, whichever side opened
  // it; else the handshakes'.
  auto peer = control_peers_.find(instance);
  if (peer != control_peers_.end() && peer->second.current != nullptr &&
      peer->second.current->fd >= 0) {
    const double kernel = transports::kernel_min_round_trip_s(peer->second.current->fd);
    if (kernel > 0) return kernel;
  }
  auto it = round_trip_s_.find(instance);
  return it == round_trip_s_.end() ? 0.0 : it->second;
}

const transports::PeerIdentity* PeerServer::control_peer(uint64_t instance) const {
  auto it = control_peers_.find(instance);
  return it == control_peers_.end() || !it->second.identity ? nullptr : &*it->second.identity;
}

}  // namespace plexus::daemon
