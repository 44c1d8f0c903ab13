// Addressing the control socket, shared by plexusd, libplexus and the tools.
#pragma once

#include <sys/un.h>

#include <string>

namespace plexus::shm {

// The sockaddr for a filesystem unix socket. Throws std::invalid_argument naming the
// path when it does not fit sun_path.
sockaddr_un unix_socket_address(const std::string& path);

// True when something accepts connections on path (a running plexusd); false for a
// missing, stale or unusable path.
bool unix_socket_answers(const std::string& path);

}  // namespace plexus::shm
