// A connected socket's end as a path names it: text for messages, and the key path notices
// use (for IPv4, address << 16 | port). Every transport whose path was set up over a socket
// (TCP, and RDMA's queue pairs exchanged over one) names its ends this way, so that a notice
// about a path means the same on both sides whatever carries it.
#pragma once

#include "transports/path/data_path.h"

namespace plexus::transports {

PathEndpoint socket_endpoint(int fd, bool remote);

}  // namespace plexus::transports
