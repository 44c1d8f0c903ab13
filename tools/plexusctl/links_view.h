// plexusctl nics and paths: the NICs that reach peer daemons and the paths over them.
#pragma once

#include <nlohmann/json.hpp>

#include "shm/control.capnp.h"

namespace plexus::ctl {

using nlohmann::json;

json links_to_json(shm::control::LinksReply::Reader links);
void print_nics(const json& links);
void print_paths(const json& links);

}  // namespace plexus::ctl
