// plexusctl models: the node's weight store, its models and their versions.
#pragma once

#include "tools/plexusctl/admin_client.h"

namespace plexus::ctl {

// Prints the store (a table, or JSON) and returns the exit status.
int show_models(AdminClient& client, bool as_json);

}  // namespace plexus::ctl
