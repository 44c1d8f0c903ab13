// Sealed memfd segments: how memory crosses the client/daemon boundary.
//
// A segment's size is fixed by sealing it (shrink, grow, seal), so the side that maps
// a peer's memfd can never be SIGBUSed by a later ftruncate. No names in /dev/shm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/result.h"
#include "common/unique_fd.h"

namespace plexus::shm {

// A shared read-write mapping of a whole segment; unmapped on destruction.
class Mapping {
 public:
  Mapping() = default;
  Mapping(void* base, size_t size) : base_(base), size_(size) {}
  ~Mapping() { reset(); }
  Mapping(Mapping&& other) noexcept;
  Mapping& operator=(Mapping&& other) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  std::byte* data() const { return static_cast<std::byte*>(base_); }
  size_t size() const { return size_; }
  void reset();

 private:
  void* base_ = nullptr;
  size_t size_ = 0;
};

inline constexpr unsigned kRequiredSeals =
    0x0002 /*F_SEAL_SHRINK*/ | 0x0004 /*F_SEAL_GROW*/ | 0x0001 /*F_SEAL_SEAL*/;

// Creates a memfd of `bytes`, sized and sealed against shrink/grow/further sealing.
// Throws std::system_error naming the step that failed.
common::UniqueFd create_sealed_memfd(const char* debug_name, size_t bytes);

// Maps a whole fd read-write shared. Throws std::system_error.
Mapping map_shared(int fd, size_t bytes);

// Checks a peer's fd before mapping it: a memfd carrying the required seals, at least
// `min_bytes` long and at most `max_bytes`. Its size, or a sentence naming what is wrong
// ("memfd is not sealed against shrinking ...").
common::Result<uint64_t> check_sealed_memfd(int fd, uint64_t min_bytes, uint64_t max_bytes);

}  // namespace plexus::shm
