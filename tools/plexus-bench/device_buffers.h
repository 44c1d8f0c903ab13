// --device cuda: a rank's send and receive buffers on the first GPU (the calls get device
// pointers, the daemon moves the data with the copy engines), with host mirrors for filling
// and checking. Built without CUDA, asking for it is an error saying so.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "tools/plexus-bench/collective_runner.h"

namespace plexus::bench {

class DeviceBuffers {
 public:
  virtual ~DeviceBuffers() = default;
  // Adds device buffers of buffers->bytes each to `buffers` (whose host ones become mirrors).
  virtual void attach(RankBuffers* buffers) = 0;
};

// Throws PlexusCallError naming what failed (no driver, no memory).
std::unique_ptr<DeviceBuffers> make_cuda_buffers();

}  // namespace plexus::bench
