// A communicator's successor without a unique id (plexus_comm_shrink): every daemon of it
// derives the same token from the parent's and the excluded ranks, so the ranks need no id
// passed around, a retry with another exclude list is another communicator, and ranks that
// disagree meet at the same root under different tokens (NodeRendezvous fails both). The
// root is the node of the lowest kept rank, so it holds the parent and a rank of the
// successor. Pure: no state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "daemon/control/node_rendezvous.h"
#include "daemon/engine/comm.h"

namespace plexus::daemon {

// The successor's token: a 128-bit mix of the parent's and the excluded ranks (ascending).
CommToken successor_token(const CommToken& parent, const std::vector<int>& excluded);
// The token of the parent's growth number `sequence` (plexus_comm_grow): another tag, so no
// shrink's.
CommToken growth_token(const CommToken& parent, uint32_t sequence);
// Why `excluded` cannot be excluded from a communicator of `nranks` by rank `caller` (empty:
// it can): ascending, in range, not all, not the caller itself.
std::string exclude_problem(const std::vector<int>& excluded, int nranks, int caller);
// A rank's place in the successor: the kept ranks below it.
int successor_rank(const std::vector<int>& excluded, int rank);
// The nodes of multi-node communicator `parent` that hold a kept rank (who must join).
NodeRendezvous::Successor successor_of(const Comm& parent, const std::vector<int>& excluded);
// At the root: who must join the shrink of `parent_token` without `excluded`, or why a join
// of `token` with `nranks` cannot be taken there (`parent`: that communicator here, if any;
// `here`: this node's name).
common::Result<NodeRendezvous::Successor> successor_for(const Comm* parent,
                                                        const CommToken& parent_token,
                                                        const std::vector<int>& excluded,
                                                        const CommToken& token, int nranks,
                                                        const std::string& here);
// Index in `parent`'s span of the successor's root: the node of the lowest kept rank.
size_t successor_root(const Comm& parent, const std::vector<int>& excluded);

}  // namespace plexus::daemon
