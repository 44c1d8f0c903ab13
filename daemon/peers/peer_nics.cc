#include "daemon/peers/peer_nics.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include "common/socket_address.h"

namespace plexus::daemon {
namespace {

uint32_t interface_speed_mbps(const std::string& name) {
  std::ifstream in("/sys/class/net/" + name + "/speed");
  long speed = 0;
  if (in >> speed && speed > 0) return static_cast<uint32_t>(speed);
  return 0;
}

}  // namespace

std::vector<PeerNic> find_peer_nics(const std::string& listen,
                                    const std::vector<std::string>& filter) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  if (!common::parse_address(listen, &addr, &len)) {
    throw std::runtime_error("peer listen address '" + listen +
                             "' is not IP:PORT (e.g. 0.0.0.0:7355 or 198.18.0.1:7355)");
  }
  const auto* listen_in = reinterpret_cast<const sockaddr_in*>(&addr);
  const bool any = addr.ss_family == AF_INET && listen_in->sin_addr.s_addr == htonl(INADDR_ANY);
  std::vector<PeerNic> nics;
  std::vector<std::string> up_names;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) == 0) {
    for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
      if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
      up_names.push_back(i->ifa_name);
      const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      const bool mine =
          any || (addr.ss_family == AF_INET && in->sin_addr.s_addr == listen_in->sin_addr.s_addr);
      const bool chosen =
          filter.empty() || std::find(filter.begin(), filter.end(), i->ifa_name) != filter.end();
      if (!mine || !chosen) continue;
      char host[INET_ADDRSTRLEN];
      ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
      const uint32_t mask =
          i->ifa_netmask != nullptr
              ? ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr)
              : 0xFFFFFFFFu;
      nics.push_back({LocalNic{i->ifa_name, ntohl(in->sin_addr.s_addr), mask}, host,
                      interface_speed_mbps(i->ifa_name)});
    }
    ::freeifaddrs(list);
  }
  for (const std::string& wanted : filter) {
    const bool found = std::any_of(nics.begin(), nics.end(),
                                   [&](const PeerNic& n) { return n.rail.name == wanted; });
    if (found) continue;
    std::string names;
    for (const auto& n : up_names) names += (names.empty() ? "" : ", ") + n;
    throw std::runtime_error("--nics names " + wanted +
                             ", which is not an up interface with an IPv4 address" +
                             (any ? "" : " that --peer-listen " + listen + " covers") +
                             " (up: " + (names.empty() ? "none" : names) + ")");
  }
  return nics;
}

}  // namespace plexus::daemon
