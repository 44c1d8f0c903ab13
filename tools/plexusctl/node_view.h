// plexusctl config [reload] and node drain|undrain|status: the node as a service.
#pragma once

#include "tools/plexusctl/admin_client.h"

namespace plexus::ctl {

// plexusctl config: the settings in use, as a config file; with `reload`, has plexusd read
// its config again first and prints what changed. Returns the exit status.
int show_config(AdminClient& client, bool reload, bool as_json);

enum class DrainAction { kDrain, kUndrain, kQuery };
// plexusctl node drain|undrain|status. With `wait_s` > 0 (drain), waits up to that long for
// the node to be safe to stop, printing progress as communicators end. Returns 0, or 1 when
// the wait ran out with communicators left.
int node_drain(AdminClient& client, DrainAction action, double wait_s, bool as_json);

}  // namespace plexus::ctl
