#include "tools/plexus-bench/device_buffers.h"
#include "tools/plexus-bench/plexus_call.h"

namespace plexus::bench {

std::unique_ptr<DeviceBuffers> make_cuda_buffers() {
  throw PlexusCallError("--device cuda", PLEXUS_ERR_INVALID_ARGUMENT,
                        "plexus-bench was built without CUDA");
}

}  // namespace plexus::bench
