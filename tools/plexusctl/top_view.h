// plexusctl top: one screen of the node, refreshed: the daemon, its NICs' rates and
// latency, jobs' op rates, and the collectives in flight.
#pragma once

#include <nlohmann/json.hpp>

namespace plexus::ctl {

using nlohmann::json;

// Prints one frame. `previous` is the status of the frame before (null for the first),
// `seconds` the time between them: rates come from the difference.
void print_top(const json& status, const json& links, const json& ops, const json* previous,
               double seconds);

}  // namespace plexus::ctl
