#include "daemon/gpu/staged_input.h"

#include <algorithm>

namespace plexus::daemon::gpu {

void StagedInput::start(DeviceMemory& device, std::byte* host, const DeviceMapping* mapping,
                        uint64_t offset, uint64_t bytes) {
  started_ = true;
  for (uint64_t at = 0; at < bytes; at += kPieceBytes) {
    const uint64_t n = std::min(kPieceBytes, bytes - at);
    pieces_.push_back({at + n, device.start_to_host(host + at, *mapping, offset + at, n)});
  }
}

void StagedInput::poll() {
  while (!pieces_.empty()) {
    common::Result<bool> piece = pieces_.front().copy->done();
    if (piece.ok() && !*piece) return;
    if (error_.empty()) error_ = piece.error();
    in_ = pieces_.front().end;
    pieces_.pop_front();
  }
}

common::Result<bool> StagedInput::ready() {
  if (!started_) return false;
  poll();
  if (!pieces_.empty()) return false;
  if (!error_.empty()) return common::fail(error_);
  return true;
}

common::Result<bool> StagedInput::in_through(uint64_t bytes) {
  poll();
  if (!error_.empty()) return common::fail(error_);
  return pieces_.empty() || bytes <= in_;
}

bool StagedInput::arriving() {
  if (pieces_.empty()) return false;
  poll();
  return !pieces_.empty();
}

}  // namespace plexus::daemon::gpu
