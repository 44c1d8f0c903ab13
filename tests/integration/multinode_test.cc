// Communicators whose ranks live on several daemons ("nodes" here are plexusd processes
// on loopback, each with its own socket and peer port): every collective, uneven and
// interleaved placements, every algorithm forced, a peer daemon killed mid-allreduce, a
// cluster secret, and strangers on the peer port. The network-namespace cluster tests
// (tests/cluster) run the same across real interfaces.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <regex>
#include <thread>

#include "tests/integration/collective_cases.h"
#include "tests/integration/command_output.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/loopback_nodes.h"
#include "tests/integration/rank_processes.h"

namespace plexus::test {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// "" when an init returned `want` with an error naming `text`; else what it did instead.
std::string init_failed_as(plexus_result_t r, plexus_result_t want, const std::string& text) {
  if (r == PLEXUS_SUCCESS) return "init succeeded";
  if (r != want || std::string(plexus_get_last_error()).find(text) == std::string::npos)
    return call_failed("init", r);
  return "";
}

std::vector<Case> cases_for(int n) {
  std::vector<Case> cases;
  for (const char* coll :
       {"allreduce", "reduce", "reducescatter", "broadcast", "allgather", "alltoall", "sendrecv"}) {
    const std::string name = coll;
    const bool reduces = name == "allreduce" || name == "reduce" || name == "reducescatter";
    for (plexus_dtype_t dtype : {PLEXUS_FLOAT32, PLEXUS_INT64, PLEXUS_BFLOAT16}) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{4097}, size_t{300007}}) {
        for (plexus_redop_t op : {PLEXUS_SUM, PLEXUS_MAX, PLEXUS_AVG}) {
          if (!reduces && op != PLEXUS_SUM) continue;
          if (count == 300007 && op != PLEXUS_SUM) continue;
          for (bool in_place : {false, true}) {
            if (in_place && name == "sendrecv") continue;
            const int root =
                static_cast<int>((count + static_cast<size_t>(dtype)) % static_cast<size_t>(n));
            cases.push_back(Case{name, dtype, op, count, in_place, root});
          }
        }
      }
    }
  }
  return cases;
}

std::string run_cases(int rank, int n, const plexus_unique_id_t& id, const std::vector<Case>& cases,
                      size_t largest) {
  plexus_comm_t comm = nullptr;
  if (plexus_result_t r = plexus_comm_init_rank(&comm, n, id, rank); r != PLEXUS_SUCCESS) {
    return call_failed("plexus_comm_init_rank", r);
  }
  const size_t bytes = static_cast<size_t>(n) * largest * 8;
  Buffers buf;
  if (plexus_alloc(reinterpret_cast<void**>(&buf.a), bytes) != PLEXUS_SUCCESS ||
      plexus_alloc(reinterpret_cast<void**>(&buf.b), bytes) != PLEXUS_SUCCESS) {
    return std::string("plexus_alloc: ") + plexus_get_last_error();
  }
  for (const Case& c : cases) {
    std::string error = run_case(c, rank, n, comm, buf);
    if (!error.empty()) return error;
  }
  if (plexus_result_t r = plexus_comm_destroy(comm); r != PLEXUS_SUCCESS) {
    return call_failed("plexus_comm_destroy", r);
  }
  return {};
}

class PlacementTest : public ::testing::TestWithParam<std::vector<int>> {};

TEST_P(PlacementTest, EveryCollectiveIsExact) {
  const std::vector<int>& rank_node = GetParam();
  const int n = static_cast<int>(rank_node.size());
  const int node_count = *std::max_element(rank_node.begin(), rank_node.end()) + 1;
  auto nodes = start_nodes(node_count);
  const auto cases = cases_for(n);
  auto results = run_ranks_across(sockets_for(nodes, rank_node),
                                  [&](int rank, int nranks, const plexus_unique_id_t& id) {
                                    return run_cases(rank, nranks, id, cases, 300007);
                                  });
  EXPECT_EQ(failures(results), "") << logs(nodes);
}

INSTANTIATE_TEST_SUITE_P(Placements, PlacementTest,
                         ::testing::Values(std::vector<int>{0, 1},
                                           std::vector<int>{0, 0, 1, 2, 2, 2},
                                           std::vector<int>{0, 1, 2, 0, 2, 1},
                                           std::vector<int>{2, 1, 0, 3}),
                         [](const ::testing::TestParamInfo<std::vector<int>>& param) {
                           std::string name;
                           for (int n : param.param)
                             name += std::string(1, static_cast<char>('a' + n));
                           return name;
                         });

class ForcedAlgorithmTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ForcedAlgorithmTest, CollectivesItServesAreExact) {
  auto nodes = start_nodes(3);
  std::vector<Case> cases;
  for (const Case& c : cases_for(4)) {
    if (c.dtype == PLEXUS_FLOAT32 && c.op != PLEXUS_MAX && c.collective != "sendrecv") {
      cases.push_back(c);
    }
  }
  const std::string algo = GetParam();
  auto results = run_ranks_across(sockets_for(nodes, {0, 1, 1, 2}),
                                  [&](int rank, int nranks, const plexus_unique_id_t& id) {
                                    ::setenv("PLEXUS_ALGO", algo.c_str(), 1);
                                    return run_cases(rank, nranks, id, cases, 300007);
                                  });
  EXPECT_EQ(failures(results), "") << logs(nodes);
  // It was used (where it serves the collective), not silently replaced.
  EXPECT_THAT(nodes[0]->log(), HasSubstr(" by " + algo + " across 3 nodes"));
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ForcedAlgorithmTest,
                         ::testing::Values("ring", "rhd", "rd", "bruck", "binomial", "chain",
                                           "pairwise"));

TEST(MultiNodeTest, DifferentAlgorithmsOnTwoNodesAreRefusedByName) {
  auto nodes = start_nodes(2);
  auto results = run_ranks_across(
      sockets_for(nodes, {0, 1}), [&](int rank, int nranks, const plexus_unique_id_t& id) {
        ::setenv("PLEXUS_ALGO", rank == 0 ? "ring" : "rd", 1);
        plexus_comm_t comm = nullptr;
        plexus_result_t r = plexus_comm_init_rank_timeout(&comm, nranks, id, rank, 5000);
        if (r == PLEXUS_SUCCESS) return std::string("init succeeded");
        const std::string e = plexus_get_last_error();
        if (e.find("PLEXUS_ALGO") == std::string::npos) return e;
        return std::string();
      });
  EXPECT_EQ(failures(results), "") << logs(nodes);
}

TEST(MultiNodeTest, CountMismatchAcrossNodesFailsInsteadOfHanging) {
  auto nodes = start_nodes(2);
  auto results = run_ranks_across(
      sockets_for(nodes, {0, 1}),
      [&](int rank, int nranks, const plexus_unique_id_t& id) {
        plexus_comm_t comm = nullptr;
        if (plexus_result_t r = plexus_comm_init_rank(&comm, nranks, id, rank);
            r != PLEXUS_SUCCESS) {
          return call_failed("init", r);
        }
        std::vector<float> data(rank == 0 ? 1000 : 2000, 1.0f);
        plexus_request_t req = nullptr;
        plexus_result_t r = plexus_allreduce(data.data(), data.data(), data.size(), PLEXUS_FLOAT32,
                                             PLEXUS_SUM, comm, &req);
        if (r == PLEXUS_SUCCESS) r = plexus_wait(&req);
        if (r == PLEXUS_SUCCESS) return std::string("a mismatched allreduce succeeded");
        plexus_comm_abort(comm);
        return std::string();
      },
      std::chrono::seconds(20));
  EXPECT_EQ(failures(results), "") << logs(nodes);
}

TEST(MultiNodeTest, ARootThatFinishesAndLeavesEarlyDoesNotFailTheLateReceivers) {
  auto nodes = start_nodes(2);
  auto results = run_ranks_across(
      sockets_for(nodes, {0, 1}),
      [&](int rank, int nranks, const plexus_unique_id_t& id) {
        plexus_comm_t comm = nullptr;
        if (plexus_result_t r = plexus_comm_init_rank(&comm, nranks, id, rank);
            r != PLEXUS_SUCCESS) {
          return call_failed("init", r);
        }
        std::vector<float> data(100000);
        if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
        for (int i = 0; i < 3; ++i) {
          for (size_t j = 0; j < data.size(); ++j)
            data[j] = rank == 0 ? float(i * 7 + j % 13) : -1.0f;
          plexus_request_t req = nullptr;
          std::string error = wait_for(plexus_broadcast(data.data(), data.data(), data.size(),
                                                        PLEXUS_FLOAT32, 0, comm, &req),
                                       &req, "broadcast");
          if (!error.empty()) return "broadcast " + std::to_string(i) + ": " + error;
          for (size_t j = 0; j < data.size(); ++j) {
            if (data[j] != float(i * 7 + j % 13))
              return "broadcast " + std::to_string(i) + " wrong";
          }
        }
        if (rank == 0) {
          // Leaves before rank 1 even called its broadcasts.
          return plexus_comm_destroy(comm) == PLEXUS_SUCCESS ? std::string() : "destroy failed";
        }
        plexus_request_t req = nullptr;
        plexus_result_t r = plexus_allreduce(data.data(), data.data(), data.size(), PLEXUS_FLOAT32,
                                             PLEXUS_SUM, comm, &req);
        if (r == PLEXUS_SUCCESS) r = plexus_wait(&req);
        if (r == PLEXUS_SUCCESS) return std::string("an allreduce without rank 0 succeeded");
        const std::string e = plexus_get_last_error();
        if (e.find("node a") == std::string::npos || e.find("rank 0") == std::string::npos) {
          return "the error does not name rank 0 on node a: " + e;
        }
        plexus_comm_destroy(comm);
        return std::string();
      },
      std::chrono::seconds(30));
  EXPECT_EQ(failures(results), "") << logs(nodes);
}

TEST(MultiNodeTest, ADrainingNodeFailsANewCommunicatorOnEveryNodeAtOnce) {
  auto nodes = start_nodes(2);
  const CommandOutput drain =
      run_command({PLEXUSCTL_PATH, "--socket", nodes[1]->socket_path(), "node", "drain"});
  ASSERT_EQ(drain.exit_code, 0) << drain.err;
  // Rank 0 on a (the root), rank 1 on b (draining). Without word from b, rank 0 would wait
  // its whole 30 s init timeout.
  auto results = run_ranks_across(
      sockets_for(nodes, {0, 1}),
      [&](int rank, int nranks, const plexus_unique_id_t& id) {
        plexus_comm_t comm = nullptr;
        const auto start = Clock::now();
        const plexus_result_t r = plexus_comm_init_rank_timeout(&comm, nranks, id, rank, 30000);
        if (std::string error =
                init_failed_as(r, PLEXUS_ERR_DAEMON_UNAVAILABLE, "node b is draining");
            !error.empty())
          return error;
        if (Clock::now() - start > std::chrono::seconds(5))
          return "failed only after " +
                 std::to_string(
                     std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start)
                         .count()) +
                 " ms: " + plexus_get_last_error();
        return std::string();
      },
      std::chrono::seconds(60));
  EXPECT_EQ(failures(results), "") << logs(nodes);
}

TEST(MultiNodeTest, AnInitTimeoutReachesEveryNodeAsATimeoutNamingTheMissingRank) {
  auto nodes = start_nodes(2);
  // Ranks 0 on a (the root) and 1 on b of a communicator of 3: rank 2 never comes. Node b
  // learns of the timeout from the root, with its code (JoinFailed carries it).
  auto results = run_ranks_across(
      sockets_for(nodes, {0, 1}),
      [&](int rank, int nranks, const plexus_unique_id_t& id) {
        plexus_comm_t comm = nullptr;
        const plexus_result_t r = plexus_comm_init_rank_timeout(&comm, nranks + 1, id, rank, 1000);
        return init_failed_as(r, PLEXUS_ERR_TIMEOUT, "rank(s) 2 of 3 never joined");
      },
      std::chrono::seconds(30));
  EXPECT_EQ(failures(results), "") << logs(nodes);
}

TEST(MultiNodeTest, ANodeKilledDuringInitFailsTheOthersAsPeerLostNamingIt) {
  auto nodes = start_nodes(3);
  // Ranks 0 on a (the root), 1 on b, 2 on c, of a communicator of 4: it cannot form. Node
  // c's daemon is killed once its rank has joined; the root fails the init for a and b at
  // once with PEER_LOST naming node c, not after their 20 s init timeout.
  const std::string flag = ::testing::TempDir() + "plexus-initkill-" + std::to_string(::getpid());
  std::atomic<int64_t> killed_ms{0};
  auto results = run_ranks_across(
      sockets_for(nodes, {0, 1, 2}),
      [&](int rank, int nranks, const plexus_unique_id_t& id) -> std::string {
        std::ofstream(flag + ".joining" + std::to_string(rank)) << "joining";
        plexus_comm_t comm = nullptr;
        const plexus_result_t r = plexus_comm_init_rank_timeout(&comm, nranks + 1, id, rank, 20000);
        if (rank == 2) return {};  // its daemon is killed under it
        if (std::string error = init_failed_as(r, PLEXUS_ERR_PEER_LOST, "node c"); !error.empty())
          return error;
        if (!std::ifstream(flag).good())
          return std::string("failed before the kill: ") + plexus_get_last_error();
        return std::string();
      },
      std::chrono::seconds(60),
      [&](const std::vector<pid_t>& pids) {
        wait_for_rank_files(flag + ".joining", pids.size());
        std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // the joins reach the root
        std::ofstream(flag) << "killed";
        nodes[2]->kill_now();
        ::kill(pids[2], SIGKILL);
        killed_ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
                .count();
      });
  const auto ended = Clock::now();
  for (size_t r = 0; r < 3; ++r) std::remove((flag + ".joining" + std::to_string(r)).c_str());
  std::remove(flag.c_str());
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_TRUE(results[r].ok) << "rank " << r << ": " << results[r].message << "\n" << logs(nodes);
  }
  // Well inside the 20 s init timeout.
  EXPECT_LT(
      std::chrono::duration_cast<std::chrono::milliseconds>(ended.time_since_epoch()).count() -
          killed_ms.load(),
      10000);
}

TEST(MultiNodeTest, KilledPeerDaemonFailsEveryRankWithinTwoSecondsNamingItsNode) {
  auto nodes = start_nodes(3);
  // Ranks 0,1 on a; 2 on b; 3 on c (killed).
  const std::vector<int> rank_node = {0, 0, 1, 2};
  const std::string flag = ::testing::TempDir() + "plexus-killed-" + std::to_string(::getpid());
  std::remove(flag.c_str());
  auto results = run_ranks_across(
      sockets_for(nodes, rank_node),
      [&](int rank, int nranks, const plexus_unique_id_t& id) -> std::string {
        plexus_comm_t comm = nullptr;
        if (plexus_result_t r = plexus_comm_init_rank(&comm, nranks, id, rank);
            r != PLEXUS_SUCCESS) {
          return call_failed("init", r);
        }
        if (rank == 3) {
          // Its daemon is killed under it: it only has to notice, not to report anything.
          std::ofstream(flag + ".ready" + std::to_string(rank)) << "ready";
          ::pause();
          return {};
        }
        std::vector<float> data(4 << 20, 1.0f);
        std::ofstream(flag + ".ready" + std::to_string(rank)) << "ready";
        for (int i = 0; i < 100000; ++i) {
          plexus_request_t req = nullptr;
          plexus_result_t r = plexus_allreduce(data.data(), data.data(), data.size(),
                                               PLEXUS_FLOAT32, PLEXUS_SUM, comm, &req);
          const auto submitted = Clock::now();
          if (r == PLEXUS_SUCCESS) r = plexus_wait(&req);
          if (r == PLEXUS_SUCCESS) continue;
          const auto waited = Clock::now() - submitted;
          const std::string error = plexus_get_last_error();
          if (error.find("node c") == std::string::npos)
            return "error does not name node c: " + error;
          std::ifstream killed_at(flag);
          if (!killed_at) return "failed before the kill: " + error;
          if (waited > std::chrono::seconds(2)) return "took more than 2 s to fail";
          plexus_comm_abort(comm);
          return {};
        }
        return "never failed";
      },
      std::chrono::seconds(60),
      [&](const std::vector<pid_t>& pids) {
        wait_for_rank_files(flag + ".ready", pids.size());
        std::this_thread::sleep_for(std::chrono::milliseconds(300));  // mid-allreduce
        std::ofstream(flag) << "killed";
        nodes[2]->kill_now();
        ::kill(pids[3], SIGKILL);
      });
  for (size_t r = 0; r < 4; ++r) std::remove((flag + ".ready" + std::to_string(r)).c_str());
  std::remove(flag.c_str());
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_TRUE(results[r].ok) << "rank " << r << ": " << results[r].message << "\n" << logs(nodes);
  }
  // The survivors serve a new communicator.
  auto again = run_ranks_across(
      sockets_for(nodes, {0, 1, 0}), [&](int rank, int nranks, const plexus_unique_id_t& id) {
        std::vector<Case> cases = {Case{"allreduce", PLEXUS_FLOAT32, PLEXUS_SUM, 100003, false, 0}};
        return run_cases(rank, nranks, id, cases, 100003);
      });
  EXPECT_EQ(failures(again), "") << logs(nodes);
}

// The port a daemon accepts peers on, from its log.
int peer_port(DaemonProcess& node) {
  for (int i = 0; i < 100; ++i) {
    std::smatch m;
    const std::string log = node.log();
    if (std::regex_search(log, m, std::regex("advertised: 127\\.0\\.0\\.1:([0-9]+)"))) {
      return std::stoi(m[1]);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

TEST(MultiNodeTest, StrangersOnThePeerPortAreRefusedAndDisturbNothing) {
  auto nodes = start_nodes(2);
  const int port = peer_port(*nodes[0]);
  ASSERT_GT(port, 0) << nodes[0]->log();
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // Garbage, a data frame header without any handshake, and a silent connection.
  const std::vector<std::string> payloads = {
      std::string(4096, '\xa5'),
      std::string("\x50\x58\x01\x01\x00\x00\x00\x10", 8) + std::string(40, '\0'), ""};
  std::vector<int> fds;
  for (const auto& p : payloads) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    if (!p.empty()) {
      ASSERT_EQ(::send(fd, p.data(), p.size(), MSG_NOSIGNAL), static_cast<ssize_t>(p.size()));
    }
    fds.push_back(fd);
  }
  auto results = run_ranks_across(
      sockets_for(nodes, {0, 1, 1}), [&](int rank, int nranks, const plexus_unique_id_t& id) {
        std::vector<Case> cases = {Case{"allreduce", PLEXUS_FLOAT32, PLEXUS_SUM, 4097, false, 0},
                                   Case{"allgather", PLEXUS_INT32, PLEXUS_SUM, 333, false, 0}};
        return run_cases(rank, nranks, id, cases, 4097);
      });
  EXPECT_EQ(failures(results), "") << logs(nodes);
  for (int fd : fds) ::close(fd);
  const std::string log = nodes[0]->log();
  EXPECT_THAT(log, HasSubstr("refused: a handshake frame of"));
}

std::string write_secret(const std::string& name, const std::string& bytes) {
  const std::string path = ::testing::TempDir() + name + std::to_string(::getpid());
  std::ofstream(path) << bytes;
  ::chmod(path.c_str(), 0600);
  return path;
}

TEST(MultiNodeTest, ClusterSecretAdmitsHoldersAndRefusesOthers) {
  const std::string good = write_secret("plexus-secret-good", "0123456789abcdef-cluster");
  const std::string bad = write_secret("plexus-secret-bad", "fedcba9876543210-cluster");
  auto nodes = start_nodes(2, {"--cluster-secret-file", good});
  auto ok = run_ranks_across(
      sockets_for(nodes, {0, 1}), [&](int rank, int nranks, const plexus_unique_id_t& id) {
        std::vector<Case> cases = {Case{"allreduce", PLEXUS_FLOAT32, PLEXUS_SUM, 1000, false, 0}};
        return run_cases(rank, nranks, id, cases, 1000);
      });
  EXPECT_EQ(failures(ok), "") << logs(nodes);
  // A third daemon with another secret, and a fourth with none, cannot join.
  DaemonProcess wrong(
      {"--peer-listen", "127.0.0.1:0", "--node-name", "wrong", "--cluster-secret-file", bad});
  DaemonProcess none({"--peer-listen", "127.0.0.1:0", "--node-name", "none"});
  for (DaemonProcess* outsider : {&wrong, &none}) {
    auto refused = run_ranks_across(
        {nodes[0]->socket_path(), outsider->socket_path()},
        [&](int rank, int nranks, const plexus_unique_id_t& id) -> std::string {
          plexus_comm_t comm = nullptr;
          plexus_result_t r = plexus_comm_init_rank_timeout(&comm, nranks, id, rank, 3000);
          if (r == PLEXUS_SUCCESS) return "joined without the secret";
          return {};
        },
        std::chrono::seconds(30));
    EXPECT_EQ(failures(refused), "") << logs(nodes) << outsider->log();
  }
  EXPECT_THAT(nodes[0]->log(), HasSubstr("failed to prove it holds the cluster secret"));
  EXPECT_THAT(nodes[0]->log(), HasSubstr("node none has no cluster secret"));
  std::remove(good.c_str());
  std::remove(bad.c_str());
}

}  // namespace
}  // namespace plexus::test
