// Picks the algorithm for a collective from the participants' link cost: alpha (seconds per
// message) and beta (seconds per byte). The root daemon computes them once when the
// communicator forms (NodeJoins::comm_cost): alpha is half the slowest control-connection
// round trip to a member (at least 20 us), beta the slowest member's fastest NIC speed as
// its control handshake advertised it (10 Gbit/s when unknown). Every participant must pick
// the same algorithm, so the inputs must be those communicator-wide values, never a node's
// own measurement, and Shape::speeds the nodes agreed on for the op (the speed agreement:
// docs/architecture.md).
#pragma once

#include <optional>

#include "daemon/algorithms/algorithm.h"

namespace plexus::daemon::algo {

struct LinkCost {
  double alpha_s = 50e-6;         // per message
  double beta_s_per_byte = 1e-9;  // per byte (1 GB/s)
};

// Estimated seconds for `algorithm` to run `shape` (the figures compare algorithms; they
// are not a promise).
double estimate_seconds(Algorithm algorithm, const Shape& shape, const LinkCost& cost);

// The cheapest algorithm for the shape, or `forced` when it serves the collective.
Algorithm choose_algorithm(const Shape& shape, const LinkCost& cost,
                           std::optional<Algorithm> forced = std::nullopt);

}  // namespace plexus::daemon::algo
