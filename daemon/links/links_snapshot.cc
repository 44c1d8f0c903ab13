// The links' published snapshot and telemetry windows.
#include "daemon/links/links_snapshot.h"

namespace plexus::daemon {

std::pair<std::unique_ptr<PathWindows>, std::shared_ptr<monitor::WindowRing>>
LinksSnapshot::windows_for_path(const std::string& nic) {
  if (telemetry_.width.count() <= 0) return {};
  auto path_windows = std::make_unique<PathWindows>(telemetry_.width, telemetry_.path_windows != 0
                                                                          ? telemetry_.path_windows
                                                                          : telemetry_.windows);
  std::lock_guard lock(mutex_);
  auto& nic_ring = nic_windows_[nic.empty() ? "?" : nic];
  if (!nic_ring)
    nic_ring = std::make_shared<monitor::WindowRing>(telemetry_.width, telemetry_.windows);
  return {std::move(path_windows), nic_ring};
}

void LinksSnapshot::publish(std::vector<PeerInfo> peers, std::vector<std::string> drained) {
  std::lock_guard lock(mutex_);
  peers_ = std::move(peers);
  drained_ = std::move(drained);
}

std::vector<LinksSnapshot::PeerInfo> LinksSnapshot::peers() const {
  std::lock_guard lock(mutex_);
  return peers_;
}

std::vector<std::string> LinksSnapshot::drained() const {
  std::lock_guard lock(mutex_);
  return drained_;
}

std::map<std::string, std::shared_ptr<const monitor::WindowRing>> LinksSnapshot::nic_windows()
    const {
  std::lock_guard lock(mutex_);
  return {nic_windows_.begin(), nic_windows_.end()};
}

}  // namespace plexus::daemon
