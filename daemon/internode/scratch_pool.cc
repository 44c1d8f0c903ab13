#include "daemon/internode/scratch_pool.h"

namespace plexus::daemon {

std::shared_ptr<OpScratch> ScratchPool::take() {
  for (const auto& buffer : buffers_) {
    if (buffer.use_count() == 1) return buffer;
  }
  buffers_.push_back(std::make_shared<OpScratch>());
  return buffers_.back();
}

}  // namespace plexus::daemon
