#include "transports/rdma/verbs_devices.h"

#include <utility>

namespace plexus::transports::rdma {

common::Result<VerbsDevices::Found> VerbsDevices::find(uint32_t ipv4) {
  for (auto it = devices_.begin(); it != devices_.end();) {
    std::shared_ptr<VerbsDevice> device = it->second.lock();
    if (device == nullptr || device->failed()) {
      // Unused, or failed: its paths let it go as they fail, and a new one opens it again.
      it = devices_.erase(it);
      continue;
    }
    if (auto port = port_holding(device->context(), device->name(), ipv4)) {
      return Found{std::move(*port), std::move(device)};
    }
    ++it;
  }
  auto port = find_verbs_port(ipv4);
  if (!port.ok()) return common::fail(port.error());
  if (auto open = devices_.find(port->device); open != devices_.end()) {
    // Open already, and the address appeared on it since the look above: the port's numbers
    // hold for the device's own context (the one just opened to look is closed).
    if (auto device = open->second.lock(); device != nullptr && !device->failed()) {
      port->context = device->context();
      return Found{port.take(), std::move(device)};
    }
  }
  std::string why;
  auto device = VerbsDevice::open(port->device, port->context, budget_, max_windows_, &why);
  if (device == nullptr) return common::fail(why);
  devices_[device->name()] = device;
  return Found{port.take(), std::move(device)};
}

void VerbsDevices::make_room() {
  if (!budget_->over()) return;
  for (auto& [name, weak] : devices_) {
    if (auto device = weak.lock()) device->drop_unused_windows();
  }
}

size_t VerbsDevices::open_devices() const {
  size_t n = 0;
  for (const auto& [name, weak] : devices_) n += weak.expired() ? 0 : 1;
  return n;
}

}  // namespace plexus::transports::rdma
