#include "transports/tcp/tcp_traffic_class.h"

#include <netinet/in.h>
#include <netinet/ip.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace plexus::transports {

std::string mark_latency_class(int fd, uint32_t dscp) {
  if (dscp > kMaxDscp) return "DSCP " + std::to_string(dscp) + " is not 0-63";
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
    return std::string("getsockname: ") + std::strerror(errno);
  }
  const int tos = static_cast<int>(dscp << 2);
  const bool v6 = local.ss_family == AF_INET6;
  if (::setsockopt(fd, v6 ? IPPROTO_IPV6 : IPPROTO_IP, v6 ? IPV6_TCLASS : IP_TOS, &tos,
                   sizeof(tos)) != 0) {
    return std::string(v6 ? "IPV6_TCLASS " : "IP_TOS ") + std::to_string(tos) + ": " +
           std::strerror(errno);
  }
  // An IPv6 socket may carry IPv4 (a v4-mapped peer): its packets take IP_TOS. Refused on
  // a v6-only socket, which needs none.
  if (v6) ::setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
  const int priority = kLatencySocketPriority;
  if (::setsockopt(fd, SOL_SOCKET, SO_PRIORITY, &priority, sizeof(priority)) != 0) {
    return "SO_PRIORITY " + std::to_string(priority) + ": " + std::strerror(errno);
  }
  return {};
}

}  // namespace plexus::transports
