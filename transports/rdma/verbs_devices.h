// The verbs devices this daemon's RDMA paths run on, each opened once and shared by every path
// over it (verbs_device.h), and the node's bound on the memory RDMA pins (pinned_budget.h).
// A path opening asks here for the port that holds its address (the devices already open are
// looked at first, so a path opens no device of its own); registered windows nobody uses give
// way to its rings' bytes of the bound. The daemon makes one and hands it
// to every RDMA path opener; what it holds per device: a context, a protection domain and the
// window registrations, none per peer. Called only by the thread that runs the paths (the
// links' event loop); the budget is shared with the control thread, which holds offered
// paths' rings against it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "common/result.h"
#include "transports/rdma/pinned_budget.h"
#include "transports/rdma/verbs_device.h"
#include "transports/rdma/verbs_port.h"

namespace plexus::transports::rdma {

class VerbsDevices {
 public:
  // `max_windows`: pool windows registered at once per device.
  VerbsDevices(std::shared_ptr<PinnedBudget> budget, uint32_t max_windows)
      : budget_(std::move(budget)), max_windows_(max_windows) {}
  VerbsDevices(const VerbsDevices&) = delete;
  VerbsDevices& operator=(const VerbsDevices&) = delete;

  struct Found {
    VerbsPort port;  // its context is the device's
    std::shared_ptr<VerbsDevice> device;
  };
  // The port holding `ipv4` (network byte order) and its device, opened now if no path has it
  // open; or why not.
  common::Result<Found> find(uint32_t ipv4);
  // A path's rings were held (the offer's hold, or one taken now): where everything held
  // passes the bound, the registered windows no work request holds are dropped.
  void make_room();

  const std::shared_ptr<PinnedBudget>& budget() const { return budget_; }
  // The devices open now (some path holds them).
  size_t open_devices() const;

 private:
  std::shared_ptr<PinnedBudget> budget_;
  uint32_t max_windows_;
  std::map<std::string, std::weak_ptr<VerbsDevice>> devices_;  // by name; gone when unused
};

}  // namespace plexus::transports::rdma
