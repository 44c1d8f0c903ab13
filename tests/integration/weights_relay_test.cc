// The weight store across nodes (plexusd processes on loopback): a model's key made on the
// publisher's node, subscribers on two other nodes, versions pushed down the chain of them
// and pulled there exact, a late joiner sent the newest version at once, and a node whose
// store has no room for a version passed over, and a node lost lately tried after the others.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "plexus/plexus.h"
#include "tests/integration/command_output.h"
#include "tests/integration/loopback_nodes.h"
#include "tests/integration/rank_processes.h"

namespace plexus::test {
namespace {

std::string last_error() { return plexus_get_last_error(); }

// Polls for up to 60 s.
bool eventually(const std::function<bool()>& check) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < until) {
    if (check()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }
void touch(const std::string& path) {
  std::ofstream(path + ".tmp") << "1";
  std::rename((path + ".tmp").c_str(), path.c_str());
}

// The trainer's side: `model`'s key made and handed out in `file` (written whole at once).
std::string write_key(const std::string& model, const std::string& file) {
  plexus_unique_id_t key;
  if (plexus_weights_key(model.c_str(), &key) != PLEXUS_SUCCESS) return "key: " + last_error();
  std::ofstream(file + ".tmp", std::ios::binary)
      .write(reinterpret_cast<const char*>(&key), sizeof key);
  std::rename((file + ".tmp").c_str(), file.c_str());
  return "";
}

// A rollout node's side: the key, once `file` is there.
bool read_key(const std::string& file, plexus_unique_id_t& key) {
  if (!eventually([&] { return exists(file); })) return false;
  std::ifstream(file, std::ios::binary).read(reinterpret_cast<char*>(&key), sizeof key);
  return true;
}

// Version v's tensors: 5 MiB and 100 bytes (one shard of eleven 512 KiB ranges), every byte from v
// and its position.
struct Weights {
  std::vector<uint8_t> big = std::vector<uint8_t>(5 << 20);
  std::vector<uint8_t> small = std::vector<uint8_t>(100);
  void fill(uint64_t v) {
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 31 + v);
    for (size_t i = 0; i < small.size(); ++i) small[i] = static_cast<uint8_t>(i + v * 7);
  }
  std::vector<plexus_weight_tensor_t> table() {
    return {{"layers.0.weight", big.data(), big.size()},
            {"layers.0.bias", small.data(), small.size()}};
  }
};

// Whether node `node`'s log has `text`.
bool logged(const Nodes& nodes, size_t node, const std::string& text) {
  return nodes[node]->log().find(text) != std::string::npos;
}

// A chain of b, then c, made before the first publish. The trainer's side: the key handed
// out in `key_file`, then both subscribed ("" or why not).
std::string hand_out_key(const Nodes& nodes, const std::string& model,
                         const std::string& key_file) {
  if (std::string e = write_key(model, key_file); !e.empty()) return e;
  return eventually([&] { return logged(nodes, 0, "(2 node(s))"); }) ? "" : "never 2 subscribers";
}
// A rollout node's side (rank 1 on b, rank 2 on c, after b): the key read and subscribed.
std::string subscribe_in_order(const Nodes& nodes, int rank, const std::string& model,
                               const std::string& key_file) {
  plexus_unique_id_t key;
  if (!read_key(key_file, key)) return "no key";
  if (rank == 2 && !eventually([&] { return logged(nodes, 0, "node b subscribed"); })) {
    return "b's subscription never reached a";
  }
  if (plexus_weights_subscribe(&key, model.c_str()) != PLEXUS_SUCCESS) {
    return "subscribe: " + last_error();
  }
  return "";
}

// The trainer's side: version v of `model` published from this process: "" or why not.
std::string publish_version(const std::string& model, uint64_t v) {
  Weights w;
  w.fill(v);
  auto table = w.table();
  if (plexus_weights_publish(model.c_str(), v, table.data(), table.size()) == PLEXUS_SUCCESS) {
    return "";
  }
  return "publish " + std::to_string(v) + ": " + last_error();
}

std::string exact(Weights& got, uint64_t v) {
  Weights want;
  want.fill(v);
  if (got.big != want.big) return "layers.0.weight is not version " + std::to_string(v) + "'s";
  if (got.small != want.small) return "layers.0.bias is not version " + std::to_string(v) + "'s";
  return "";
}

// Pulls the newest version of `model` newer than `after`: "" when it is `want`, exact.
std::string pull_exact(const std::string& model, uint64_t after, uint64_t want) {
  Weights got;
  auto table = got.table();
  uint64_t version = 0;
  if (plexus_weights_pull(model.c_str(), 0, after, 60000, table.data(), table.size(), &version) !=
      PLEXUS_SUCCESS) {
    return "pull newer than " + std::to_string(after) + ": " + last_error();
  }
  if (version != want)
    return "pulled version " + std::to_string(version) + ", not " + std::to_string(want);
  return exact(got, version);
}

TEST(WeightsRelayTest, VersionsGoDownTheChainOfSubscribedNodesExactAndALateJoinerGetsTheNewest) {
  auto nodes = start_nodes(3);
  const std::vector<std::string> sockets = sockets_for(nodes, {0, 1, 2});
  const std::string dir = ::testing::TempDir() + "/weights-relay-" + std::to_string(::getpid());
  const std::string key_file = dir + "-key";
  const std::string model = "policy";
  for (const char* f : {"-key", "-b1", "-p2", "-c2"}) std::remove((dir + f).c_str());
  auto results = run_ranks_across(
      sockets,
      [&](int rank, int, const plexus_unique_id_t&) -> std::string {
        if (rank == 0) {  // the trainer's node
          if (std::string e = write_key(model, key_file); !e.empty()) return e;
          for (uint64_t v = 1; v <= 3; ++v) {
            if (v == 2 && !eventually([&] { return exists(dir + "-b1"); })) return "b never had 1";
            if (v == 3 && !eventually([&] { return exists(dir + "-c2"); })) return "c never had 2";
            if (std::string e = publish_version(model, v); !e.empty()) return e;
            if (v == 2) touch(dir + "-p2");
          }
          return "";
        }
        plexus_unique_id_t key;
        if (!read_key(key_file, key)) return "no key";
        if (rank == 1) {  // subscribed from the start: versions 1, 2 and 3 come down the chain
          if (plexus_weights_subscribe(&key, model.c_str()) != PLEXUS_SUCCESS) {
            return "subscribe: " + last_error();
          }
          if (std::string e = pull_exact(model, 0, 1); !e.empty()) return e;
          touch(dir + "-b1");
          if (std::string e = pull_exact(model, 1, 2); !e.empty()) return e;
          return pull_exact(model, 2, 3);
        }
        // Rank 2 joins late: version 2 is sent to it at once, version 3 down the chain.
        if (!eventually([&] { return exists(dir + "-p2"); })) return "2 never published";
        if (plexus_weights_subscribe(&key, model.c_str()) != PLEXUS_SUCCESS) {
          return "subscribe: " + last_error();
        }
        if (std::string e = pull_exact(model, 0, 2); !e.empty()) return e;
        touch(dir + "-c2");
        return pull_exact(model, 2, 3);
      },
      std::chrono::seconds(120));
  for (const char* f : {"-key", "-b1", "-p2", "-c2"}) std::remove((dir + f).c_str());
  EXPECT_EQ(failures(results), "") << logs(nodes);
  // Node c holds the model its subscription named.
  const CommandOutput models =
      run_command({PLEXUSCTL_PATH, "--socket", nodes[2]->socket_path(), "models"});
  EXPECT_THAT(models.out, ::testing::HasSubstr("policy"));
}

// Node b's store has no room for the version (a 4 MiB cap, a 5 MiB version): it says so to
// node a, which passes it over, and node c after it in the chain gets the version exact.
TEST(WeightsRelayTest, ANodeWhoseStoreHasNoRoomIsPassedOverAndTheNodeAfterItGetsTheVersion) {
  Nodes nodes;
  for (const char* name : {"a", "b", "c"}) {
    std::vector<std::string> args = {"--peer-listen", "127.0.0.1:0", "--node-name", name};
    if (std::string(name) == "b") args.insert(args.end(), {"--weight-store-bytes", "4194304"});
    nodes.push_back(std::make_unique<DaemonProcess>(args));
  }
  const std::vector<std::string> sockets = sockets_for(nodes, {0, 1, 2});
  const std::string dir = ::testing::TempDir() + "/weights-refuse-" + std::to_string(::getpid());
  const std::string key_file = dir + "-key";
  const std::string model = "policy";
  for (const char* f : {"-key", "-c1"}) std::remove((dir + f).c_str());
  auto results = run_ranks_across(
      sockets,
      [&](int rank, int, const plexus_unique_id_t&) -> std::string {
        if (rank == 0) {
          if (std::string e = hand_out_key(nodes, model, key_file); !e.empty()) return e;
          return publish_version(model, 1);
        }
        if (std::string e = subscribe_in_order(nodes, rank, model, key_file); !e.empty()) return e;
        if (rank == 1) {  // it stays up until c has the version (its daemon is the test's)
          return eventually([&] { return exists(dir + "-c1"); }) ? "" : "c never had 1";
        }
        if (std::string e = pull_exact(model, 0, 1); !e.empty()) return e;
        touch(dir + "-c1");
        return "";
      },
      std::chrono::seconds(120));
  for (const char* f : {"-key", "-c1"}) std::remove((dir + f).c_str());
  EXPECT_EQ(failures(results), "") << logs(nodes);
  EXPECT_TRUE(logged(nodes, 1, "(relay")) << logs(nodes);  // its refusal, naming the relay
  EXPECT_TRUE(logged(nodes, 0, "will not keep version 1")) << logs(nodes);
}

// A listener on `port` of 127.0.0.1 that never accepts: connections complete in the kernel
// and then hear nothing, as with a node whose daemon hangs. -1 if it cannot be made.
int silent_listener(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(static_cast<uint16_t>(port));
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 || ::listen(fd, 64) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Node b dies after version 1 went down the chain a -> b -> c, and its port then answers
// connections but never speaks (a daemon that hangs, or a host whose kernel still answers).
// With every daemon's --connect-timeout-ms at 10 minutes, version 2 reaches c only because a
// tries b, lost lately, after c: c has it from a, and tries b itself at the chain's end.
TEST(WeightsRelayTest, ANodeLostLatelyIsTriedLastSoANodeAfterItInTheChainIsNotHeldUp) {
  Nodes nodes;
  for (const char* name : {"a", "b", "c"}) {
    nodes.push_back(std::make_unique<DaemonProcess>(std::vector<std::string>{
        "--peer-listen", "127.0.0.1:0", "--node-name", name, "--connect-timeout-ms", "600000"}));
  }
  const std::vector<std::string> sockets = sockets_for(nodes, {0, 1, 2});
  const std::string dir = ::testing::TempDir() + "/weights-lost-" + std::to_string(::getpid());
  const std::string key_file = dir + "-key";
  const std::string model = "policy";
  const char* files[] = {"-key", "-b1", "-c1", "-dead", "-c2"};
  for (const char* f : files) std::remove((dir + f).c_str());
  const std::string b_log = nodes[1]->log();
  const auto port_at = b_log.find("advertised: 127.0.0.1:");
  ASSERT_NE(port_at, std::string::npos) << b_log;
  const int b_port = std::stoi(b_log.substr(port_at + 22));
  // The test's own part: b killed once both have version 1, its port made silent.
  int silent = -1;
  std::thread killer([&] {
    if (!eventually([&] { return exists(dir + "-b1") && exists(dir + "-c1"); })) return;
    nodes[1]->kill_now();
    silent = silent_listener(b_port);
    touch(dir + "-dead");
  });
  auto results = run_ranks_across(
      sockets,
      [&](int rank, int, const plexus_unique_id_t&) -> std::string {
        if (rank == 0) {
          if (std::string e = hand_out_key(nodes, model, key_file); !e.empty()) return e;
          for (uint64_t v = 1; v <= 2; ++v) {
            if (v == 2 && !eventually([&] {
                  return exists(dir + "-dead") &&
                         logged(nodes, 0, "data connection to node b lost");
                })) {
              return "a never lost b";
            }
            if (std::string e = publish_version(model, v); !e.empty()) return e;
          }
          return eventually([&] { return exists(dir + "-c2"); })
                     ? ""
                     : "c never had version 2: the dead b held it up";
        }
        if (std::string e = subscribe_in_order(nodes, rank, model, key_file); !e.empty()) return e;
        if (std::string e = pull_exact(model, 0, 1); !e.empty()) return e;
        if (rank == 1) {
          touch(dir + "-b1");
          return "";
        }
        touch(dir + "-c1");
        if (std::string e = pull_exact(model, 1, 2); !e.empty()) return e;
        touch(dir + "-c2");
        return "";
      },
      std::chrono::seconds(150));
  killer.join();
  if (silent >= 0) ::close(silent);
  for (const char* f : files) std::remove((dir + f).c_str());
  EXPECT_GE(silent, 0) << "port " << b_port << " could not be listened on again";
  EXPECT_EQ(failures(results), "") << logs(nodes);
  EXPECT_TRUE(logged(nodes, 0, "node b was lost lately, so it is tried after the others"))
      << logs(nodes);
}

}  // namespace
}  // namespace plexus::test
