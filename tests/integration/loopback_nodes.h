// Several plexusd processes on loopback as the nodes of one cluster ("a", "b", ...), each
// with its own socket and peer port, for tests of communicators across nodes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tests/integration/daemon_process.h"

namespace plexus::test {

using Nodes = std::vector<std::unique_ptr<DaemonProcess>>;

// n daemons named a, b, ... listening for peers on 127.0.0.1, each with `extra` arguments.
Nodes start_nodes(int n, std::vector<std::string> extra = {});
// rank_node[r] = index of the daemon rank r uses: the socket of each rank.
std::vector<std::string> sockets_for(const Nodes& nodes, const std::vector<int>& rank_node);
// Every node's log, each under a header naming it.
std::string logs(const Nodes& nodes);
// Waits (up to 10 s) until every one of `ranks` rank processes has written
// `prefix`<rank>, its sign that it reached the point the test waits for.
void wait_for_rank_files(const std::string& prefix, size_t ranks);

}  // namespace plexus::test
