// The kernel's view of a TCP connection's pace (TCP_INFO): its latest delivery-rate sample
// (bytes the receiver acknowledged per second over the last round trip), whether the sender
// had too little data queued for the sample to reflect the path, and the smoothed RTT.
// Queued data behind a slow link (a shaped or degraded NIC) shows here at once, where
// user-space counters only see a socket buffer taking bytes in bursts.
#pragma once

#include <cstdint>
#include <optional>

namespace plexus::transports {

struct TcpDelivery {
  double rate_bytes_per_s = 0;
  bool app_limited = false;
  double rtt_us = 0;
  uint64_t unsent_bytes = 0;  // queued in the socket, not yet sent
  // Since the connection opened: bytes the peer acknowledged, and the microseconds the
  // network set the pace (data in flight, limited neither by the receiver's window nor by
  // too little in the send buffer). Their ratio over a span is what the path carries when
  // pressed, free of the delivery-rate sample's round-trip noise. 0 on kernels without them.
  // The bytes include those acknowledged while the window or buffer held the sender back, so
  // a path limited part of the time reads somewhat high; the busy time counts in jiffies.
  // NodeLinks lets such readings only raise its figure unless the NIC was pressed.
  uint64_t acked_bytes = 0;
  uint64_t network_busy_us = 0;
};

// Nothing when `fd` is not a TCP socket (or the kernel has no delivery rate).
std::optional<TcpDelivery> tcp_delivery(int fd);

}  // namespace plexus::transports
