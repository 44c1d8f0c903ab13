// Which data connections a daemon opens to a peer daemon, worked out from addresses alone
// (no sockets, so tests can give it any NICs): one per rail, each local NIC paired with the
// peer's address in its subnet (NIC i of one node reaches NIC i of another over the same
// switch); without any match, one fallback connection that may use any address; and with
// two rails or more the backup mapping across rails.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace plexus::daemon {

struct LocalNic {
  std::string name;
  uint32_t address = 0;  // IPv4, host order
  uint32_t mask = 0;
};

struct Rail {
  std::string key;  // names it while it is connected or retried: the NIC, or "nic>ip:port"
  std::string nic;  // "" for the fallback: any address, no local binding
  uint32_t local_address = 0;
  std::vector<std::string> peer_addresses;  // "ip:port", tried in order
  bool backup = false;                      // a NIC to the peer's address on another rail
  bool latency = false;  // the latency class's connection beside a rail (RailConnector::rails_to)
};

// The rails to a peer advertising `peer_addresses`. Backups: NIC i also to the peer's address
// on rail i+1 (mod the rail count), so that when this node's NIC i and the peer's NIC i+1
// are both down a path is left; none where two NICs share a subnet.
std::vector<Rail> plan_rails(const std::vector<LocalNic>& nics,
                             const std::vector<std::string>& peer_addresses);

// Whether a connection from local address `local` to `remote` (IPv4, host order) crosses
// rails: `remote` lies in the subnet of a local NIC other than the one holding `local`. How
// the side that accepted a backup knows it is one.
bool crosses_rails(const std::vector<LocalNic>& nics, uint32_t local, uint32_t remote);

}  // namespace plexus::daemon
