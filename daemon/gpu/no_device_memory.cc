// Built without the CUDA toolkit: no GPU support, said plainly to whoever asks for it.
#include "daemon/gpu/device_memory.h"

namespace plexus::daemon::gpu {

common::Result<std::shared_ptr<DeviceMemory>> open_device_memory() {
  return common::fail("plexusd was built without CUDA (no CUDA toolkit at build time)");
}

}  // namespace plexus::daemon::gpu
