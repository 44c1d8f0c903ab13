#include "daemon/peers/rail_plan.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>

#include "common/socket_address.h"

namespace plexus::daemon {
namespace {

bool in_subnet(const LocalNic& nic, uint32_t address) {
  return (address & nic.mask) == (nic.address & nic.mask);
}

}  // namespace

std::vector<Rail> plan_rails(const std::vector<LocalNic>& nics,
                             const std::vector<std::string>& peer_addresses) {
  std::vector<Rail> rails;
  for (const LocalNic& nic : nics) {
    for (const std::string& text : peer_addresses) {
      sockaddr_storage addr{};
      socklen_t len = 0;
      if (!common::parse_address(text, &addr, &len) || addr.ss_family != AF_INET) continue;
      if (!in_subnet(nic, ntohl(reinterpret_cast<sockaddr_in*>(&addr)->sin_addr.s_addr))) continue;
      rails.push_back({nic.name, nic.name, nic.address, {text}, false});
      break;
    }
  }
  if (rails.empty()) {
    rails.push_back({"", "", 0, peer_addresses, false});
    return rails;
  }
  const size_t matched = rails.size();
  for (size_t i = 0; matched >= 2 && i < matched; ++i) {
    const Rail from = rails[i];  // a copy: push_back may move the vector
    const std::string to = rails[(i + 1) % matched].peer_addresses.front();
    if (to == from.peer_addresses.front()) continue;  // NICs on one subnet: no other rail
    rails.push_back({from.nic + ">" + to, from.nic, from.local_address, {to}, true});
  }
  return rails;
}

bool crosses_rails(const std::vector<LocalNic>& nics, uint32_t local, uint32_t remote) {
  const auto own = std::find_if(nics.begin(), nics.end(),
                                [local](const LocalNic& nic) { return nic.address == local; });
  if (own == nics.end() || in_subnet(*own, remote)) return false;
  return std::any_of(nics.begin(), nics.end(),
                     [remote](const LocalNic& nic) { return in_subnet(nic, remote); });
}

}  // namespace plexus::daemon
