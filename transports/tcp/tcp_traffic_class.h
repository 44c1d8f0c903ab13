// Marks a connection as the latency class's, so that queues between the daemon and the
// peer can tell its packets from bulk data: the socket priority (the host's qdisc:
// pfifo_fast and prio put priority 6 in their first band, mqprio maps it to a traffic
// class) and the IP DSCP (switches map it to a priority queue; docs/NETWORK.md, "Job
// classes on the wire").
#pragma once

#include <cstdint>
#include <string>

namespace plexus::transports {

// Linux's TC_PRIO_INTERACTIVE: the highest priority a process may set without
// CAP_NET_ADMIN, and the first band of the default qdisc.
inline constexpr int kLatencySocketPriority = 6;
inline constexpr uint32_t kMaxDscp = 63;

// Sets DSCP `dscp` (IPv4 TOS or IPv6 traffic class, ECN bits clear) and then the socket
// priority on `fd` (in that order: setting the TOS resets the priority). Returns "" or why
// not.
std::string mark_latency_class(int fd, uint32_t dscp);

}  // namespace plexus::transports
