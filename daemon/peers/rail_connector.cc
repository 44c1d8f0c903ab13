// The data connections to a peer: one per rail (and its latency-class twin where
// configured), backups across rails where a route joins them, and dialling again with
// exponential backoff and jitter.
#include "daemon/peers/rail_connector.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "daemon/peers/dial_backoff.h"

namespace plexus::daemon {

namespace {

// Appended to a rail's key to name its latency-class twin.
constexpr const char* kLatencyRailSuffix = "+latency";
// How often a backup with no route between the rails is looked at again.
constexpr std::chrono::milliseconds kUnroutedBackupRecheck{10000};
// The least a redial's connect is given however short the grace: well past a SYN's round
// trip in any one data centre.
constexpr std::chrono::milliseconds kLeastRedialConnect{100};

}  // namespace

RailConnector::RailConnector(uv_loop_t* loop, Settings settings, Hooks hooks)
    : loop_(loop),
      settings_(std::move(settings)),
      hooks_(std::move(hooks)),
      hurried_cap_(settings_.grace.count() > 0
                       ? std::min(settings_.reconnect_max, settings_.grace / 8)
                       : settings_.reconnect_max),
      // Any dial of a linked peer (a redial, or a backup or twin opened later): a SYN lost
      // while a NIC was down is followed by a new connect within a quarter of the grace, not
      // by TCP's own resends 1 s and 3 s later.
      linked_connect_(settings_.grace.count() > 0
                          ? std::clamp(settings_.grace / 4, kLeastRedialConnect, kMostRedialConnect)
                          : std::chrono::milliseconds(0)),
      rng_(settings_.jitter_seed) {}

void RailConnector::start(bool backups) {
  backups_ = backups;
  timer_.open(loop_, [this] { run_retries(); });
}

std::vector<Rail> RailConnector::rails_to(const std::vector<std::string>& addresses) const {
  std::vector<Rail> rails = plan_rails(settings_.nics, addresses);
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

bool RailConnector::openable(const Rail& rail, std::optional<RouteTable>& routes) const {
  if (!rail.backup) return true;
  if (!routes) routes = hooks_.routes();
  return routes->covers(rail.nic, rail.peer_addresses.front());
}

void RailConnector::dial(uint64_t instance, const Rail& rail) {
  const uint64_t id = ++dials_;
  Peer& peer = peers_[instance];
  peer.dials[rail.key] = Dialing{.dial = id, .backup = rail.backup};
  // A peer not yet linked keeps the dialler's longer limit: a loaded listener is not a
  // failure.
  hooks_.dial(instance, rail, id,
              peer.linked ? linked_connect_ : std::chrono::milliseconds(0));  // failure recorded
}

void RailConnector::connect(uint64_t instance, const std::vector<std::string>& addresses,
                            std::optional<Forming> forming) {
  {
    Peer& peer = peers_[instance];
    peer.addresses = addresses;
    if (forming && (!peer.until || *peer.until < forming->deadline)) peer.until = forming->deadline;
  }
  // A rail may fail at once (no route): dial_failed then only records it, and whether the
  // peer has no hope left is decided after every rail was tried.
  opening_ = instance;
  opening_failed_.clear();
  std::vector<std::string> unrouted;  // backups with no route between the rails
  std::optional<RouteTable> routes;
  for (const Rail& rail : rails_to(addresses)) {
    Peer& peer = peers_[instance];
    if (peer.dials.count(rail.key) != 0) continue;
    auto retry = peer.retries.find(rail.key);
    if (retry != peer.retries.end() && retry->second.scheduled) continue;  // dialled when due
    if (!openable(rail, routes)) {
      unrouted.push_back(rail.key);
      continue;
    }
    dial(instance, rail);
  }
  opening_ = 0;
  std::vector<std::string> failed = std::move(opening_failed_);
  opening_failed_.clear();
  auto it = peers_.find(instance);
  if (it == peers_.end()) return;
  if (hopeful(it->second)) {
    // The peer may yet be linked: the rails that failed at once are tried again later.
    for (const std::string& key : failed) schedule_retry(instance, key);
    for (const std::string& key : unrouted) schedule_retry(instance, key, kUnroutedBackupRecheck);
    return;
  }
  retry_or_give_up(instance, failed);
}

bool RailConnector::hopeful(const Peer& peer) { return peer.linked || !peer.dials.empty(); }

void RailConnector::retry_or_give_up(uint64_t instance, const std::vector<std::string>& keys) {
  auto it = peers_.find(instance);
  if (it == peers_.end()) return;
  if (!it->second.refused && it->second.until) {
    // Being formed: a timeout or an unfinished handshake is load (a listener's queue, a busy
    // control thread), not a daemon that is gone. Dialled again while the deadline allows.
    const Clock::time_point until = *it->second.until;
    bool retrying = false;
    for (const std::string& key : keys) {
      retrying |= schedule_retry(instance, key, std::chrono::milliseconds(0), until);
    }
    if (retrying) return;
  }
  const std::string reason = it->second.last_error;
  peers_.erase(it);
  if (hooks_.failed) hooks_.failed(instance, reason);
}

void RailConnector::dial_failed(uint64_t instance, const std::string& key, uint64_t dial,
                                const std::string& reason, bool refused) {
  auto it = peers_.find(instance);
  if (it == peers_.end()) return;
  Peer& peer = it->second;
  auto dialing = peer.dials.find(key);
  if (dialing == peer.dials.end() || dialing->second.dial != dial) return;
  const bool backup = dialing->second.backup;
  peer.dials.erase(dialing);
  if (!backup || peer.last_error.empty()) peer.last_error = reason;
  if (!backup) peer.refused = refused;
  if (instance == opening_) {
    opening_failed_.push_back(key);  // connect() decides once every rail was tried
  } else if (hopeful(peer)) {
    schedule_retry(instance, key);  // the peer is, or may yet be, linked
  } else {
    retry_or_give_up(instance, {key});
  }
}

void RailConnector::dial_crossed(uint64_t instance, const std::string& key, uint64_t dial) {
  auto it = peers_.find(instance);
  if (it == peers_.end()) return;
  auto dialing = it->second.dials.find(key);
  if (dialing == it->second.dials.end() || dialing->second.dial != dial) return;
  it->second.dials.erase(dialing);
  it->second.retries.erase(key);
  if (instance == opening_) return;  // connect() forgets it below if nothing is left
  if (it->second.linked || !it->second.dials.empty()) return;
  // The peer's own connection comes instead. Its "keeps" may be stale (it lost the link and
  // has not heard yet): while the engine waits, the rail is dialled again (refused again for
  // as long as the peer does keep it; accepted() stops it once the peer's connection came).
  if (it->second.until &&
      schedule_retry(instance, key, std::chrono::milliseconds(0), *it->second.until)) {
    return;
  }
  peers_.erase(it);
}

void RailConnector::accepted(uint64_t instance) {
  auto it = peers_.find(instance);
  if (it == peers_.end()) return;
  it->second.pathless_until = {};  // the peer's own connection is a path again
  if (it->second.linked) return;
  it->second.retries.clear();
  it->second.until.reset();
  if (it->second.dials.empty()) peers_.erase(it);
}

void RailConnector::dial_established(uint64_t instance, const std::string& key) {
  auto it = peers_.find(instance);
  if (it == peers_.end()) return;
  it->second.dials.erase(key);
  it->second.retries.erase(key);
  it->second.linked = true;
  it->second.pathless_until = {};
}

bool RailConnector::redialing(uint64_t instance, const std::string& key) const {
  auto peer = peers_.find(instance);
  if (peer == peers_.end()) return false;
  auto retry = peer->second.retries.find(key);
  return retry != peer->second.retries.end() && retry->second.attempts > 1;
}

void RailConnector::lost(uint64_t instance, const std::string& rail_key, bool pathless) {
  auto it = peers_.find(instance);
  if (it == peers_.end()) return;
  Peer& peer = it->second;
  const Clock::time_point now = this->now();
  if (pathless && hurried_cap_ < settings_.reconnect_max && now >= peer.pathless_until) {
    // For a grace period at most: by then a path came back, or the link is lost and
    // forgotten. Bounded, so that a late report (the engine adds a path the control thread
    // already counted as found after a loss it reports) cannot hurry the peer for good.
    peer.pathless_until = now + settings_.grace;
    // Rails already waiting (lost while another path carried) come within the hurried cap.
    for (auto& [key, retry] : peer.retries) {
      if (!retry.scheduled) continue;
      retry.due = std::min(retry.due,
                           now + dial_backoff(retry.attempts, retry_cap(peer, retry, now), rng_));
    }
    arm_timer();
  }
  if (rail_key.empty()) return;
  peer.retries[rail_key].hurried_until = now + settings_.grace;
  if (peer.dials.count(rail_key) != 0) return;
  schedule_retry(instance, rail_key);
}

std::chrono::milliseconds RailConnector::retry_cap(const Peer& peer, const Retry& retry,
                                                   Clock::time_point now) const {
  const bool hurried = now < peer.pathless_until || now < retry.hurried_until;
  return hurried ? hurried_cap_ : settings_.reconnect_max;
}

void RailConnector::nic_up(const std::string& nic) {
  bool any = false;
  for (auto& [instance, peer] : peers_) {
    for (const Rail& rail : rails_to(peer.addresses)) {
      if (!rail.nic.empty() && rail.nic != nic) continue;  // the fallback may use any NIC
      auto retry = peer.retries.find(rail.key);
      if (retry == peer.retries.end() || !retry->second.scheduled) continue;
      retry->second.due = now();
      any = true;
    }
  }
  if (any) run_retries();
}

void RailConnector::forget(uint64_t instance) {
  auto it = peers_.find(instance);
  if (it == peers_.end()) return;
  // Rails still being dialled finish or fail on their own; a late one makes a new link.
  it->second.retries.clear();
  it->second.linked = false;
  it->second.pathless_until = {};
  it->second.until.reset();
  if (it->second.dials.empty()) peers_.erase(it);
}

bool RailConnector::schedule_retry(uint64_t instance, const std::string& key,
                                   std::chrono::milliseconds at_least,
                                   std::optional<Clock::time_point> before) {
  Peer& peer = peers_[instance];
  Retry& retry = peer.retries[key];
  if (retry.scheduled) return true;
  const Clock::time_point now = this->now();
  const Clock::time_point due =
      now + std::max(at_least, dial_backoff(retry.attempts, retry_cap(peer, retry, now), rng_));
  if (before && due >= *before) return false;
  ++retry.attempts;
  retry.scheduled = true;
  retry.due = due;
  // Armed for this or earlier already: no scan of every retry (a NIC's failure schedules
  // one per rail of every linked peer).
  if (!armed_for_ || due < *armed_for_) arm_timer();
  return true;
}

void RailConnector::arm_timer() {
  armed_for_.reset();
  if (!timer_.is_open()) return;
  std::optional<Clock::time_point> next;
  for (const auto& [instance, peer] : peers_) {
    for (const auto& [key, retry] : peer.retries) {
      if (retry.scheduled && (!next || retry.due < *next)) next = retry.due;
    }
  }
  if (!next) {
    timer_.stop();
    return;
  }
  const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(*next - now());
  timer_.start(static_cast<uint64_t>(std::max<int64_t>(wait.count(), 0)), 0);
  armed_for_ = next;
}

void RailConnector::run_retries() {
  armed_for_.reset();  // fired, or called before it fires: arm_timer works it out again
  const Clock::time_point now = this->now();
  std::vector<std::pair<uint64_t, std::string>> due;
  for (auto& [instance, peer] : peers_) {
    for (auto& [key, retry] : peer.retries) {
      if (retry.scheduled && retry.due <= now) {
        retry.scheduled = false;
        due.emplace_back(instance, key);
      }
    }
  }
  std::optional<RouteTable> routes;
  for (const auto& [instance, key] : due) {
    auto it = peers_.find(instance);
    if (it == peers_.end() || it->second.dials.count(key) != 0) continue;
    for (const Rail& rail : rails_to(it->second.addresses)) {
      if (rail.key != key) continue;
      if (!openable(rail, routes)) {  // no route between the rails (yet): nothing is sent
        schedule_retry(instance, key, kUnroutedBackupRecheck);
        break;
      }
      spdlog::debug("{} peer {:016x} over {} (attempt {})",
                    it->second.retries[key].attempts == 0 ? "dialling" : "reconnecting to",
                    instance, key.empty() ? "any NIC" : key, it->second.retries[key].attempts);
      dial(instance, rail);
      break;
    }
  }
  arm_timer();
}

void RailConnector::close() {
  peers_.clear();
  armed_for_.reset();
  timer_.close();
}

}  // namespace plexus::daemon
