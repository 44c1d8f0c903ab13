// Peer connections on the control thread: listen, connect (trying each advertised
// address), poll, write, fail and close; the handshake's reads and the hand-off are in
// peer_messages.cc.
#include "daemon/peers/peer_connections.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "common/socket_address.h"
#include "daemon/peers/peer_conn.h"
#include "transports/tcp/tcp_congestion.h"
#include "transports/tcp/tcp_peer_silence.h"

namespace plexus::daemon {

using namespace peer_detail;  // the helpers this room's files share (peer_conn.h)

PeerConnections::PeerConnections(uv_loop_t* loop, transports::PeerIdentity me,
                                 const transports::ClusterSecret* secret, Settings settings,
                                 Hooks hooks)
    : loop_(loop),
      me_(std::move(me)),
      secret_(secret),
      settings_(std::move(settings)),
      hooks_(std::move(hooks)),
      rdma_offers_(settings_.transport, settings_.rdma) {}

PeerConnections::~PeerConnections() {
  // close() must have run on the loop; whatever is left is freed without callbacks.
  for (PeerConn* c : conns_) {
    if (c->fd >= 0) ::close(c->fd);
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void PeerConnections::listen(const std::string& address) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  if (!common::parse_address(address, &addr, &len)) {
    throw std::runtime_error("peer listen address '" + address +
                             "' is not IP:PORT (e.g. 0.0.0.0:7355 or 198.18.0.1:7355)");
  }
  listen_fd_ = ::socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (listen_fd_ >= 0 && !settings_.tcp_congestion.empty()) {
    // Checked here, at start-up: accepted connections inherit it from the listener.
    const std::string error =
        transports::set_congestion_control(listen_fd_, settings_.tcp_congestion);
    if (!error.empty()) throw std::runtime_error("--tcp-congestion: " + error);
  }
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::listen(listen_fd_, settings_.backlog) != 0) {
    throw std::runtime_error("cannot listen for peers on " + address + ": " + std::strerror(errno));
  }
  len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  const uint16_t port = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  const bool any = addr.ss_family == AF_INET &&
                   reinterpret_cast<sockaddr_in*>(&addr)->sin_addr.s_addr == htonl(INADDR_ANY);
  me_.addresses.clear();
  me_.nics.clear();
  local_nics_.clear();
  for (const PeerNic& nic : settings_.nics) {
    me_.nics.push_back({nic.rail.name, nic.address_text, nic.speed_mbps});
    local_nics_.push_back(nic.rail);
    if (me_.addresses.size() < 4)
      me_.addresses.push_back(nic.address_text + ":" + std::to_string(port));
  }
  if (local_nics_.size() >= 2) {
    // Backups across rails must leave over their own NIC; where that is not permitted
    // they would only copy a rail.
    const int probe = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    binds_to_nics_ = probe >= 0 && bind_to_device(probe, local_nics_.front().name);
    if (probe >= 0) ::close(probe);
    if (!binds_to_nics_) {
      spdlog::warn("no backup paths across rails: binding a socket to a NIC needs CAP_NET_RAW");
    }
  }
  if (me_.addresses.empty()) {
    // Loopback only (a test, or a node with no other interface up).
    sockaddr_in* in = reinterpret_cast<sockaddr_in*>(&addr);
    if (any) in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    me_.addresses.push_back(common::address_text(reinterpret_cast<sockaddr*>(&addr)));
  }
  if (const int applied = listen_backlog(); applied > 0 && applied < settings_.backlog) {
    spdlog::info(
        "peer listen backlog {} cut to {} by the kernel (net.core.somaxconn): more nodes "
        "joining a communicator here at once drop SYNs, which are resent after 1 s",
        settings_.backlog, applied);
  }
  uv_poll_init(loop_, &listen_poll_, listen_fd_);
  listen_poll_.data = this;
  uv_poll_start(&listen_poll_, UV_READABLE, [](uv_poll_t* h, int, int) {
    static_cast<PeerConnections*>(h->data)->on_listen_readable();
  });
  listening_ = true;
  std::string list_text;
  for (const auto& a : me_.addresses) list_text += (list_text.empty() ? "" : ", ") + a;
  std::string nic_text;
  for (const auto& n : local_nics_) nic_text += (nic_text.empty() ? "" : ", ") + n.name;
  spdlog::info("accepting peer daemons on {} (advertised: {}; NICs: {}){}", address, list_text,
               nic_text.empty() ? "none" : nic_text,
               secret_ != nullptr ? ", cluster secret required" : ", no cluster secret");
}

void PeerConnections::on_listen_readable() {
  for (int accepted = 0; accepted < 64; ++accepted) {
    sockaddr_storage from{};
    socklen_t len = sizeof(from);
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &len,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EINTR) spdlog::warn("peer accept: {}", std::strerror(errno));
      return;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto* c = new PeerConn;
    c->owner = this;
    c->fd = fd;
    c->address = common::address_text(reinterpret_cast<sockaddr*>(&from));
    // Offered (and the path's rings held) only once the connector says it carries data.
    c->handshake.emplace(PeerHandshake::acceptor(
        me_, secret_, [this, c] { return rdma_offers_.offers(c->fd, &c->rdma_reserved); },
        settings_.transport == DataTransport::kRdma));
    if (hooks_.crossing) c->handshake->refuse_crossing(hooks_.crossing);
    conns_.push_back(c);
    uv_poll_init(loop_, &c->poll, fd);
    uv_timer_init(loop_, &c->timer);
    c->poll.data = c;
    c->timer.data = c;
    c->polling = true;
    c->open_handles = 2;
    uv_timer_start(
        &c->timer,
        [](uv_timer_t* t) {
          auto* conn = static_cast<PeerConn*>(t->data);
          conn->owner->handshake_late(*conn);
        },
        static_cast<uint64_t>(settings_.handshake_timeout.count()), 0);
    update_poll(*c);
  }
}

void PeerConnections::open_control(uint64_t instance, const std::vector<std::string>& addresses) {
  start_connect(connector(instance, addresses, PeerRole::kControl, nullptr));
}

void PeerConnections::dial(uint64_t instance, const Rail& rail, uint64_t dial,
                           std::chrono::milliseconds connect_within) {
  PeerConn& c = connector(instance, rail.peer_addresses, PeerRole::kData, &rail);
  c.dial = dial;
  if (connect_within.count() > 0) c.connect_ms = static_cast<uint64_t>(connect_within.count());
  start_connect(c);
}

PeerConn& PeerConnections::connector(uint64_t instance, const std::vector<std::string>& addresses,
                                     PeerRole role, const Rail* rail) {
  auto* c = new PeerConn;
  c->owner = this;
  c->connector = true;
  c->expected = instance;
  c->role = role;
  c->addresses = addresses;
  std::reverse(c->addresses.begin(), c->addresses.end());  // tried from the back
  conns_.push_back(c);
  if (rail != nullptr) {
    c->rail_key = rail->key;
    c->rail_nic = rail->nic;
    c->backup_rail = rail->backup;
    c->latency_rail = rail->latency;
    c->bind_address = rail->local_address;
  }
  uv_timer_init(loop_, &c->timer);
  c->timer.data = c;
  c->open_handles = 1;
  return *c;
}

bool PeerConnections::start_connect(PeerConn& c) {
  std::string last_error = "no address to connect to";
  while (!c.addresses.empty()) {
    c.address = c.addresses.back();
    c.addresses.pop_back();
    sockaddr_storage addr{};
    socklen_t len = 0;
    if (!common::parse_address(c.address, &addr, &len)) {
      last_error = "'" + c.address + "' is not IP:PORT";
      continue;
    }
    const int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      last_error = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    // Known to be available: listen() checked it.
    if (!settings_.tcp_congestion.empty())
      transports::set_congestion_control(fd, settings_.tcp_congestion);
    // Before connect(): the SYN already goes in its class's queues.
    if (c.latency_rail) mark_latency(fd, c.address, settings_.latency_dscp);
    if (c.bind_address != 0) {  // the rail's own NIC
      // Bound to the device too (where permitted: CAP_NET_RAW), so that while the NIC is
      // down no other route carries a connection labelled with it. A backup must be: the
      // direct route to the peer's rail would make it a copy of that rail.
      if (!bind_to_device(fd, c.rail_nic) && c.backup_rail) {
        last_error = "bind to " + c.rail_nic + ": " + std::strerror(errno);
        ::close(fd);
        continue;
      }
      sockaddr_in local{};
      local.sin_family = AF_INET;
      local.sin_addr.s_addr = htonl(c.bind_address);
      if (::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) {
        last_error = "bind to " + c.rail_nic + "'s address: " + std::strerror(errno);
        ::close(fd);
        continue;
      }
    }
    ++c.tried;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 && errno != EINPROGRESS) {
      if (errno == ECONNREFUSED) ++c.refused;
      last_error = "connect to " + c.address + ": " + std::strerror(errno);
      ::close(fd);
      continue;
    }
    c.fd = fd;
    c.connecting = true;
    // Each address gets its own time to accept; the handshake then gets its own. Timed
    // from now, not from the loop's cached time (a redial's limit is a few hundred ms, and
    // this may run late in a long callback).
    uv_update_time(loop_);
    uv_timer_start(
        &c.timer,
        [](uv_timer_t* t) {
          auto* conn = static_cast<PeerConn*>(t->data);
          // A connect that finished while the loop was busy has its writable event handled
          // after the timers: taken as it is, not abandoned.
          pollfd ready{.fd = conn->fd, .events = POLLOUT, .revents = 0};
          if (::poll(&ready, 1, 0) == 1) {
            conn->owner->on_connected(*conn);
            return;
          }
          conn->owner->next_address(*conn, "connect to " + conn->address + ": no answer within " +
                                               std::to_string(conn->connect_ms) + " ms");
        },
        c.connect_ms, 0);
    if (!c.polling) {
      uv_poll_init(loop_, &c.poll, fd);
      c.poll.data = &c;
      ++c.open_handles;
      c.polling = true;
    }
    uv_poll_start(&c.poll, UV_WRITABLE, [](uv_poll_t* h, int status, int events) {
      auto* conn = static_cast<PeerConn*>(h->data);
      conn->owner->on_event(*conn, status, events);
    });
    return true;
  }
  fail(c, last_error);
  return false;
}

void PeerConnections::on_connected(PeerConn& c) {
  int error = 0;
  socklen_t len = sizeof(error);
  ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &error, &len);
  if (error != 0) {
    if (error == ECONNREFUSED) ++c.refused;
    next_address(c, "connect to " + c.address + ": " + std::strerror(error));
    return;
  }
  c.connecting = false;
  uv_timer_start(
      &c.timer,
      [](uv_timer_t* t) {
        auto* conn = static_cast<PeerConn*>(t->data);
        conn->owner->handshake_late(*conn);
      },
      static_cast<uint64_t>(settings_.handshake_timeout.count()), 0);
  c.handshake.emplace(PeerHandshake::connector(
      me_, c.role, secret_, c.expected,
      c.role == PeerRole::kData && rdma_offers_.offers(c.fd, &c.rdma_reserved),
      settings_.transport == DataTransport::kRdma, c.latency_rail));
  std::vector<std::byte> hello = c.handshake->take_output();
  c.out.insert(c.out.end(), hello.begin(), hello.end());
  if (!flush(c)) return;
  update_poll(c);
}

void PeerConnections::handshake_late(PeerConn& c) {
  if (c.closing) return;
  if (c.fd >= 0 && !read_handshake(c)) return;  // failed (and closed) while reading
  if (c.closing || c.is_established) return;    // finished after all
  const std::string limit = std::to_string(settings_.handshake_timeout.count()) + " ms";
  if (!c.connector) {
    fail(c, "the handshake did not finish within " + limit);
    return;
  }
  // Said, not acted on: a peer whose kernel took the hello may be a stopped daemon, or one
  // whose answer a network failing after the connect lost (both were seen with a cable
  // pulled a moment later). Unreachable either way, not gone: the data link, which may have
  // a backup across rails, keeps its own watch.
  const bool acknowledged = c.out.empty() && transports::tcp_peer_acknowledged_all(c.fd);
  fail(c,
       "connected to " + c.address + ", but the handshake did not finish within " + limit +
           (acknowledged ? " (its kernel took the hello)" : " (the hello was never acknowledged)"));
}

int PeerConnections::listen_backlog() const {
  if (listen_fd_ < 0) return 0;
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (::getsockopt(listen_fd_, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return 0;
  return static_cast<int>(info.tcpi_sacked);  // a listener's: its backlog
}

void PeerConnections::next_address(PeerConn& c, const std::string& reason) {
  if (c.closing || !c.connecting) return;
  if (c.addresses.empty()) {
    fail(c, reason);
    return;
  }
  spdlog::debug("peer {}; trying {}", reason, c.addresses.back());
  uv_timer_stop(&c.timer);
  // The poll handle watches this fd: stop it before the fd goes away; the next address
  // is tried once the handle is closed.
  uv_poll_stop(&c.poll);
  c.polling = false;
  uv_close(reinterpret_cast<uv_handle_t*>(&c.poll), [](uv_handle_t* h) {
    auto* conn = static_cast<PeerConn*>(h->data);
    if (--conn->open_handles == 0) {
      delete conn;
      return;
    }
    if (!conn->closing) conn->owner->start_connect(*conn);
  });
  ::close(c.fd);
  c.fd = -1;
}

void PeerConnections::update_poll(PeerConn& c) {
  if (c.closing || c.fd < 0) return;
  if (!c.polling) {
    uv_poll_init(loop_, &c.poll, c.fd);
    c.poll.data = &c;
    c.polling = true;
    ++c.open_handles;
  }
  int events = UV_READABLE | UV_DISCONNECT;
  if (c.out_sent < c.out.size()) events |= UV_WRITABLE;
  uv_poll_start(&c.poll, events, [](uv_poll_t* h, int status, int ev) {
    auto* conn = static_cast<PeerConn*>(h->data);
    conn->owner->on_event(*conn, status, ev);
  });
}

void PeerConnections::on_event(PeerConn& c, int status, int events) {
  if (c.closing) return;
  if (c.connecting) {
    on_connected(c);
    return;
  }
  if (status < 0) {
    fail(c, std::string("connection error: ") + uv_strerror(status));
    return;
  }
  if ((events & UV_WRITABLE) != 0 && !flush(c)) return;
  if (c.closing) return;
  if (c.handed_off) return;
  if ((events & (UV_READABLE | UV_DISCONNECT)) != 0) {
    if (!c.is_established) {
      if (!read_handshake(c)) return;
    } else {
      hooks_.control_readable(c);
      if (c.closing) return;
    }
  }
  if (!c.closing && !c.handed_off) update_poll(c);
}

bool PeerConnections::flush(PeerConn& c) {
  while (c.out_sent < c.out.size()) {
    const ssize_t n = ::send(c.fd, c.out.data() + c.out_sent, c.out.size() - c.out_sent,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      if (errno == EINTR) continue;
      fail(c, std::string("send: ") + std::strerror(errno));
      return false;
    }
    c.out_sent += static_cast<size_t>(n);
  }
  c.out.clear();
  c.out_sent = 0;
  if (c.is_established && c.handshake->role() == PeerRole::kData && !c.handed_off) established(c);
  return !c.closing;
}

void PeerConnections::fail(PeerConn& c, const std::string& reason) {
  if (c.closing) return;
  const bool control = c.is_established ? c.handshake->role() == PeerRole::kControl
                                        : c.connector && c.role == PeerRole::kControl;
  const bool dialling = c.connector && c.role == PeerRole::kData && !c.handed_off;
  // Every address refused, or the handshake was: no plexusd of that instance is there, and
  // dialling it again would not change that.
  const bool refused = c.handshake_refused || (c.tried > 0 && c.refused == c.tried);
  const std::string name = c.name();
  if (c.handshake && c.handshake->crossed()) {
    spdlog::debug("peer connection with {}: {}", name, reason);  // both dialled: one is kept
  } else if (!c.is_established && !c.connector) {
    spdlog::warn("peer connection from {} refused: {}", c.address, reason);
  } else if (!c.handshake &&
             (c.backup_rail || (dialling && hooks_.redialing(c.expected, c.rail_key)))) {
    // A backup that could not connect (the route between the rails is down), or a rail
    // that failed again while its NIC is down: its first failure was logged. A refused
    // handshake is logged as for any connection.
    spdlog::debug("peer connection with {} over {}: {}", name, c.rail_key, reason);
  } else {
    spdlog::info("peer connection with {}: {}", name, reason);
  }
  uint64_t instance = c.expected;
  if (c.handshake && c.handshake->peer().instance_id != 0)
    instance = c.handshake->peer().instance_id;
  close_conn(c);  // `c` is freed once its handles have closed, on a later loop turn
  if (control) hooks_.control_failed(instance, c, name, reason);
  if (dialling && c.handshake && c.handshake->crossed() && hooks_.dial_crossed) {
    hooks_.dial_crossed(c.expected, c.rail_key, c.dial);
  } else if (dialling) {
    hooks_.dial_failed(c.expected, c.rail_key, c.dial, reason, refused);
  }
}

void PeerConnections::send(PeerConn& c, const std::vector<std::byte>& bytes) {
  if (bytes.empty() || c.closing) return;
  c.out.insert(c.out.end(), bytes.begin(), bytes.end());
  // flush fails the connection on an error.
  if (c.is_established && flush(c)) update_poll(c);
}

std::string PeerConnections::local_nic(const PeerConn& c) const {
  return c.fd >= 0 ? nic_of_local_end(c.fd, local_nics_) : std::string();
}

double PeerConnections::handshake_round_trip_s(uint64_t instance) const {
  auto it = round_trip_s_.find(instance);
  return it == round_trip_s_.end() ? 0.0 : it->second;
}

void PeerConnections::close_conn(PeerConn& c) {
  if (c.closing) return;
  c.closing = true;
  std::erase(conns_, &c);
  auto closed = [](uv_handle_t* h) {
    auto* conn = static_cast<PeerConn*>(h->data);
    if (--conn->open_handles == 0) delete conn;
  };
  if (c.polling) {
    uv_poll_stop(&c.poll);
    uv_close(reinterpret_cast<uv_handle_t*>(&c.poll), closed);
  }
  uv_timer_stop(&c.timer);
  uv_close(reinterpret_cast<uv_handle_t*>(&c.timer), closed);
  if (c.fd >= 0) ::close(c.fd);
  c.fd = -1;
}

void PeerConnections::close() {
  std::vector<PeerConn*> all = conns_;
  for (PeerConn* c : all) close_conn(*c);
  if (listening_) {
    uv_poll_stop(&listen_poll_);
    uv_close(reinterpret_cast<uv_handle_t*>(&listen_poll_), nullptr);
    listening_ = false;
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
}

}  // namespace plexus::daemon
