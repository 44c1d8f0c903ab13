// Built without the CUDA toolkit: no GPU support, said plainly to whoever asks for it.
#include "daemon/gpu/device_memory.h"

namespace plexus::daemon::gpu {

std::shared_ptr<DeviceMemory> open_device_memory(std::string* why) {
  *why = "plexusd was built without CUDA (no CUDA toolkit at build time)";
  return nullptr;
}

}  // namespace plexus::daemon::gpu
