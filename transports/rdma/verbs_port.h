// The verbs device port that carries a local IPv4 address: for RoCE, the port whose GID table
// holds that address as a RoCE v2 GID (::ffff:a.b.c.d) on the NIC it belongs to. A path's
// queue pair lives there, so that its traffic leaves over the NIC the path was set up on.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace plexus::transports::rdma {

struct VerbsPort {
  std::shared_ptr<ibv_context> context;  // the device, closed when its last user goes
  std::string device;                    // "rxe0", "mlx5_1"
  uint8_t port = 0;
  uint32_t gid_index = 0;
  ibv_gid gid{};
  uint32_t ifindex = 0;  // the NIC the GID belongs to
  ibv_mtu active_mtu = IBV_MTU_1024;
  bool active = false;  // the port is up (IBV_PORT_ACTIVE)
};

// The port for `ipv4` (network byte order), or why none, saying what was looked at. Opens
// every device to look (those not holding it are closed again).
common::Result<VerbsPort> find_verbs_port(uint32_t ipv4);
// The port of the opened device `context` (named `device`) that holds `ipv4`, if one does.
std::optional<VerbsPort> port_holding(const std::shared_ptr<ibv_context>& context,
                                      const std::string& device, uint32_t ipv4);

// The NICs (by interface index) that have a verbs device over them, with its name: which
// paths --transport auto can put on RDMA.
struct VerbsNetdev {
  uint32_t ifindex;
  std::string device;
};
std::vector<VerbsNetdev> verbs_netdevs();

// "::ffff:198.18.0.1" for logs.
std::string gid_text(const ibv_gid& gid);

}  // namespace plexus::transports::rdma
