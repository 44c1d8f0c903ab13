// Which of this node's interfaces carry traffic to peer daemons: found once, at start-up,
// before anything that depends on their number (the reliable channel's "auto" setting, the
// rails the peer server opens) is built.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/peers/rail_plan.h"

namespace plexus::daemon {

struct PeerNic {
  LocalNic rail;             // name, IPv4 address and mask: what plan_rails needs
  std::string address_text;  // the IPv4 address as text
  uint32_t speed_mbps = 0;   // /sys/class/net/NAME/speed; 0 when unknown
};

// The interfaces that are up, not loopback, with an IPv4 address that `listen` ("ip:port")
// covers (0.0.0.0: every one), and that `filter` names (empty: every one), in the order
// the system lists them. Throws std::runtime_error with a sentence when `listen` is not
// IP:PORT or `filter` names an interface that is not one of those.
std::vector<PeerNic> find_peer_nics(const std::string& listen,
                                    const std::vector<std::string>& filter);

}  // namespace plexus::daemon
