// Only <linux/tcp.h> has tcpi_min_rtt (glibc's struct tcp_info stops short of it), and
// the two headers cannot be included together: hence a file of its own.
#include "transports/tcp/tcp_path_latency.h"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>

namespace plexus::transports {

double kernel_min_round_trip_s(int fd) {
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return 0;
  // An older kernel fills less of the struct than this header describes.
  if (len < offsetof(tcp_info, tcpi_min_rtt) + sizeof(info.tcpi_min_rtt)) return 0;
  // The kernel's "no sample yet" is ~0U.
  if (info.tcpi_min_rtt == 0 || info.tcpi_min_rtt == ~0U) return 0;
  return static_cast<double>(info.tcpi_min_rtt) * 1e-6;
}

}  // namespace plexus::transports
