// A connection's TCP congestion control, chosen by plexusd rather than inherited from the
// host's default: collective traffic between daemons may want another one than the
// host's other services (bbr's pacing, for one, costs this traffic CPU per byte).
#pragma once

#include <string>

namespace plexus::transports {

// Sets `name` (e.g. "cubic") on socket `fd`. Returns "" or why not, naming the
// algorithms this kernel has.
std::string set_congestion_control(int fd, const std::string& name);

// The socket's congestion control, or "" when it cannot be read.
std::string congestion_control(int fd);

}  // namespace plexus::transports
