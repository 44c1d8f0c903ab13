// The links' published snapshot and telemetry windows.
#include "daemon/links/links_snapshot.h"

namespace plexus::daemon {

std::pair<std::shared_ptr<monitor::WindowRing>, std::shared_ptr<monitor::WindowRing>>
LinksSnapshot::windows_for_path(const std::string& nic) {
  if (telemetry_.width.count() <= 0) return {};
  auto ring = [this] {
    return std::make_shared<monitor::WindowRing>(telemetry_.width, telemetry_.windows);
  };
  auto path_ring = ring();
  std::lock_guard lock(mutex_);
  auto& nic_ring = nic_windows_[nic.empty() ? "?" : nic];
  if (!nic_ring) nic_ring = ring();
  return {std::move(path_ring), nic_ring};
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
