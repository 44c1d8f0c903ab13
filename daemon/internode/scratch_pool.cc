#include "daemon/internode/scratch_pool.h"

namespace plexus::daemon {

std::shared_ptr<OpScratch> ScratchPool::take() {
  for (const auto& buffer : buffers_) {
    if (buffer.use_count() == 1) return buffer;
  }
  buffers_.push_back(std::make_shared<OpScratch>());
  return buffers_.back();
}

uint64_t ScratchPool::release() {
  uint64_t bytes = 0;
  for (const auto& buffer : buffers_) bytes += buffer->work.capacity() + buffer->send.capacity();
  buffers_.clear();
  return bytes;
}

}  // namespace plexus::daemon
