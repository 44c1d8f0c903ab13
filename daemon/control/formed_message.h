// A communicator's topology as it travels between daemons (node_control.capnp's Formed,
// less its token): written by the root and by each node that passes it on down the tree
// (formed_tree.h), and read, untrusted, by every member. Reading checks everything a member
// relies on and says what is wrong: this node, the root and the sender must be listed, every
// rank placed on a listed node, the rank count as this node's ranks expect, the fanout and
// the algorithm ones this daemon knows; a cost out of range is replaced by the default. Pure:
// no I/O, no state.
#pragma once

#include <cstdint>
#include <optional>

#include "common/result.h"
#include "daemon/algorithms/cost_model.h"
#include "daemon/control/node_control.capnp.h"
#include "daemon/control/node_rendezvous.h"

namespace plexus::daemon {

struct TopologyMessage {
  NodeRendezvous::Formed formed;
  algo::LinkCost cost;
  uint64_t root = 0;    // the root daemon's instance id
  uint32_t fanout = 0;  // formed_tree.h's
};

void write_formed(node_control::Formed::Builder out, const TopologyMessage& topology);
// `me`: this daemon; `sender`: the daemon it came from; `nranks`: the communicator's size as
// this node's ranks gave it, when they wait for it.
common::Result<TopologyMessage> read_formed(node_control::Formed::Reader in, uint64_t me,
                                            uint64_t sender, std::optional<int> nranks);

}  // namespace plexus::daemon
