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
  return TcpDelivery{static_cast<double>(info.tcpi_delivery_rate),
                     info.tcpi_delivery_rate_app_limited != 0, static_cast<double>(info.tcpi_rtt),
                     info.tcpi_notsent_bytes};
}

}  // namespace plexus::transports
