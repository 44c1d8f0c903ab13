#include "daemon/gpu/input_snapshot.h"

namespace plexus::daemon::gpu {

std::string InputSnapshot::take(DeviceMemory& device, const DeviceMapping& mapping, uint64_t offset,
                                uint64_t bytes, StagingBudget budget) {
  std::string error;
  if (!host_.allocate(device, bytes, &error)) return error;
  host_.charge_to(std::move(budget));
  copy_ = device.start_to_host(host_.data(), mapping, offset, bytes);
  return {};
}

bool InputSnapshot::in() {
  if (copy_) {
    if (!copy_->done(&error_)) return false;
    copy_.reset();
  }
  return true;
}

std::string InputSnapshot::wait() {
  if (copy_) {
    error_ = copy_->wait();
    copy_.reset();
  }
  return error_;
}

}  // namespace plexus::daemon::gpu
