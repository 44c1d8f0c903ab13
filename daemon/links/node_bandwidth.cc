// The node's bandwidth figure from its paths' counters and rates, and its peers' reports.
#include "daemon/links/node_bandwidth.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <utility>

#include "common/upper_median.h"

namespace plexus::daemon {

void NodeBandwidth::read_path(uint64_t peer, uint64_t path, const std::string& nic,
                              const std::optional<transports::PathDelivery>& delivery) {
  auto it = seen_.find(path);
  if (!delivery || delivery->network_busy_us == 0) {
    if (it != seen_.end()) it->second.tick = ticks_;
    return;
  }
  auto reporter = peers_.find(peer);
  const bool paced = reporter != peers_.end() && reporter->second.paces;
  if (it != seen_.end()) {
    const Seen& seen = it->second;
    if (!paced && delivery->network_busy_us >= seen.busy_us &&
        delivery->acked_bytes >= seen.acked &&
        (delivery->network_busy_us > seen.busy_us || delivery->acked_bytes > seen.acked)) {
      growth_.push_back({path, nic, delivery->acked_bytes - seen.acked,
                         delivery->network_busy_us - seen.busy_us});
    }
  }
  seen_[path] = {delivery->acked_bytes, delivery->network_busy_us, ticks_};
}

void NodeBandwidth::end_tick(Clock::time_point now) {
  std::erase_if(seen_, [this](const auto& entry) { return entry.second.tick != ticks_; });
  ++ticks_;
  std::vector<NicPace::PathGrowth> growth = std::exchange(growth_, {});
  if (sampled_at_ != Clock::time_point{}) {
    nic_pace_.add_tick(std::chrono::duration<double, std::micro>(now - sampled_at_).count(),
                       std::move(growth));
  }
  sampled_at_ = now;
}

double NodeBandwidth::own(std::span<const ActivePath> active) const {
  std::set<std::string> live_nics;
  std::map<uint64_t, double> uncounted;  // per peer, over paths without transport counters
  for (const ActivePath& path : active) {
    if (seen_.count(path.path) != 0) {
      live_nics.insert(path.nic);
    } else if (!path.latency) {
      uncounted[path.peer] += path.capacity_bytes_per_s;
    }
  }
  double total = 0;  // the largest per-peer sum over paths without counters
  for (const auto& [peer, sum] : uncounted) total = std::max(total, sum);
  for (const std::string& nic : live_nics) {
    auto it = nic_measures_.find(nic);
    if (it != nic_measures_.end()) total += it->second;
  }
  return total;
}

double NodeBandwidth::report(std::span<const ActivePath> active, Clock::time_point now) {
  // A path to a peer that reports itself much slower than the median node is paced by
  // that peer (its acknowledgements wait behind its own full queue): no evidence about
  // this node's NICs either way. Against the median, not this node's own figure: paths
  // paced by a slow peer pull this node's figure down too, until the slow peer no longer
  // looks slow against it.
  std::vector<double> figures{own(active)};
  for (const auto& [id, report] : peers_) figures.push_back(peer(id, now));
  const double median = upper_median_of_positive(figures);
  for (auto& [id, report] : peers_) {
    const double theirs = peer(id, now);
    report.paces = theirs > 0 && theirs < kSlowerPeer * median;
  }
  const double wall_us =
      measured_at_ == Clock::time_point{}
          ? 0.0
          : std::chrono::duration<double, std::micro>(now - measured_at_).count();
  measured_at_ = now;
  for (const auto& [nic, sample] : nic_pace_.take()) {
    if (sample.pressed_us < kMinBusyUs || wall_us <= 0) continue;
    double& rate = nic_measures_[nic];
    spdlog::debug(
        "bandwidth of {}: {:.1f} MB/s over {:.0f} of {:.0f} us pressed; measure was "
        "{:.1f} MB/s",
        nic, sample.bytes_per_s / 1e6, sample.pressed_us, wall_us, rate / 1e6);
    if (sample.pressed_us >= kPressedShare * wall_us) {
      // Pressed most of the time: the network set the pace, and the measure may fall.
      rate = rate > 0 ? (1.0 - kRateWeight) * rate + kRateWeight * sample.bytes_per_s
                      : sample.bytes_per_s;
    } else {
      // Pressed now and then (a light load, a window reopening after idle): a floor only.
      rate = std::max(rate, sample.bytes_per_s);
    }
  }
  return own(active);
}

void NodeBandwidth::peer_reported(uint64_t peer, uint64_t bytes_per_s, Clock::time_point now) {
  PeerReport& report = peers_[peer];
  // Past 10 TB/s it is no measure (a bug or a corrupted frame): unknown.
  report.bytes_per_s = bytes_per_s > 10'000'000'000'000ull ? 0.0 : static_cast<double>(bytes_per_s);
  report.at = now;
}

double NodeBandwidth::peer(uint64_t peer, Clock::time_point now) const {
  auto it = peers_.find(peer);
  if (it == peers_.end() || now - it->second.at > kStaleReport) return 0;
  return it->second.bytes_per_s;
}

void NodeBandwidth::forget_peer(uint64_t peer) { peers_.erase(peer); }

}  // namespace plexus::daemon
