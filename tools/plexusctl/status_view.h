// plexusctl status and comms: the daemon, its rank sessions and communicators.
#pragma once

#include <nlohmann/json.hpp>

#include "shm/control.capnp.h"

namespace plexus::ctl {

using nlohmann::json;

json status_to_json(shm::control::StatusReply::Reader status);
void print_status(const json& status);
void print_comms(const json& status);
// Jobs: ranks connected now, ops and payload by collective, failed completions.
void print_jobs(const json& status);

}  // namespace plexus::ctl
