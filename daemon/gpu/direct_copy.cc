#include "daemon/gpu/direct_copy.h"

#include <cstring>
#include <string>

namespace plexus::daemon::gpu {

std::unique_ptr<CopyInFlight> copy_part(DeviceMemory& device, StagedOp* from,
                                        const std::byte* from_host, uint64_t from_at, StagedOp* to,
                                        std::byte* to_host, uint64_t to_at, uint64_t bytes) {
  if (from != nullptr) from->mark_matched();
  if (to != nullptr) to->mark_matched();
  if (from != nullptr && from->snapshot().taken()) {
    // Rare: matched while its snapshot is still coming in; a short wait on a copy engine.
    const std::string error = from->snapshot().wait();
    if (!error.empty()) {
      return std::make_unique<FinishedCopy>("copying its input to the host: " + error);
    }
    from_host = from->snapshot().host();
    from = nullptr;
  }
  const DeviceSpan input = from != nullptr ? from->device_input() : DeviceSpan{};
  const DeviceSpan output = to != nullptr ? to->device_output() : DeviceSpan{};
  if (bytes == 0) return std::make_unique<FinishedCopy>();
  if (input.mapping != nullptr && output.mapping != nullptr) {
    const uint64_t source = input.offset + from_at;
    const uint64_t target = output.offset + to_at;
    if (input.mapping == output.mapping && source == target) {
      return std::make_unique<FinishedCopy>();
    }
    return device.start_device_to_device(*output.mapping, target, *input.mapping, source, bytes);
  }
  if (input.mapping != nullptr) {
    return device.start_to_host(to_host + to_at, *input.mapping, input.offset + from_at, bytes);
  }
  if (output.mapping != nullptr) {
    return device.start_to_device(*output.mapping, output.offset + to_at, from_host + from_at,
                                  bytes);
  }
  if (to_host + to_at != from_host + from_at)
    std::memcpy(to_host + to_at, from_host + from_at, bytes);
  return std::make_unique<FinishedCopy>();
}

}  // namespace plexus::daemon::gpu
