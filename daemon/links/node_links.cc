// NodeLinks: its parts wired together, and the tick.
#include "daemon/links/node_links.h"

namespace plexus::daemon {

using Clock = transports::ReliableChannel::Clock;

NodeLinks::NodeLinks(Handler handler, uint32_t chunk_bytes,
                     transports::ReliableChannel::Settings channel, Telemetry telemetry)
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
             chunk_bytes, channel),
      sender_(peers_, chunk_bytes, channel) {}

bool NodeLinks::poll(int timeout_ms) {
  if (!active()) return false;
  if (peers_.size() != 0 &&
      Clock::now() - last_tick_ >= std::chrono::milliseconds(PeerLinks::kTickMs)) {
    tick(Clock::now());
    if (!active()) return true;
  }
  return peers_.poll(timeout_ms);
}

void NodeLinks::tick(transports::ReliableChannel::TimePoint now) {
  last_tick_ = now;
  peers_.tick(now);
  if (++ticks_ % kSnapshotEveryTicks == 0) peers_.publish();
  // Every tick: each path's transport counters, and each NIC's pressed time.
  peers_.read_counters(bandwidth_);
  bandwidth_.end_tick(Clock::now());
  if (ticks_ % kBandwidthReportEveryTicks == 0) {
    peers_.send_node_rate(bandwidth_.report(peers_.active_paths(), Clock::now()));
  }
}

}  // namespace plexus::daemon
