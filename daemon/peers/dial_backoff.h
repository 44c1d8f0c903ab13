// When a data connection is dialled again: exponential backoff with jitter. Randomised so
// that the daemons of a cluster, which all see the same failure at the same moment, do not
// all dial again at the same moment (a burst of SYNs and
// handshakes that a listener's queue or a control thread cannot take). Pure: the caller
// owns the random generator (RailConnector seeds it, so that tests are deterministic).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>

namespace plexus::daemon {

// First wait of the backoff; it doubles with every attempt, up to the caller's cap.
inline constexpr std::chrono::milliseconds kDialBackoffBase{100};

// The wait before attempt `attempt` (0: the first retry): w = min(cap, 100 ms x 2^attempt),
// drawn uniformly from [w/2, w]. Half the wait is kept as a floor (not "full jitter" down to
// 0): a peer that keeps failing is still dialled at most about once per cap/2, and the
// other half is enough to take apart retries that fell due together.
inline std::chrono::milliseconds dial_backoff(int attempt, std::chrono::milliseconds cap,
                                              std::mt19937_64& rng) {
  const int64_t doubled = kDialBackoffBase.count() << std::clamp(attempt, 0, 16);
  const int64_t wait = std::max<int64_t>(0, std::min<int64_t>(cap.count(), doubled));
  std::uniform_int_distribution<int64_t> draw(wait / 2, wait);
  return std::chrono::milliseconds(draw(rng));
}

}  // namespace plexus::daemon
