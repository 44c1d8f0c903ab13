// plexusd in the test process over a DeviceMemory of host memory
// (tests/unit/host_device_memory.h), its socket in a fresh temporary directory: the daemon's
// GPU path tested where there is no GPU. Stopped, and its directory removed, when it goes.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "daemon/daemon.h"
#include "tests/unit/host_device_memory.h"

namespace plexus::test {

class HostGpuDaemon {
 public:
  // `configure` changes the daemon's settings; `allocate` makes the device's "allocations",
  // before the daemon can look one up (the device's table is not shared safely with the
  // daemon's threads).
  HostGpuDaemon(const std::function<void(daemon::Config&)>& configure,
                const std::function<void(HostDeviceMemory&)>& allocate) {
    char dir_template[] = "/tmp/plexus-host-gpu-XXXXXX";
    if (::mkdtemp(dir_template) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = dir_template;
    daemon::Config config;
    config.socket_path = dir_ + "/plexusd.sock";
    config.metrics = common::OnOff::kOff;
    configure(config);
    allocate(*device_);
    daemon_ = std::make_unique<daemon::Daemon>(config, device_);
    daemon_->start();
  }
  ~HostGpuDaemon() {
    daemon_->stop();
    std::filesystem::remove_all(dir_);
  }
  HostGpuDaemon(const HostGpuDaemon&) = delete;
  HostGpuDaemon& operator=(const HostGpuDaemon&) = delete;

  HostDeviceMemory* device() const { return device_.get(); }
  daemon::Daemon* daemon() const { return daemon_.get(); }

 private:
  std::string dir_;
  std::shared_ptr<HostDeviceMemory> device_ = std::make_shared<HostDeviceMemory>();
  std::unique_ptr<daemon::Daemon> daemon_;
};

}  // namespace plexus::test
