// Built without CUDA: stream-ordered calls are refused saying so.
#include "clientlib/src/gpu_stream.h"

namespace plexus::client {
namespace {
const char* kNoCuda = "libplexus was built without CUDA";
}

common::Result<uint64_t> map_for_device(void*, size_t) { return common::fail(kNoCuda); }
void unmap_for_device(void*) {}
std::string check_stream_not_capturing(void*) { return kNoCuda; }
std::string stream_write_value(void*, uint64_t, uint32_t) { return kNoCuda; }
std::string stream_wait_value(void*, uint64_t, uint32_t) { return kNoCuda; }

}  // namespace plexus::client
