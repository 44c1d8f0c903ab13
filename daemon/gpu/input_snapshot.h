// A direct send's input copied aside to host memory (its snapshot) while the send waits
// for its match: a later op of its process may then overwrite the device bytes, and the
// send goes from the copy once matched. Owns the host copy (charged to the staging budgets
// while held), the copy in flight and its error, and whether a refused copy was logged.
// Engine thread, which polls the copy rather than waits for it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "daemon/gpu/device_memory.h"
#include "daemon/gpu/host_copy.h"

namespace plexus::daemon::gpu {

class InputSnapshot {
 public:
  // Starts copying [offset, offset + bytes) of `mapping` to new host memory charged to
  // `budget`: "" or why not (no host memory).
  std::string take(DeviceMemory& device, const DeviceMapping& mapping, uint64_t offset,
                   uint64_t bytes, StagingBudget budget);
  bool taken() const { return host_.data() != nullptr; }
  // Host bytes it holds now.
  uint64_t bytes() const { return taken() ? host_.bytes() : 0; }
  const std::byte* host() const { return host_.data(); }
  // Whether the copy has ended (a failure is kept for wait).
  bool in();
  // Waits for the copy if it still runs: "" or why it failed.
  std::string wait();
  // Why the copy failed, once in or wait saw it end ("" until then).
  const std::string& error() const { return error_; }
  // Frees the host memory and gives its charge back.
  void release() { host_.release(); }
  // True the first time it is called: a refused copy aside (asked again as the op waits)
  // is logged once.
  bool first_refusal() { return !std::exchange(refused_, true); }

 private:
  HostCopy host_;
  std::unique_ptr<CopyInFlight> copy_;  // after host_: destroyed first, it waits
  std::string error_;
  bool refused_ = false;
};

}  // namespace plexus::daemon::gpu
