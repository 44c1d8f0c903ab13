// Peer connections on the control thread: listen, connect (trying each advertised
// address), handshake with exact-size reads (so no byte of a data connection's stream is
// consumed here), then control messages or hand-off to the engine.
#include "daemon/peers/peer_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <capnp/serialize.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>

#include "common/frame_codec.h"
#include "common/socket_address.h"
#include "transports/tcp/tcp_congestion.h"
#include "transports/tcp/tcp_path.h"
#include "transports/tcp/tcp_path_latency.h"

namespace plexus::daemon {
namespace {

using transports::PeerHandshake;
using transports::PeerRole;

constexpr uint64_t kHandshakeTimeoutMs = 5000;
constexpr size_t kMaxControlFrameBytes = 1 << 20;
// How often a backup with no route between the rails is looked at again.
constexpr std::chrono::milliseconds kUnroutedBackupRecheck{10000};

// Binds `fd` to interface `nic`; false where not permitted (it needs CAP_NET_RAW).
bool bind_to_device(int fd, const std::string& nic) {
  return ::setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, nic.c_str(),
                      static_cast<socklen_t>(nic.size())) == 0;
}

}  // namespace

struct PeerServer::Conn {
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
  uint32_t bind_address = 0;  // data connector: the local NIC's IPv4 address (host order)
  std::optional<PeerHandshake> handshake;
  bool is_established = false;
  bool handed_off = false;
  std::array<std::byte, common::kFrameLengthBytes> length{};
  size_t length_got = 0;
  std::vector<std::byte> body;
  size_t body_got = 0;
  common::FrameDecoder decoder{kMaxControlFrameBytes};
  std::vector<std::byte> out;
  size_t out_sent = 0;
  std::vector<std::vector<std::byte>> waiting;  // control frames queued before the handshake ended
  bool closing = false;
  std::string name() const {
    return handshake && !handshake->peer().node_name.empty()
               ? "node " + handshake->peer().node_name + " (" + address + ")"
               : address;
  }
};

PeerServer::PeerServer(uv_loop_t* loop, transports::PeerIdentity me,
                       const transports::ClusterSecret* secret, Settings settings,
                       Callbacks callbacks)
    : loop_(loop),
      me_(std::move(me)),
      secret_(secret),
      callbacks_(std::move(callbacks)),
      settings_(std::move(settings)) {}

PeerServer::~PeerServer() {
  // close() must have run on the loop; whatever is left is freed without callbacks.
  for (Conn* c : conns_) {
    if (c->fd >= 0) ::close(c->fd);
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void PeerServer::listen(const std::string& address) {
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
      ::listen(listen_fd_, 128) != 0) {
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
    backups_ = probe >= 0 && bind_to_device(probe, local_nics_.front().name);
    if (probe >= 0) ::close(probe);
    if (!backups_) {
      spdlog::warn("no backup paths across rails: binding a socket to a NIC needs CAP_NET_RAW");
    }
  }
  if (me_.addresses.empty()) {
    // Loopback only (a test, or a node with no other interface up).
    sockaddr_in* in = reinterpret_cast<sockaddr_in*>(&addr);
    if (any) in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    me_.addresses.push_back(common::address_text(reinterpret_cast<sockaddr*>(&addr)));
  }
  uv_timer_init(loop_, &retry_timer_);
  retry_timer_.data = this;
  retry_timer_open_ = true;
  uv_poll_init(loop_, &listen_poll_, listen_fd_);
  listen_poll_.data = this;
  uv_poll_start(&listen_poll_, UV_READABLE, [](uv_poll_t* h, int, int) {
    static_cast<PeerServer*>(h->data)->on_listen_readable();
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

void PeerServer::on_listen_readable() {
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
    auto* c = new Conn;
    c->server = this;
    c->fd = fd;
    c->address = common::address_text(reinterpret_cast<sockaddr*>(&from));
    c->handshake.emplace(PeerHandshake::acceptor(me_, secret_));
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
          auto* conn = static_cast<Conn*>(t->data);
          conn->server->fail(*conn, "the handshake did not finish within 5 s");
        },
        kHandshakeTimeoutMs, 0);
    update_poll(*c);
  }
}

PeerServer::Conn* PeerServer::open(uint64_t instance, const std::vector<std::string>& addresses,
                                   PeerRole role, const Rail* rail) {
  auto* c = new Conn;
  c->server = this;
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
    c->bind_address = rail->local_address;
    data_peers_[instance].connecting[rail->key] = c;
  }
  uv_timer_init(loop_, &c->timer);
  c->timer.data = c;
  c->open_handles = 1;
  uv_timer_start(
      &c->timer,
      [](uv_timer_t* t) {
        auto* conn = static_cast<Conn*>(t->data);
        conn->server->fail(*conn, "no connection and handshake within 5 s");
      },
      kHandshakeTimeoutMs, 0);
  if (!start_connect(*c)) return nullptr;
  return c;
}

bool PeerServer::start_connect(Conn& c) {
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
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 && errno != EINPROGRESS) {
      last_error = "connect to " + c.address + ": " + std::strerror(errno);
      ::close(fd);
      continue;
    }
    c.fd = fd;
    c.connecting = true;
    if (!c.polling) {
      uv_poll_init(loop_, &c.poll, fd);
      c.poll.data = &c;
      ++c.open_handles;
      c.polling = true;
    }
    uv_poll_start(&c.poll, UV_WRITABLE, [](uv_poll_t* h, int status, int events) {
      auto* conn = static_cast<Conn*>(h->data);
      conn->server->on_event(*conn, status, events);
    });
    return true;
  }
  fail(c, last_error);
  return false;
}

void PeerServer::on_connected(Conn& c) {
  int error = 0;
  socklen_t len = sizeof(error);
  ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &error, &len);
  if (error != 0) {
    const std::string reason = "connect to " + c.address + ": " + std::strerror(error);
    // The poll handle watches this fd: stop it before the fd goes away; the next address
    // is tried once the handle is closed.
    uv_poll_stop(&c.poll);
    c.polling = false;
    uv_close(reinterpret_cast<uv_handle_t*>(&c.poll), [](uv_handle_t* h) {
      auto* conn = static_cast<Conn*>(h->data);
      if (--conn->open_handles == 0) {
        delete conn;
        return;
      }
      if (!conn->closing) conn->server->start_connect(*conn);
    });
    ::close(c.fd);
    c.fd = -1;
    spdlog::debug("peer {}", reason);
    if (c.addresses.empty()) fail(c, reason);
    return;
  }
  c.connecting = false;
  c.handshake.emplace(PeerHandshake::connector(me_, c.role, secret_, c.expected));
  std::vector<std::byte> hello = c.handshake->take_output();
  c.out.insert(c.out.end(), hello.begin(), hello.end());
  if (!flush(c)) return;
  update_poll(c);
}

void PeerServer::update_poll(Conn& c) {
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
    auto* conn = static_cast<Conn*>(h->data);
    conn->server->on_event(*conn, status, ev);
  });
}

void PeerServer::on_event(Conn& c, int status, int events) {
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
      read_control(c);
      if (c.closing) return;
    }
  }
  if (!c.closing && !c.handed_off) update_poll(c);
}

bool PeerServer::flush(Conn& c) {
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

ssize_t PeerServer::recv_some(Conn& c, std::byte* at, size_t bytes) {
  const ssize_t n = ::recv(c.fd, at, bytes, 0);
  if (n > 0) return n;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
  fail(c, n == 0 ? std::string("the peer closed the connection during the handshake")
                 : std::string("recv: ") + std::strerror(errno));
  return -1;
}

bool PeerServer::read_handshake(Conn& c) {
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
      flush(c);  // best effort: tell the peer why
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

void PeerServer::established(Conn& c) {
  const transports::PeerIdentity& peer = c.handshake->peer();
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
    const std::string nic = c.rail_nic.empty() ? nic_of_local_end(fd) : c.rail_nic;
    if (c.connector) {
      auto it = data_peers_.find(c.expected);
      if (it != data_peers_.end()) {
        it->second.connecting.erase(c.rail_key);
        it->second.retries.erase(c.rail_key);
        it->second.linked = true;
      }
    } else if (!nic.empty() && nic != "lo" && RouteTable::read().covers(nic, c.address)) {
      // Replies leave over the NIC the peer chose where a route allows (and CAP_NET_RAW):
      // a backup that crosses rails must not answer over this node's NIC on the peer's
      // rail, which may be the one that is down.
      bind_to_device(fd, nic);
    }
    const bool backup = c.connector ? c.backup_rail : accepted_backup(fd);
    c.fd = -1;
    spdlog::info("data connection with node {} ({}) over {} established{}", peer.node_name,
                 c.address, nic.empty() ? "?" : nic, backup ? " (a backup across rails)" : "");
    close_conn(c);
    // From here on a transport-neutral path: the engine's links open it over this socket.
    transports::PathOpener open = transports::tcp_path_opener(fd);
    if (callbacks_.on_data_link) callbacks_.on_data_link(peer, std::move(open), nic, backup);
    return;
  }
  spdlog::info("control connection with node {} ({}) established", peer.node_name, c.address);
  control_[peer.instance_id] = &c;
  for (auto& frame : c.waiting) c.out.insert(c.out.end(), frame.begin(), frame.end());
  c.waiting.clear();
}

void PeerServer::read_control(Conn& c) {
  std::byte buffer[16 * 1024];
  for (int reads = 0; reads < 64; ++reads) {
    const ssize_t n = ::recv(c.fd, buffer, sizeof(buffer), 0);
    if (n == 0) {
      fail(c, "the connection closed (the peer daemon stopped or its node went away)");
      return;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR) continue;
      fail(c, std::string("recv: ") + std::strerror(errno));
      return;
    }
    c.decoder.append(buffer, static_cast<size_t>(n));
    std::string error;
    while (auto words = c.decoder.next(&error)) {
      callbacks_.on_control(c.handshake->peer(), std::move(*words));
      if (c.closing) return;
    }
    if (!error.empty()) {
      fail(c, "malformed control frame: " + error);
      return;
    }
  }
}

void PeerServer::send_control(uint64_t instance, const std::vector<std::string>& addresses,
                              capnp::MessageBuilder& message) {
  std::vector<std::byte> frame = common::encode_frame(message);
  auto it = control_.find(instance);
  if (it != control_.end()) {
    Conn& c = *it->second;
    c.out.insert(c.out.end(), frame.begin(), frame.end());
    if (flush(c)) update_poll(c);
    return;
  }
  // A control connection being opened to it?
  for (Conn* c : conns_) {
    if (c->connector && !c->closing && c->expected == instance && c->role == PeerRole::kControl) {
      c->waiting.push_back(std::move(frame));
      return;
    }
  }
  Conn* c = open(instance, addresses, PeerRole::kControl);
  if (c != nullptr) c->waiting.push_back(std::move(frame));
}

std::vector<Rail> PeerServer::rails_to(const std::vector<std::string>& addresses) const {
  std::vector<Rail> rails = plan_rails(local_nics_, addresses);
  if (!backups_) std::erase_if(rails, [](const Rail& rail) { return rail.backup; });
  return rails;
}

bool PeerServer::openable(const Rail& rail, std::optional<RouteTable>& routes) {
  if (!rail.backup) return true;
  if (!routes) routes = RouteTable::read();
  return routes->covers(rail.nic, rail.peer_addresses.front());
}

void PeerServer::connect_data(uint64_t instance, const std::vector<std::string>& addresses) {
  data_peers_[instance].addresses = addresses;
  // A rail may fail at once (no route): fail() then only records it, and whether the peer
  // has no hope left is decided after every rail was tried.
  opening_ = instance;
  opening_failed_.clear();
  std::vector<std::string> unrouted;  // backups with no route between the rails
  std::optional<RouteTable> routes;
  for (const Rail& rail : rails_to(addresses)) {
    if (data_peers_[instance].connecting.count(rail.key) != 0) continue;
    if (!openable(rail, routes)) {
      unrouted.push_back(rail.key);
      continue;
    }
    open(instance, rail.peer_addresses, PeerRole::kData, &rail);  // a failure is recorded
  }
  opening_ = 0;
  auto it = data_peers_.find(instance);
  if (it == data_peers_.end()) return;
  if (it->second.linked || !it->second.connecting.empty()) {
    // The peer may yet be linked: the rails that failed at once are tried again later.
    for (const std::string& key : opening_failed_) schedule_retry(instance, key);
    for (const std::string& key : unrouted) schedule_retry(instance, key, kUnroutedBackupRecheck);
    opening_failed_.clear();
    return;
  }
  opening_failed_.clear();
  const std::string reason = it->second.last_error;
  data_peers_.erase(it);
  if (callbacks_.on_data_failed) callbacks_.on_data_failed(instance, reason);
}

void PeerServer::rail_lost(uint64_t instance, const std::string& nic, const std::string& remote) {
  auto it = data_peers_.find(instance);
  if (it == data_peers_.end()) return;
  const std::string rail = rail_key_of(rails_to(it->second.addresses), nic, remote);
  if (it->second.connecting.count(rail) != 0) return;
  schedule_retry(instance, rail);
}

void PeerServer::nic_up(const std::string& nic) {
  bool any = false;
  for (auto& [instance, peer] : data_peers_) {
    for (const Rail& rail : rails_to(peer.addresses)) {
      if (!rail.nic.empty() && rail.nic != nic) continue;  // the fallback may use any NIC
      auto retry = peer.retries.find(rail.key);
      if (retry == peer.retries.end() || !retry->second.scheduled) continue;
      retry->second.due = std::chrono::steady_clock::now();
      any = true;
    }
  }
  if (any) run_retries();
}

void PeerServer::forget_data_peer(uint64_t instance) {
  auto it = data_peers_.find(instance);
  if (it == data_peers_.end()) return;
  // Connections still being opened finish or fail on their own; a late one makes a new link.
  it->second.retries.clear();
  it->second.linked = false;
  if (it->second.connecting.empty()) data_peers_.erase(it);
}

// Exponential backoff: 100 ms, doubling, at most settings_.reconnect_max.
void PeerServer::schedule_retry(uint64_t instance, const std::string& key,
                                std::chrono::milliseconds at_least) {
  RailRetry& retry = data_peers_[instance].retries[key];
  if (retry.scheduled) return;
  const auto wait =
      std::max(at_least, std::min<std::chrono::milliseconds>(
                             settings_.reconnect_max,
                             std::chrono::milliseconds(100LL << std::min(retry.attempts, 16))));
  ++retry.attempts;
  retry.scheduled = true;
  retry.due = std::chrono::steady_clock::now() + wait;
  arm_retry_timer();
}

void PeerServer::arm_retry_timer() {
  if (!retry_timer_open_) return;
  std::optional<std::chrono::steady_clock::time_point> next;
  for (const auto& [instance, peer] : data_peers_) {
    for (const auto& [nic, retry] : peer.retries) {
      if (retry.scheduled && (!next || retry.due < *next)) next = retry.due;
    }
  }
  if (!next) {
    uv_timer_stop(&retry_timer_);
    return;
  }
  const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
      *next - std::chrono::steady_clock::now());
  uv_timer_start(
      &retry_timer_, [](uv_timer_t* t) { static_cast<PeerServer*>(t->data)->run_retries(); },
      static_cast<uint64_t>(std::max<int64_t>(wait.count(), 0)), 0);
}

void PeerServer::run_retries() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::pair<uint64_t, std::string>> due;
  for (auto& [instance, peer] : data_peers_) {
    for (auto& [nic, retry] : peer.retries) {
      if (retry.scheduled && retry.due <= now) {
        retry.scheduled = false;
        due.emplace_back(instance, nic);
      }
    }
  }
  std::optional<RouteTable> routes;
  for (const auto& [instance, key] : due) {
    auto it = data_peers_.find(instance);
    if (it == data_peers_.end() || it->second.connecting.count(key) != 0) continue;
    for (const Rail& rail : rails_to(it->second.addresses)) {
      if (rail.key != key) continue;
      if (!openable(rail, routes)) {  // no route between the rails (yet): nothing is sent
        schedule_retry(instance, key, kUnroutedBackupRecheck);
        break;
      }
      spdlog::debug("reconnecting to peer {:016x} over {} (attempt {})", instance,
                    key.empty() ? "any NIC" : key, it->second.retries[key].attempts);
      open(instance, rail.peer_addresses, PeerRole::kData, &rail);
      break;
    }
  }
  arm_retry_timer();
}

std::string PeerServer::nic_of_local_end(int fd) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      addr.ss_family != AF_INET) {
    return {};
  }
  const uint32_t local = ntohl(reinterpret_cast<sockaddr_in*>(&addr)->sin_addr.s_addr);
  for (const LocalNic& nic : local_nics_) {
    if (nic.address == local) return nic.name;
  }
  return (local >> 24) == 127 ? "lo" : "";
}

bool PeerServer::reconnecting(const Conn& c) const {
  if (!c.connector || c.role != PeerRole::kData) return false;
  auto peer = data_peers_.find(c.expected);
  if (peer == data_peers_.end()) return false;
  auto retry = peer->second.retries.find(c.rail_key);
  return retry != peer->second.retries.end() && retry->second.attempts > 1;
}

bool PeerServer::accepted_backup(int fd) const {
  sockaddr_storage local{};
  sockaddr_storage remote{};
  socklen_t local_len = sizeof(local);
  socklen_t remote_len = sizeof(remote);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_len) != 0 ||
      local.ss_family != AF_INET || remote.ss_family != AF_INET) {
    return false;
  }
  return crosses_rails(local_nics_, ntohl(reinterpret_cast<sockaddr_in*>(&local)->sin_addr.s_addr),
                       ntohl(reinterpret_cast<sockaddr_in*>(&remote)->sin_addr.s_addr));
}

double PeerServer::control_round_trip_s(uint64_t instance) const {
  // The kernel's smallest round trip on the control connection, whichever side opened
  // it; else the handshakes'.
  auto conn = control_.find(instance);
  if (conn != control_.end() && conn->second->fd >= 0) {
    const double kernel = transports::kernel_min_round_trip_s(conn->second->fd);
    if (kernel > 0) return kernel;
  }
  auto it = round_trip_s_.find(instance);
  return it == round_trip_s_.end() ? 0.0 : it->second;
}

const transports::PeerIdentity* PeerServer::control_peer(uint64_t instance) const {
  auto it = control_.find(instance);
  return it == control_.end() ? nullptr : &it->second->handshake->peer();
}

void PeerServer::fail(Conn& c, const std::string& reason) {
  if (c.closing) return;
  const bool was_control_for = c.is_established && c.handshake->role() == PeerRole::kControl;
  const std::string name = c.name();
  if (!c.is_established && !c.connector) {
    ++refused_;
    spdlog::warn("peer connection from {} refused: {}", c.address, reason);
  } else if (!c.handshake && (c.backup_rail || reconnecting(c))) {
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
  bool report_control = false;
  if (was_control_for) {
    auto it = control_.find(instance);
    if (it != control_.end() && it->second == &c) {
      control_.erase(it);
      report_control = true;
    }
  } else if (c.connector && c.role == PeerRole::kControl) {
    report_control = true;  // nobody else will carry its waiting messages
  }
  // A rail that could not be opened: retried while the peer is linked over another (or
  // one is still being opened); reported when it was the peer's last hope.
  bool report_data = false;
  if (c.connector && c.role == PeerRole::kData && !c.handed_off) {
    auto it = data_peers_.find(c.expected);
    if (it != data_peers_.end() && it->second.connecting.count(c.rail_key) != 0 &&
        it->second.connecting[c.rail_key] == &c) {
      DataPeer& peer = it->second;
      peer.connecting.erase(c.rail_key);
      if (!c.backup_rail || peer.last_error.empty()) peer.last_error = reason;
      if (c.expected == opening_) {
        opening_failed_.push_back(c.rail_key);  // connect_data decides once every rail was tried
      } else if (peer.linked || !peer.connecting.empty()) {
        schedule_retry(c.expected, c.rail_key);  // the peer is, or may yet be, linked
      } else {
        report_data = true;
        data_peers_.erase(it);
      }
    }
  }
  close_conn(c);
  if (report_control && callbacks_.on_control_lost) {
    callbacks_.on_control_lost(instance, name, reason);
  }
  if (report_data && callbacks_.on_data_failed) callbacks_.on_data_failed(instance, reason);
}

void PeerServer::close_conn(Conn& c) {
  if (c.closing) return;
  c.closing = true;
  std::erase(conns_, &c);
  auto closed = [](uv_handle_t* h) {
    auto* conn = static_cast<Conn*>(h->data);
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

void PeerServer::close() {
  std::vector<Conn*> all = conns_;
  for (Conn* c : all) close_conn(*c);
  control_.clear();
  data_peers_.clear();
  if (retry_timer_open_) {
    uv_timer_stop(&retry_timer_);
    uv_close(reinterpret_cast<uv_handle_t*>(&retry_timer_), nullptr);
    retry_timer_open_ = false;
  }
  if (listening_) {
    uv_poll_stop(&listen_poll_);
    uv_close(reinterpret_cast<uv_handle_t*>(&listen_poll_), nullptr);
    listening_ = false;
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
}

}  // namespace plexus::daemon
