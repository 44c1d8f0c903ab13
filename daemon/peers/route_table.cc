#include "daemon/peers/route_table.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/socket_address.h"

namespace plexus::daemon {

RouteTable RouteTable::read() {
  std::ifstream file("/proc/net/route");
  return parse(file);
}

RouteTable RouteTable::parse(std::istream& text) {
  RouteTable table;
  std::string line;
  std::getline(text, line);  // the header
  auto hex = [](const std::string& field) {
    return static_cast<uint32_t>(std::strtoul(field.c_str(), nullptr, 16));
  };
  // Iface Destination Gateway Flags RefCnt Use Metric Mask ...: addresses are the kernel's
  // network-order words printed in hex.
  while (std::getline(text, line)) {
    std::istringstream fields(line);
    std::string nic, destination, gateway, flags, refcnt, use, metric, mask;
    if (!(fields >> nic >> destination >> gateway >> flags >> refcnt >> use >> metric >> mask)) {
      continue;
    }
    if ((hex(flags) & 0x1) == 0) continue;  // RTF_UP
    table.routes_.push_back({nic, hex(destination), hex(mask)});
  }
  return table;
}

bool RouteTable::covers(const std::string& nic, const std::string& address) const {
  in_addr wanted{};
  sockaddr_storage addr{};
  socklen_t len = 0;
  if (common::parse_address(address, &addr, &len) && addr.ss_family == AF_INET) {
    wanted = reinterpret_cast<sockaddr_in*>(&addr)->sin_addr;
  } else if (::inet_pton(AF_INET, address.c_str(), &wanted) != 1) {
    return false;
  }
  for (const Route& route : routes_) {
    if (route.nic == nic && (wanted.s_addr & route.mask) == route.network) return true;
  }
  return false;
}

}  // namespace plexus::daemon
