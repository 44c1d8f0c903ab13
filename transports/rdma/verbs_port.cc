#include "transports/rdma/verbs_port.h"

#include <arpa/inet.h>

#include <cstring>
#include <utility>

namespace plexus::transports::rdma {
namespace {

// The devices of this host, freed with the list (opened contexts outlive it).
struct DeviceList {
  int count = 0;
  ibv_device** devices = ibv_get_device_list(&count);
  ~DeviceList() {
    if (devices != nullptr) ibv_free_device_list(devices);
  }
};

bool is_ipv4_gid(const ibv_gid& gid, uint32_t ipv4) {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid.raw, kPrefix, sizeof kPrefix) == 0 &&
         std::memcmp(gid.raw + 12, &ipv4, 4) == 0;
}

std::string address_text(uint32_t ipv4) {
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &ipv4, text, sizeof text);
  return text;
}

}  // namespace

std::string gid_text(const ibv_gid& gid) {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, gid.raw, text, sizeof text);
  return text;
}

std::optional<VerbsPort> port_holding(const std::shared_ptr<ibv_context>& context,
                                      const std::string& device, uint32_t ipv4) {
  std::vector<ibv_gid_entry> entries(256);
  const ssize_t n = ibv_query_gid_table(context.get(), entries.data(), entries.size(), 0);
  for (ssize_t i = 0; i < n; ++i) {
    const ibv_gid_entry& e = entries[static_cast<size_t>(i)];
    if (e.gid_type != IBV_GID_TYPE_ROCE_V2 || !is_ipv4_gid(e.gid, ipv4)) continue;
    ibv_port_attr port{};
    if (ibv_query_port(context.get(), static_cast<uint8_t>(e.port_num), &port) != 0) continue;
    VerbsPort found;
    found.context = context;
    found.device = device;
    found.port = static_cast<uint8_t>(e.port_num);
    found.gid_index = e.gid_index;
    found.gid = e.gid;
    found.ifindex = e.ndev_ifindex;
    found.active_mtu = port.active_mtu;
    found.active = port.state == IBV_PORT_ACTIVE;
    return found;
  }
  return std::nullopt;
}

common::Result<VerbsPort> find_verbs_port(uint32_t ipv4) {
  DeviceList list;
  if (list.devices == nullptr || list.count == 0) {
    return common::fail("no verbs device on this host (ibv_get_device_list found none)");
  }
  std::string looked;
  for (int d = 0; d < list.count; ++d) {
    const char* name = ibv_get_device_name(list.devices[d]);
    ibv_context* raw = ibv_open_device(list.devices[d]);
    if (raw == nullptr) {
      looked += std::string(looked.empty() ? "" : ", ") + name + " (cannot be opened)";
      continue;
    }
    std::shared_ptr<ibv_context> context(raw, [](ibv_context* c) { ibv_close_device(c); });
    if (auto found = port_holding(context, name, ipv4)) return std::move(*found);
    looked += std::string(looked.empty() ? "" : ", ") + name;
  }
  return common::fail("no verbs device holds " + address_text(ipv4) +
                      " as a RoCE v2 GID (looked at " + looked + ")");
}

std::vector<VerbsNetdev> verbs_netdevs() {
  std::vector<VerbsNetdev> out;
  DeviceList list;
  for (int d = 0; list.devices != nullptr && d < list.count; ++d) {
    ibv_context* raw = ibv_open_device(list.devices[d]);
    if (raw == nullptr) continue;
    std::vector<ibv_gid_entry> entries(256);
    const ssize_t n = ibv_query_gid_table(raw, entries.data(), entries.size(), 0);
    for (ssize_t i = 0; i < n; ++i) {
      const uint32_t ifindex = entries[static_cast<size_t>(i)].ndev_ifindex;
      bool seen = false;
      for (const auto& v : out) seen = seen || v.ifindex == ifindex;
      if (!seen && ifindex != 0) out.push_back({ifindex, ibv_get_device_name(list.devices[d])});
    }
    ibv_close_device(raw);
  }
  return out;
}

}  // namespace plexus::transports::rdma
