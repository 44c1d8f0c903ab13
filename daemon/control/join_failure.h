// The code a multi-node communicator's failed init reaches a node's ranks with, from a
// JoinFailed a peer daemon sent (node_control.capnp): a peer's field, so only the codes a
// failed join can mean are taken. A daemon from before the field sends 0; its sentence then
// says which (an init timeout, a draining node).
#pragma once

#include <cstdint>
#include <string>

#include "plexus/plexus_types.h"

namespace plexus::daemon {

plexus_result_t join_failure_code(uint32_t wire, const std::string& message);

}  // namespace plexus::daemon
