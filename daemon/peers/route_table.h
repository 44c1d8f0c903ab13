// The kernel's main IPv4 routing table (/proc/net/route), read to decide whether a backup
// across rails can be opened: a socket bound to a NIC with no route for an off-link address
// would send ARP queries for it until its connect timed out.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace plexus::daemon {

class RouteTable {
 public:
  // The table as /proc/net/route gives it (this network namespace's).
  static RouteTable read();
  // From text in /proc/net/route's format (a header line, then one route per line).
  static RouteTable parse(std::istream& text);

  // Whether a route that is up goes over interface `nic` and covers `address` ("ip:port" or
  // a bare IPv4 address).
  bool covers(const std::string& nic, const std::string& address) const;
  size_t size() const { return routes_.size(); }

 private:
  struct Route {
    std::string nic;
    uint32_t network = 0;  // as the kernel holds it (network order)
    uint32_t mask = 0;
  };
  std::vector<Route> routes_;
};

}  // namespace plexus::daemon
