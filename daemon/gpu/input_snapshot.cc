#include "daemon/gpu/input_snapshot.h"

namespace plexus::daemon::gpu {

std::string InputSnapshot::take(DeviceMemory& device, const DeviceMapping& mapping, uint64_t offset,
                                uint64_t bytes, StagingBudget budget) {
  std::string error = host_.allocate(device, bytes);
  if (!error.empty()) return error;
  host_.charge_to(std::move(budget));
  copy_ = device.start_to_host(host_.data(), mapping, offset, bytes);
  return {};
}

bool InputSnapshot::in() {
  if (copy_) {
    common::Result<bool> ended = copy_->done();
    if (ended.ok() && !*ended) return false;
    error_ = ended.error();
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
