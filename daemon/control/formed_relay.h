// The topologies this node passed on down the tree (formed_tree.h), and the tokens whose
// topology came here lately (tree_relay.h).
#pragma once

#include "daemon/control/formed_message.h"
#include "daemon/control/tree_relay.h"

namespace plexus::daemon {

using FormedRelay = TreeRelay<TopologyMessage>;

}  // namespace plexus::daemon
