#include "tests/integration/loopback_nodes.h"

#include <chrono>
#include <fstream>
#include <thread>

namespace plexus::test {

Nodes start_nodes(int n, std::vector<std::string> extra) {
  Nodes nodes;
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> args = {"--peer-listen", "127.0.0.1:0", "--node-name",
                                     std::string(1, static_cast<char>('a' + i))};
    args.insert(args.end(), extra.begin(), extra.end());
    nodes.push_back(std::make_unique<DaemonProcess>(args));
  }
  return nodes;
}

std::vector<std::string> sockets_for(const Nodes& nodes, const std::vector<int>& rank_node) {
  std::vector<std::string> sockets;
  for (int n : rank_node) sockets.push_back(nodes[static_cast<size_t>(n)]->socket_path());
  return sockets;
}

std::string logs(const Nodes& nodes) {
  std::string text;
  for (size_t i = 0; i < nodes.size(); ++i) {
    text += "---- node " + std::string(1, static_cast<char>('a' + i)) + " ----\n" + nodes[i]->log();
  }
  return text;
}

void wait_for_rank_files(const std::string& prefix, size_t ranks) {
  for (int i = 0; i < 500; ++i) {
    bool all = true;
    for (size_t r = 0; r < ranks; ++r) all &= std::ifstream(prefix + std::to_string(r)).good();
    if (all) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace plexus::test
