// Numbers as an operator reads them in plexusctl's tables.
#pragma once

#include <cstdint>
#include <string>

#include "common/human_bytes.h"

namespace plexus::ctl {

// "512 B", "1.5 MiB"
using common::human_bytes;
// "120 us", "3.4 ms", "1.20 s"
std::string human_us(double us);

}  // namespace plexus::ctl
