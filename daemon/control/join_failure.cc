#include "daemon/control/join_failure.h"

namespace plexus::daemon {

plexus_result_t join_failure_code(uint32_t wire, const std::string& message) {
  switch (wire) {
    // What a root can fail a join with. Nothing that would blame the rank's own daemon
    // (DAEMON_LOST, VERSION, PROTOCOL) or its memory: another daemon cannot know those.
    case PLEXUS_ERR_INVALID_ARGUMENT:
    case PLEXUS_ERR_DAEMON_UNAVAILABLE:
    case PLEXUS_ERR_TIMEOUT:
    case PLEXUS_ERR_PEER_LOST:
    case PLEXUS_ERR_MISMATCH:
      return static_cast<plexus_result_t>(wire);
    case 0:  // a daemon from before the field
      if (message.find("timed out") != std::string::npos) return PLEXUS_ERR_TIMEOUT;
      if (message.find("is draining") != std::string::npos) return PLEXUS_ERR_DAEMON_UNAVAILABLE;
      return PLEXUS_ERR_INVALID_ARGUMENT;
    default:
      return PLEXUS_ERR_INVALID_ARGUMENT;
  }
}

}  // namespace plexus::daemon
