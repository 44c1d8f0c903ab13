// What a reliable channel counts (ReliableChannel::counters(), reported per peer by the
// daemon's links). ReliableChannel owns them; the parts of the channel that see an event add
// to them (ChannelDispatcher: frames sent and resent; ChannelDelivery: duplicates; the
// channel itself: acknowledgements, heartbeats, path failures and failbacks, silent ticks).
// Single-threaded, as the channel.
#pragma once

#include <cstdint>

namespace plexus::transports {

struct ChannelCounters {
  uint64_t frames_sent = 0;  // first copies
  uint64_t frames_resent = 0;
  uint64_t bytes_resent = 0;
  uint64_t duplicates_dropped = 0;
  uint64_t acks_sent = 0;
  uint64_t heartbeats_sent = 0;
  uint64_t path_failures = 0;
  uint64_t failbacks = 0;  // paths taken back after probation
  // Ticks at which a path had been silent past the timeout while its transport still
  // heard the peer (a slow peer daemon, not a broken path): not failed for it.
  uint64_t slow_peer_ticks = 0;
  // Ticks at which the only live path was silent past the timeout, within the grace.
  uint64_t last_path_silent_ticks = 0;
};

}  // namespace plexus::transports
