// Little-endian fields of the RDMA setup and credit messages (rdma_hello.h,
// work_completion.h): the same bytes whichever hosts the peers are.
#pragma once

#include <cstddef>
#include <cstdint>

namespace plexus::transports::rdma {

template <typename T>
void put_le(std::byte* out, size_t at, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) {
    out[at + i] = static_cast<std::byte>(static_cast<uint64_t>(value) >> (8 * i));
  }
}

template <typename T>
T get_le(const std::byte* in, size_t at) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(in[at + i]) << (8 * i);
  return static_cast<T>(v);
}

}  // namespace plexus::transports::rdma
