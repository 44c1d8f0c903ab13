// Two PeerLinks in one process joined by a loopback TCP path: `a` knows `b` as peer 2, `b`
// knows `a` as peer 1, over one path on "rail0"; and the loop that turns both until a
// condition holds (false after 10 s). A Side is any struct with a PeerLinks `links`.
#pragma once

#include <chrono>

#include "daemon/links/peer_links.h"
#include "tests/unit/tcp_pair.h"
#include "transports/tcp/tcp_path.h"

namespace plexus::test {

template <typename Side>
void connect_pair(Side& a, Side& b) {
  auto [fa, fb] = tcp_pair();
  a.links.add(2, "b", plexus::transports::tcp_path_opener(fa), "rail0", false, false, "");
  b.links.add(1, "a", plexus::transports::tcp_path_opener(fb), "rail0", false, false, "");
}

template <typename Side, typename Done>
bool pump_pair(Side& a, Side& b, Done done) {
  using Clock = plexus::transports::ReliableChannel::Clock;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (Clock::now() > deadline) return false;
    const auto now = Clock::now();
    a.links.tick(now);
    b.links.tick(now);
    a.links.poll(1);
    b.links.poll(1);
  }
  return true;
}

}  // namespace plexus::test
