// Fixed-width integers in little-endian byte order, for the formats between daemons
// (data_frame.h, speed_commit.h, and the RDMA setup and credit messages in transports/rdma/),
// which hosts of either byte order must read alike.
#pragma once

#include <cstddef>
#include <cstdint>

namespace plexus::transports::wire {

template <typename T>
void put_le(std::byte* at, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) {
    at[i] = static_cast<std::byte>(static_cast<uint64_t>(value) >> (8 * i) & 0xFF);
  }
}

template <typename T>
T get_le(const std::byte* at) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(at[i]) << (8 * i);
  return static_cast<T>(v);
}

}  // namespace plexus::transports::wire
