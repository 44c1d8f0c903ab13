// Numbers as an operator reads them in plexusctl's tables.
#pragma once

#include <cstdint>
#include <string>

namespace plexus::ctl {

// "512 B", "1.5 MiB"
std::string human_bytes(uint64_t bytes);
// "120 us", "3.4 ms", "1.20 s"
std::string human_us(double us);

}  // namespace plexus::ctl
