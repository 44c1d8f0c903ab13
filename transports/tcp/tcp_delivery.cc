// Own file: the delivery-rate fields are in <linux/tcp.h>'s tcp_info, which clashes with
// <netinet/tcp.h>.
#include "transports/tcp/tcp_delivery.h"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>

namespace plexus::transports {

std::optional<TcpDelivery> tcp_delivery(int fd) {
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0 ||
      len < offsetof(tcp_info, tcpi_delivery_rate) + sizeof(info.tcpi_delivery_rate)) {
    return std::nullopt;
  }
  TcpDelivery d{static_cast<double>(info.tcpi_delivery_rate),
                info.tcpi_delivery_rate_app_limited != 0, static_cast<double>(info.tcpi_rtt),
                info.tcpi_notsent_bytes};
  if (len >= offsetof(tcp_info, tcpi_sndbuf_limited) + sizeof(info.tcpi_sndbuf_limited)) {
    d.acked_bytes = info.tcpi_bytes_acked;
    const uint64_t held = info.tcpi_rwnd_limited + info.tcpi_sndbuf_limited;
    d.network_busy_us = info.tcpi_busy_time > held ? info.tcpi_busy_time - held : 0;
  }
  return d;
}

}  // namespace plexus::transports
