// The data connections to a peer: one per rail (and its latency-class twin where
// configured), backups across rails where a route joins them, reconnection with exponential
// backoff, and which rail an accepted connection is.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "daemon/peers/peer_conn.h"
#include "transports/tcp/tcp_traffic_class.h"

namespace plexus::daemon {

using namespace peer_detail;  // the helpers this room's files share (peer_conn.h)

std::vector<Rail> PeerServer::rails_to(const std::vector<std::string>& addresses) const {
  std::vector<Rail> rails = plan_rails(local_nics_, addresses);
  if (!backups_) std::erase_if(rails, [](const Rail& rail) { return rail.backup; });
  if (settings_.latency_connections) {
    const size_t planned = rails.size();
    for (size_t i = 0; i < planned; ++i) {
      if (rails[i].backup) continue;
      Rail twin = rails[i];  // a copy: push_back may move the vector
      twin.key += kLatencyRailSuffix;
      twin.latency = true;
      rails.push_back(std::move(twin));
    }
  }
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

void PeerServer::rail_lost(uint64_t instance, const std::string& nic, const std::string& remote,
                           bool latency) {
  control_path_lost(instance, nic, remote);
  auto it = data_peers_.find(instance);
  if (it == data_peers_.end()) return;
  // The twins share their NIC and address: the first match is the rail itself.
  const std::string rail = rail_key_of(rails_to(it->second.addresses), nic, remote) +
                           (latency ? kLatencyRailSuffix : "");
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

void PeerServer::mark_latency(int fd, const std::string& address) const {
  const std::string error = transports::mark_latency_class(fd, settings_.latency_dscp);
  if (!error.empty()) {
    spdlog::warn("the latency class's connection to {} keeps the bulk data's priority: {}", address,
                 error);
  }
}

}  // namespace plexus::daemon
