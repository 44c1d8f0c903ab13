// A process that nothing watches from outside (a rank started by a script or another node)
// bounds itself: after `seconds`, SIGALRM writes `message` to stderr and exits with 124, as
// timeout(1) does, so a peer that never comes cannot hold its caller forever.
#pragma once

#include <string>

namespace plexus::bench {

void arm_self_timeout(const std::string& message, unsigned seconds);

}  // namespace plexus::bench
