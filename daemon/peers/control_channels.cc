// Control connections between daemons: what goes on which, and when one fails over.
#include "daemon/peers/control_channels.h"

#include <sys/ioctl.h>
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

// How often the control connections' acknowledgement timeouts are looked at.
constexpr uint64_t kControlCheckMs = 100;
// How soon an unreachable peer's control connection is tried again.
constexpr uint64_t kControlRetryMs = 200;
// Control connections to one peer that may fail in a row, without the peer answering in
// between, before it is reported lost.
constexpr int kMaxControlFailovers = 6;
// Peers given up whose receive position is kept (ControlChannels::given_up_).
constexpr size_t kControlGivenUpKept = 64;

// "ip:port" -> "ip" ("[ip]:port" -> "[ip]").
std::string host_of(const std::string& address) {
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

}  // namespace

ControlChannels::ControlChannels(uv_loop_t* loop, PeerConnections& connections, Settings settings,
                                 Hooks hooks)
    : loop_(loop),
      connections_(connections),
      settings_(std::move(settings)),
      hooks_(std::move(hooks)) {}

void ControlChannels::start() {
  timer_.open(loop_, [this] { check_acks(); });
  timer_.start(kControlCheckMs, kControlCheckMs);
}

uint64_t ControlChannels::draw_stream_id() {
  static std::mt19937_64 draw{std::random_device{}()};
  uint64_t id = 0;
  while (id == 0) id = draw();
  return id;
}

ControlChannels::Peer& ControlChannels::record(uint64_t instance) {
  auto [it, made] = peers_.try_emplace(instance);
  if (made) {
    auto given_up = given_up_.find(instance);
    if (given_up != given_up_.end()) {
      it->second.sequence.resume(given_up->second);
      given_up_.erase(given_up);
    }
  }
  return it->second;
}

void ControlChannels::established(PeerConn& c) {
  const transports::PeerIdentity& peer = c.handshake->peer();
  Peer& p = record(peer.instance_id);
  p.identity = peer;
  if (!peer.addresses.empty()) p.addresses = peer.addresses;
  const bool failover = p.taking_over;
  p.taking_over = false;
  p.current = &c;
  p.reach.connected();
  p.last_io = std::chrono::steady_clock::now();
  const size_t resent = p.sequence.unacknowledged();
  connections_.send(c, p.sequence.resend(std::chrono::steady_clock::now()));
  if (failover) {
    spdlog::info(
        "control connection with node {} ({}) established, taking over from the one "
        "that failed ({} message(s) sent again)",
        peer.node_name, c.address, resent);
  } else {
    spdlog::info("control connection with node {} ({}) established", peer.node_name, c.address);
  }
}

void ControlChannels::send(uint64_t instance, const std::vector<std::string>& addresses,
                           capnp::MessageBuilder& message) {
  // Kept until acknowledged: when the connection fails (or carries no acknowledgement for
  // Settings::ack_timeout), the unacknowledged messages go again on a new one.
  Peer& p = record(instance);
  if (p.addresses.empty()) p.addresses = addresses;
  const auto now = std::chrono::steady_clock::now();
  p.last_io = now;
  if (p.current == nullptr) p.reach.message_waiting(now, p.sequence.unacknowledged() == 0);
  std::vector<std::byte> frame = p.sequence.push(message, now);
  if (p.current != nullptr) {
    connections_.send(*p.current, frame);
    return;
  }
  open(instance);  // the message goes once it is established; `p` may be gone now
}

bool ControlChannels::opening(uint64_t instance, const PeerConn* except) const {
  for (const PeerConn* c : connections_.connections()) {
    if (c != except && c->connector && !c->closing && !c->is_established &&
        c->expected == instance && c->role == PeerRole::kControl) {
      return true;
    }
  }
  return false;
}

void ControlChannels::open(uint64_t instance) {
  // One being opened carries every unacknowledged message once established.
  if (opening(instance)) return;
  auto it = peers_.find(instance);
  if (it == peers_.end()) return;
  it->second.reach.opening(std::chrono::steady_clock::now());
  // The address of the connection that failed last goes last: its NIC, or the peer's, may
  // be down, and a connect to it may take kConnectAttemptMs to give up.
  std::vector<std::string> order = it->second.addresses;
  std::stable_partition(order.begin(), order.end(), [&](const std::string& a) {
    return it->second.suspect.empty() || host_of(a) != it->second.suspect;
  });
  connections_.open_control(instance, order);
}

void ControlChannels::read(PeerConn& c) {
  const uint64_t instance = c.handshake->peer().instance_id;
  std::byte buffer[16 * 1024];
  bool came = false;  // a message (new or sent again) came over `c`
  for (int reads = 0; reads < 64; ++reads) {
    const ssize_t n = ::recv(c.fd, buffer, sizeof(buffer), 0);
    if (n == 0) {
      connections_.fail(c, "the connection closed (the peer daemon stopped or its node went away)");
      return;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      connections_.fail(c, std::string("recv: ") + std::strerror(errno));
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
      Peer& p = record(instance);
      if (!p.identity) p.identity = c.handshake->peer();
      const uint64_t delivered = p.sequence.delivered();
      const size_t unacked = p.sequence.unacknowledged();
      const auto now = std::chrono::steady_clock::now();
      auto message = p.sequence.receive(words, now);
      if (!message.ok()) {
        connections_.fail(c, "malformed control frame: " + message.error());
        return;
      }
      p.last_io = now;
      if (p.sequence.bye()) {
        said_bye(instance, c);
        return;
      }
      if (p.sequence.ack_due()) came = true;
      if (p.sequence.delivered() != delivered || p.sequence.unacknowledged() != unacked)
        p.failovers = 0;  // the peer answers over this connection
      if (*message) hooks_.delivered(c.handshake->peer(), std::move(**message));
      if (c.closing) return;
    }
    if (!error.empty()) {
      connections_.fail(c, "malformed control frame: " + error);
      return;
    }
  }
  // One acknowledgement for what this read delivered, on the connection it came over,
  // unless a message the callbacks sent on it carried it already (a message they sent on
  // another connection carried it too, but the peer may be waiting on this one).
  auto it = peers_.find(instance);
  if (it != peers_.end() && (it->second.sequence.ack_due() || (came && it->second.current != &c)))
    connections_.send(c, it->second.sequence.ack_frame());
}

void ControlChannels::failed(uint64_t instance, PeerConn& c, const std::string& name,
                             const std::string& reason) {
  auto it = peers_.find(instance);
  if (it == peers_.end()) return;                 // never used, or already reported lost
  if (!c.is_established && !c.connector) return;  // an accepted one refused in its handshake
  Peer& p = it->second;
  bool gone = false;  // refused everywhere: its daemon stopped
  if (c.is_established) {
    if (p.current != &c) return;  // one it had replaced: nothing waits on it
    p.current = nullptr;
    p.suspect = host_of(c.address);
    p.reach.lost(std::chrono::steady_clock::now());
    // Another established connection (both sides may have opened one) takes over.
    if (take_over(instance, p)) {
      spdlog::info("control messages to {} go on its other control connection ({})", name,
                   p.current->address);
      return;
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
      open(instance);  // a failure at once comes back here, through PeerConnections::fail
      return;
    }
    // Connections that opened, one after another, and carried no acknowledgement: its
    // daemon answers handshakes but not messages (stuck), gone for control.
    gone = true;
  } else {
    if (p.current != nullptr) return;   // a connector that lost a race to an established one
    if (opening(instance, &c)) return;  // another is still trying
    // Refused everywhere (no plexusd listens, or another answers): the daemon is gone.
    // Unreachable (this node's NICs or the peer's down, or a handshake unanswered): kept,
    // and tried again, for the data links' grace, as its data link is.
    gone = c.handshake_refused || (c.tried > 0 && c.refused == c.tried);
    if (!gone && p.reach.keep_trying(std::chrono::steady_clock::now(), settings_.grace,
                                     std::chrono::milliseconds(kControlRetryMs))) {
      spdlog::debug("{}: no control connection yet ({}); trying again", name, reason);
      return;
    }
  }
  const size_t dropped = p.sequence.unacknowledged();
  // Bounded: which one goes is by instance id, which is random; a peer given up that long
  // ago has given this side up too.
  if (given_up_.size() >= kControlGivenUpKept) given_up_.erase(given_up_.begin());
  given_up_[instance] = p.sequence.received();
  peers_.erase(it);
  if (dropped > 0) {
    spdlog::warn(
        "{}: no control connection could be opened; {} unacknowledged control "
        "message(s) dropped",
        name, dropped);
  }
  if (hooks_.lost) hooks_.lost(instance, name, reason, gone);
}

void ControlChannels::check_acks() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<PeerConn*> stalled;
  std::vector<uint64_t> unsent;
  for (auto& [instance, p] : peers_) {
    const auto since = p.sequence.waiting_since();
    if (p.current == nullptr) {
      // open() does nothing while one is being opened: messages queued meanwhile
      // are seen to here.
      if (p.reach.due(now, since.has_value())) unsent.push_back(instance);
    } else if (since && now - *since > settings_.ack_timeout) {
      stalled.push_back(p.current);
    }
  }
  const auto ms = settings_.ack_timeout.count();
  for (PeerConn* c : stalled) {
    connections_.fail(*c, "no acknowledgement of control messages within " + std::to_string(ms) +
                              " ms (its NIC, or the peer's, may be down)");
  }
  for (uint64_t instance : unsent) open(instance);
  close_idle(now);
}

void ControlChannels::close_idle(std::chrono::steady_clock::time_point now) {
  if (settings_.idle_close.count() == 0) return;
  // Every established control connection this side opened, to a peer quiet on it for the
  // idle time: the current one, and one left over from dials that crossed.
  std::vector<std::pair<uint64_t, PeerConn*>> quiet;
  for (PeerConn* c : connections_.connections()) {
    if (!c->connector || !c->is_established || c->closing || c->fd < 0 || !c->out.empty() ||
        c->handshake->role() != PeerRole::kControl) {
      continue;
    }
    const uint64_t instance = c->handshake->peer().instance_id;
    auto it = peers_.find(instance);
    if (it == peers_.end()) continue;
    const Peer& p = it->second;
    // Only the side that opened it closes a connection, so that both ends never close at
    // once; unread bytes would turn the close into a reset that could lose the bye.
    int unread = 0;
    if (p.sequence.unacknowledged() != 0 || p.sequence.ack_due() ||
        now - p.last_io < settings_.idle_close || (hooks_.busy && hooks_.busy(instance)) ||
        ::ioctl(c->fd, FIONREAD, &unread) != 0 || unread != 0) {
      continue;
    }
    quiet.emplace_back(instance, c);
  }
  for (auto [instance, c] : quiet) {
    Peer& p = peers_.at(instance);
    spdlog::debug("control connection with {} closed: quiet for {} ms", c->name(),
                  settings_.idle_close.count());
    connections_.send(*c, p.sequence.bye_frame());
    if (c->closing) continue;  // the write failed: failed() took it from here
    if (p.current == c) p.current = nullptr;
    connections_.retire(*c);
  }
}

bool ControlChannels::take_over(uint64_t instance, Peer& p) {
  for (PeerConn* other : connections_.connections()) {
    if (!other->closing && other->is_established &&
        other->handshake->role() == PeerRole::kControl &&
        other->handshake->peer().instance_id == instance) {
      p.current = other;
      connections_.send(*other, p.sequence.resend(std::chrono::steady_clock::now()));
      return true;
    }
  }
  return false;
}

void ControlChannels::said_bye(uint64_t instance, PeerConn& c) {
  Peer& p = record(instance);
  spdlog::debug("control connection with {} ({}) closed by the peer: quiet", c.name(), c.address);
  const bool was_current = p.current == &c;
  connections_.retire(c);
  if (!was_current) return;
  p.current = nullptr;
  // Another established one (dials that crossed) carries the messages from here, or, for a
  // message of this side's that crossed the bye, a new one.
  if (!take_over(instance, p) && p.sequence.unacknowledged() > 0) open(instance);
}

void ControlChannels::path_lost(uint64_t instance, const std::string& nic,
                                const std::string& remote) {
  auto it = peers_.find(instance);
  if (it == peers_.end()) return;
  if (it->second.current == nullptr) {
    // Closed while quiet: a connection opened now finds whether its daemon still answers (a
    // refusal everywhere reports it gone, as a failed control connection would have at once),
    // and closes again once quiet if it does.
    open(instance);
    return;
  }
  PeerConn& c = *it->second.current;
  const bool shares = host_of(c.address) == host_of(remote) ||
                      (!nic.empty() && c.fd >= 0 && connections_.local_nic(c) == nic);
  if (!shares) return;
  connections_.fail(c, "the data path over " + (nic.empty() ? std::string("?") : nic) + " to " +
                           remote + ", which this control connection shares, failed");
}

double ControlChannels::round_trip_s(uint64_t instance) const {
  // The kernel's smallest round trip on the control connection, whichever side opened
  // it; else the handshakes'.
  auto peer = peers_.find(instance);
  if (peer != peers_.end() && peer->second.current != nullptr && peer->second.current->fd >= 0) {
    const double kernel = transports::kernel_min_round_trip_s(peer->second.current->fd);
    if (kernel > 0) return kernel;
  }
  return connections_.handshake_round_trip_s(instance);
}

const transports::PeerIdentity* ControlChannels::peer(uint64_t instance) const {
  auto it = peers_.find(instance);
  return it == peers_.end() || !it->second.identity ? nullptr : &*it->second.identity;
}

void ControlChannels::close() {
  peers_.clear();
  timer_.close();
}

}  // namespace plexus::daemon
