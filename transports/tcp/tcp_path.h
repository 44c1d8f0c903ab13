// A path to a peer daemon over one TCP connection: TcpConnection behind the DataPath
// interface, with what the kernel measures (TCP_INFO) and an abortive close.
#pragma once

#include <memory>

#include "transports/path/data_path.h"

namespace plexus::transports {

// The opener of a path over `fd` (a connected, authenticated stream socket), which it owns
// from now on.
PathOpener tcp_path_opener(int fd);

}  // namespace plexus::transports
