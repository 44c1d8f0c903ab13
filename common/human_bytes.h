// A byte count as people read it ("1.5 GiB"), for messages and tables.
#pragma once

#include <cstdint>
#include <string>

namespace plexus::common {

std::string human_bytes(uint64_t bytes);

}  // namespace plexus::common
