// A daemon that starts itself: when no plexusd answers on the socket, libplexus starts one
// for this user and node (once, however many ranks race to do it), which exits after an
// idle time. PLEXUS_AUTOSTART=0 turns this off (a systemd-managed plexusd is then expected).
#pragma once

#include <memory>
#include <string>

#include "clientlib/control/control_channel.h"

namespace plexus::client {

// The control connection to the daemon on socket_path, starting one first where none
// answers and autostart is on. Throws DaemonUnavailable naming the socket (and, when a
// start failed, why: the binary not found, or the daemon's own last log line).
std::unique_ptr<ControlChannel> connect_or_start(const std::string& socket_path, int retry_ms);

}  // namespace plexus::client
