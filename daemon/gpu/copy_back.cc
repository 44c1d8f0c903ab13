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

common::Result<bool> CopyBack::done() {
  while (!parts_.empty()) {
    common::Result<bool> part = parts_.back()->done();
    if (part.ok() && !*part) return false;
    if (error_.empty()) error_ = part.error();
    parts_.pop_back();
  }
  if (copy_) {
    common::Result<bool> last = copy_->done();
    if (last.ok() && !*last) return false;
    if (error_.empty()) error_ = last.error();
    copy_.reset();
  }
  written_ = true;
  if (!error_.empty()) return common::fail(error_);
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
