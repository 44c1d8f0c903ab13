// Run inside a VM node by rdma_vm_harness: for each address given, the verbs port
// find_verbs_port chooses ("198.18.0.1 rxe0 port 1 gid 1 ::ffff:198.18.0.1 ifindex 2") or
// "198.18.9.9 none: <why>"; then each NIC with a verbs device ("netdev 2 rxe0").
#include <arpa/inet.h>

#include <cstdio>
#include <string>

#include "transports/rdma/verbs_port.h"

int main(int argc, char** argv) {
  using plexus::transports::rdma::find_verbs_port;
  for (int i = 1; i < argc; ++i) {
    in_addr address{};
    if (inet_pton(AF_INET, argv[i], &address) != 1) {
      std::fprintf(stderr, "verbs_port_probe: %s is not an IPv4 address\n", argv[i]);
      return 2;
    }
    auto port = find_verbs_port(address.s_addr);
    if (!port) {
      std::printf("%s none: %s\n", argv[i], port.error().c_str());
      continue;
    }
    std::printf("%s %s port %u gid %u %s ifindex %u\n", argv[i], port->device.c_str(),
                static_cast<unsigned>(port->port), port->gid_index,
                plexus::transports::rdma::gid_text(port->gid).c_str(), port->ifindex);
  }
  for (const auto& netdev : plexus::transports::rdma::verbs_netdevs()) {
    std::printf("netdev %u %s\n", netdev.ifindex, netdev.device.c_str());
  }
  return 0;
}
