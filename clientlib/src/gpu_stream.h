// The CUDA side of stream-ordered calls: flags the GPU can write and wait on, and the two
// stream memory operations around each call (no kernel, no host callback). Implemented
// over the driver loaded at run time (gpu_stream_cuda.cc), or refusing everything when
// built without CUDA (gpu_stream_none.cc). Each returns "" (or the value) or why not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/result.h"

namespace plexus::client {

// Makes [host, host + bytes) (page-aligned, in the shared pool) reachable by the GPU: its
// address there.
common::Result<uint64_t> map_for_device(void* host, size_t bytes);
void unmap_for_device(void* host);
// Refuses a stream being captured into a CUDA graph: the daemon must see every launch,
// and a captured call would be submitted once but replayed many times.
[[nodiscard]] std::string check_stream_not_capturing(void* stream);
// Queued on `stream`: write `value` at `device` once the work before it is done.
[[nodiscard]] std::string stream_write_value(void* stream, uint64_t device, uint32_t value);
// Queued on `stream`: hold the work after it until `device` holds `value` or a later
// ticket (cyclically: within 2^31 after it).
[[nodiscard]] std::string stream_wait_value(void* stream, uint64_t device, uint32_t value);

}  // namespace plexus::client
