// The kernel's view of a TCP connection's path latency, for the cost model: the smallest
// round trip it has measured (a moving window, as TCP keeps it for its own use). Unlike an
// application-level ping, it is not inflated by a busy peer's scheduling.
#pragma once

namespace plexus::transports {

// Seconds, or 0 when the socket is not TCP or the kernel has no sample yet.
double kernel_min_round_trip_s(int fd);

}  // namespace plexus::transports
