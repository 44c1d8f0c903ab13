#include "daemon/gpu/copy_back.h"

#include <utility>

namespace plexus::daemon::gpu {

void CopyBack::aim(std::shared_ptr<DeviceMapping> mapping, uint64_t offset, const std::byte* host,
                   uint64_t bytes) {
  mapping_ = std::move(mapping);
  offset_ = offset;
  host_ = host;
  bytes_ = bytes;
}

void CopyBack::start_part(DeviceMemory& device, uint64_t offset, uint64_t bytes) {
  if (!mapping_ || bytes == 0) return;
  parts_.push_back(device.start_to_device(*mapping_, offset_ + offset, host_ + offset, bytes));
  copied_early_ += bytes;
}

void CopyBack::start(DeviceMemory& device) {
  if (mapping_ && copied_early_ < bytes_)
    copy_ = device.start_to_device(*mapping_, offset_, host_, bytes_);
}

bool CopyBack::done(std::string* error) {
  while (!parts_.empty()) {
    std::string part_error;
    if (!parts_.back()->done(&part_error)) return false;
    if (error_.empty()) error_ = part_error;
    parts_.pop_back();
  }
  if (copy_) {
    std::string last_error;
    if (!copy_->done(&last_error)) return false;
    if (error_.empty()) error_ = last_error;
    copy_.reset();
  }
  written_ = true;
  *error = error_;
  return true;
}

std::string CopyBack::wait(DeviceMemory& device) {
  start(device);
  for (auto& part : parts_) {
    std::string part_error = part->wait();
    if (error_.empty()) error_ = part_error;
  }
  parts_.clear();
  if (copy_) {
    std::string last_error = copy_->wait();
    if (error_.empty()) error_ = last_error;
  }
  copy_.reset();
  written_ = true;
  return error_;
}

}  // namespace plexus::daemon::gpu
