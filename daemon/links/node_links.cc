// NodeLinks: its parts wired together, and the tick.
#include "daemon/links/node_links.h"

#include <limits>

namespace plexus::daemon {

NodeLinks::NodeLinks(Handler handler, uint32_t chunk_bytes,
                     transports::ReliableChannel::Settings channel, Telemetry telemetry,
                     PeerLinks::Retirement retirement)
    : published_(telemetry),
      nics_(NicEvents::Hooks{
          .nic_down = [this](const std::string& nic,
                             const std::string& how) { peers_.nic_down(nic, how); },
          .nic_up = handler.on_nic_up,
      }),
      peers_(std::move(handler),
             PeerLinks::Hooks{
                 .peer_rate =
                     [this](uint64_t peer, uint64_t bytes_per_s) {
                       bandwidth_.peer_reported(peer, bytes_per_s, Clock::now());
                     },
                 .nic_readable = [this] { nics_.on_readable(); },
                 .peer_lost = [this](uint64_t peer) { bandwidth_.forget_peer(peer); },
             },
             PeerLinks::Parts{
                 .nics = &nics_,
                 .flow_policies = &flow_policies_,
                 .published = &published_,
             },
             chunk_bytes, channel, retirement),
      sender_(peers_, chunk_bytes, channel) {}

bool NodeLinks::poll(int timeout_ms) {
  if (!active()) return false;
  if (peers_.size() != 0 && Clock::now() >= next_tick()) {
    tick(Clock::now());
    if (!active()) return true;
  }
  return peers_.poll(timeout_ms);
}

int NodeLinks::sleep_ms(transports::ReliableChannel::TimePoint now) const {
  if (peers_.size() == 0) return -1;
  const auto next = next_tick();
  if (next <= now) return 0;
  // Rounded up: woken a little late, not a little early for nothing.
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
  return static_cast<int>(std::min<int64_t>(ms, std::numeric_limits<int>::max()));
}

void NodeLinks::tick(transports::ReliableChannel::TimePoint now) {
  last_tick_ = now;
  peers_.tick(now);
  const bool busy = peers_.busy();
  if (now - published_at_ >= kSnapshotEvery && (busy || !published_idle_)) {
    peers_.publish();
    published_at_ = now;
    published_idle_ = !busy;
  }
  // The transport counters of the paths with traffic, and each NIC's pressed time.
  peers_.read_counters(bandwidth_);
  bandwidth_.end_tick(Clock::now());
  if (busy && now - reported_at_ >= kBandwidthReportEvery) {
    reported_at_ = now;
    const bool all = now - refreshed_at_ >= kBandwidthRefreshEvery;
    if (all) refreshed_at_ = now;
    peers_.send_node_rate(bandwidth_.report(peers_.active_paths(), Clock::now()), all);
  }
}

}  // namespace plexus::daemon
