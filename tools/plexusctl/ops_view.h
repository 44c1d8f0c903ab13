// plexusctl ops: the collectives in flight on the node (what each waits for, which are
// stalled) and the last ones finished with their timing.
#pragma once

#include <nlohmann/json.hpp>

#include "shm/control.capnp.h"

namespace plexus::ctl {

using nlohmann::json;

json ops_to_json(shm::control::OpsReply::Reader ops);
// Keeps only the stalled collectives in flight (ops --stuck).
json only_stuck(json ops);
void print_ops(const json& ops, bool show_finished);

}  // namespace plexus::ctl
