#include "transports/rdma/local_ring.h"

namespace plexus::transports::rdma {

std::string LocalRing::check_start(uint64_t offset) const {
  if (offset % kRingAlign != 0 || offset >= size_) {
    return "a frame at ring offset " + std::to_string(offset) + ", which is not a frame start in " +
           "a ring of " + std::to_string(size_) + " bytes";
  }
  const uint64_t expected = consumed_ % size_;
  if (offset != expected && offset != 0) {
    return "a frame at ring offset " + std::to_string(offset) + " where the next was due at " +
           std::to_string(expected);
  }
  return {};
}

std::string LocalRing::consume(uint64_t offset, uint64_t bytes) {
  if (std::string error = check_start(offset); !error.empty()) return error;
  const uint64_t need = ring_align_up(bytes);
  if (offset + need > size_) {
    return "a frame of " + std::to_string(bytes) + " bytes at ring offset " +
           std::to_string(offset) + " runs past the ring's end (" + std::to_string(size_) + ")";
  }
  const uint64_t expected = consumed_ % size_;
  uint64_t skipped = 0;
  if (offset != expected) {
    // At 0 instead of `expected`: only right if it would not have fit there.
    if (expected + need <= size_) {
      return "a frame of " + std::to_string(bytes) + " bytes at ring offset 0 that fitted at " +
             std::to_string(expected);
    }
    skipped = size_ - expected;
  }
  consumed_ += skipped + need;
  return {};
}

}  // namespace plexus::transports::rdma
