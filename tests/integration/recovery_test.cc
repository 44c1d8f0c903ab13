// A communicator that lost a member goes on: a rank revokes it (every rank's pending and
// later ops fail naming who and why, on nodes linked to the revoker or not), and the
// survivors shrink it to a successor without a unique id, with a second node lost during
// the shrink, ranks that disagree on whom to exclude, and ops in flight ended first.
#include <signal.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/collective_cases.h"
#include "tests/integration/command_output.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/loopback_nodes.h"
#include "tests/integration/rank_processes.h"
#include "tests/integration/shared_daemon_test.h"
#include "tests/integration/test_data.h"

namespace plexus::test {
namespace {

using Clock = std::chrono::steady_clock;

// "" when `r` is `want` and the error names every one of `words`; else what happened.
std::string failed_as(const char* call, plexus_result_t r, plexus_result_t want,
                      std::vector<std::string> words) {
  const std::string error = r == PLEXUS_SUCCESS ? "" : plexus_get_last_error();
  bool named = r == want;
  for (const auto& w : words) named = named && error.find(w) != std::string::npos;
  if (named) return {};
  return std::string(call) + ": expected " + plexus_result_string(want) + " naming " +
         (words.empty() ? "" : words.front()) + ", got " + describe(call, r);
}

// One float allreduce of 4097 elements on `comm`, checked exactly.
std::string exact_allreduce(plexus_comm_t comm) {
  int rank = 0;
  int n = 0;
  plexus_comm_user_rank(comm, &rank);
  plexus_comm_count(comm, &n);
  constexpr size_t kCount = 4097;
  std::vector<float> buf(kCount);
  fill_input(buf.data(), PLEXUS_FLOAT32, PLEXUS_SUM, rank, kCount);
  if (auto r = plexus_allreduce(buf.data(), buf.data(), kCount, PLEXUS_FLOAT32, PLEXUS_SUM, comm,
                                nullptr)) {
    return describe("allreduce", r);
  }
  return compare(buf.data(), PLEXUS_FLOAT32, kCount,
                 [&](size_t j) { return reduced_bits(PLEXUS_FLOAT32, PLEXUS_SUM, n, j); });
}

// Shrinks `comm` without `exclude`, checks its size and this rank's new place, runs exact
// allreduces on it and `then` (while both exist); destroys both.
std::string shrink_and_run(plexus_comm_t comm, int rank, std::vector<int> exclude, int flags,
                           int want_rank, const std::function<std::string()>& then = {}) {
  plexus_comm_t next = nullptr;
  if (auto r = plexus_comm_shrink(comm, exclude.data(), static_cast<int>(exclude.size()), flags,
                                  &next)) {
    return describe("shrink", r);
  }
  int n = 0;
  int me = -1;
  plexus_comm_count(next, &n);
  plexus_comm_user_rank(next, &me);
  int parent_n = 0;
  plexus_comm_count(comm, &parent_n);
  if (n != parent_n - static_cast<int>(exclude.size()) || me != want_rank) {
    return "rank " + std::to_string(rank) + " got place " + std::to_string(me) + " of " +
           std::to_string(n) + ", expected " + std::to_string(want_rank);
  }
  for (int round = 0; round < 3; ++round) {
    if (std::string error = exact_allreduce(next); !error.empty()) return "successor: " + error;
  }
  if (then) {
    if (std::string error = then(); !error.empty()) return error;
  }
  plexus_comm_destroy(next);
  plexus_comm_destroy(comm);
  return {};
}

// A member writes the growth's id to `path`; a new rank waits (up to 30 s) for it and joins.
std::string hand_out_grow_id(plexus_comm_t comm, const std::string& path) {
  plexus_unique_id_t id;
  if (auto r = plexus_comm_grow_id(comm, &id)) return describe("grow_id", r);
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp, std::ios::binary).write(reinterpret_cast<const char*>(&id), sizeof(id));
  return std::rename(tmp.c_str(), path.c_str()) == 0 ? "" : "cannot write " + path;
}

std::string join_growth(const std::string& path, int nranks, int rank, plexus_comm_t* comm) {
  plexus_unique_id_t id;
  for (int i = 0; i < 3000; ++i) {
    std::ifstream in(path, std::ios::binary);
    if (in.read(reinterpret_cast<char*>(&id), sizeof(id))) {
      if (auto r = plexus_comm_init_rank(comm, nranks, id, rank)) return describe("init", r);
      return {};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return "no growth id in " + path;
}

std::string temp_prefix(const char* what) {
  return ::testing::TempDir() + "plexus-" + what + "-" + std::to_string(::getpid()) + "-";
}

class RecoveryTest : public SharedDaemonTest {};

TEST_F(RecoveryTest, ARevokeFailsEveryRanksPendingAndLaterOpsNamingWhoAndWhy) {
  auto results = run_ranks(socket(), 3, [](int rank, int n, const auto& id) -> std::string {
    plexus_comm_t comm = nullptr;
    if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
    if (std::string error = exact_allreduce(comm); !error.empty()) return error;
    std::vector<float> buf(1024, 1.0f);
    if (rank == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      if (auto r = plexus_comm_revoke(comm, "checkpoint restore")) return describe("revoke", r);
    } else {
      // Waits for rank 0, which revokes instead of joining.
      const plexus_result_t r = plexus_allreduce(buf.data(), buf.data(), buf.size(), PLEXUS_FLOAT32,
                                                 PLEXUS_SUM, comm, nullptr);
      if (std::string e = failed_as("pending allreduce", r, PLEXUS_ERR_REVOKED,
                                    {"revoked by rank 0", "checkpoint restore"});
          !e.empty()) {
        return e;
      }
    }
    // Later ops fail at once, on every rank, the revoker's own included.
    const auto before = Clock::now();
    const plexus_result_t r =
        plexus_broadcast(buf.data(), buf.data(), buf.size(), PLEXUS_FLOAT32, 0, comm, nullptr);
    if (std::string e = failed_as("later broadcast", r, PLEXUS_ERR_REVOKED, {"revoked by rank 0"});
        !e.empty()) {
      return e;
    }
    if (Clock::now() - before > std::chrono::seconds(5)) return "a later op waited to fail";
    plexus_comm_destroy(comm);
    return {};
  });
  EXPECT_EQ(failures(results), "");
}

TEST_F(RecoveryTest, SurvivorsOfAKilledRankShrinkToAnExactCommunicatorNumberedDensely) {
  const std::string sock = socket();
  auto results = run_ranks(sock, 4, [&](int rank, int n, const auto& id) -> std::string {
    plexus_comm_t comm = nullptr;
    if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
    if (std::string error = exact_allreduce(comm); !error.empty()) return error;
    if (rank == 1) ::raise(SIGKILL);
    std::vector<float> buf(1024, 1.0f);
    const plexus_result_t r = plexus_allreduce(buf.data(), buf.data(), buf.size(), PLEXUS_FLOAT32,
                                               PLEXUS_SUM, comm, nullptr);
    if (std::string e = failed_as("allreduce", r, PLEXUS_ERR_PEER_LOST, {"rank 1"}); !e.empty()) {
      return e;
    }
    // plexusctl shows the parent's successor and where the successor came from.
    auto shown = [&]() -> std::string {
      if (rank != 0) return {};
      const CommandOutput out = run_command({PLEXUSCTL_PATH, "--socket", sock, "comms"});
      for (const char* want :
           {"successor: ", "from: the shrink of ", "without rank(s) 1", "broken"}) {
        if (out.out.find(want) == std::string::npos)
          return "plexusctl comms lacks '" + std::string(want) + "':\n" + out.out;
      }
      return {};
    };
    return shrink_and_run(comm, rank, {1}, PLEXUS_SHRINK_DEFAULT, rank == 0 ? 0 : rank - 1, shown);
  });
  for (int r : {0, 2, 3}) EXPECT_TRUE(results[r].ok) << "rank " << r << ": " << results[r].message;
}

TEST_F(RecoveryTest, AShrinkWithAbortEndsTheParentsOpsInFlightFirst) {
  const std::string done = temp_prefix("abort-done");
  auto results = run_ranks(socket(), 3, [&](int rank, int n, const auto& id) -> std::string {
    plexus_comm_t comm = nullptr;
    if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
    if (rank == 2) {
      // Alive, but left out: it neither joins the allreduce nor calls shrink, and stays a
      // member until the others are done with the parent.
      wait_for_rank_files(done, 2);
      plexus_comm_destroy(comm);
      return {};
    }
    std::vector<float> buf(1024, 1.0f);
    plexus_request_t request = nullptr;
    if (auto r = plexus_allreduce(buf.data(), buf.data(), buf.size(), PLEXUS_FLOAT32, PLEXUS_SUM,
                                  comm, &request)) {
      return describe("allreduce", r);
    }
    plexus_comm_t next = nullptr;
    int excluded = 2;
    std::string error;
    if (auto r = plexus_comm_shrink(comm, &excluded, 1, PLEXUS_SHRINK_ABORT, &next)) {
      error = describe("shrink", r);
    } else {
      error = failed_as("the allreduce in flight", plexus_wait(&request), PLEXUS_ERR_REVOKED,
                        {"to shrink it"});
      if (error.empty()) error = exact_allreduce(next);
      plexus_comm_destroy(next);
    }
    plexus_comm_destroy(comm);
    std::ofstream(done + std::to_string(rank)) << "done";
    return error;
  });
  for (int r = 0; r < 2; ++r) std::remove((done + std::to_string(r)).c_str());
  EXPECT_EQ(failures(results), "");
}

// NCCL calls a default-mode shrink with operations outstanding invalid usage; here it waits
// for them, but no longer than PLEXUS_INIT_TIMEOUT_MS, and then says what is left.
TEST_F(RecoveryTest, ADefaultShrinkWaitsForThisRanksOpsOnlyAsLongAsTheInitTimeout) {
  const std::string done = temp_prefix("quiesce-done");
  auto results = run_ranks(socket(), 2, [&](int rank, int n, const auto& id) -> std::string {
    plexus_comm_t comm = nullptr;
    if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
    if (rank == 1) {  // never sends
      wait_for_rank_files(done, 1);
      plexus_comm_destroy(comm);
      return {};
    }
    ::setenv("PLEXUS_INIT_TIMEOUT_MS", "300", 1);
    std::vector<float> buf(16);
    plexus_request_t request = nullptr;
    std::string error;
    if (auto r = plexus_recv(buf.data(), buf.size(), PLEXUS_FLOAT32, 1, comm, &request)) {
      error = describe("recv", r);
    } else {
      plexus_comm_t next = nullptr;
      int excluded = 1;
      error = failed_as("a default shrink with a recv outstanding",
                        plexus_comm_shrink(comm, &excluded, 1, PLEXUS_SHRINK_DEFAULT, &next),
                        PLEXUS_ERR_TIMEOUT, {"rank 0 still has 1 op(s)", "PLEXUS_SHRINK_ABORT"});
    }
    plexus_comm_abort(comm);  // the recv ends aborted
    if (request != nullptr) (void)plexus_wait(&request);
    std::ofstream(done + "0") << "done";  // whatever happened: rank 1 waits for it
    return error;
  });
  std::remove((done + "0").c_str());
  EXPECT_EQ(failures(results), "");
}

TEST_F(RecoveryTest, AGrowthKeepsTheMembersRanksAndTakesANewRankWithTheIdAMemberMade) {
  const std::string path = temp_prefix("grow-id") + "id";
  std::remove(path.c_str());
  auto results = run_ranks(socket(), 3, [&](int rank, int, const auto& id) -> std::string {
    plexus_comm_t grown = nullptr;
    if (rank == 2) {
      if (std::string e = join_growth(path, 3, 2, &grown); !e.empty()) return e;
    } else {
      plexus_comm_t comm = nullptr;
      if (auto r = plexus_comm_init_rank(&comm, 2, id, rank)) return describe("init", r);
      if (std::string error = exact_allreduce(comm); !error.empty()) return error;
      plexus_comm_t none = nullptr;
      if (std::string e = failed_as("grow to 2", plexus_comm_grow(comm, 2, &none),
                                    PLEXUS_ERR_INVALID_ARGUMENT, {"no growth of 2"});
          !e.empty()) {
        return e;
      }
      if (rank == 0) {
        if (std::string e = hand_out_grow_id(comm, path); !e.empty()) return e;
      }
      if (auto r = plexus_comm_grow(comm, 3, &grown)) return describe("grow", r);
      // The parent goes on beside its growth.
      if (std::string error = exact_allreduce(comm); !error.empty()) return "parent: " + error;
      plexus_comm_destroy(comm);
    }
    int me = -1;
    plexus_comm_user_rank(grown, &me);
    if (me != rank) return "rank " + std::to_string(rank) + " became " + std::to_string(me);
    if (std::string error = exact_allreduce(grown); !error.empty()) return "grown: " + error;
    plexus_comm_destroy(grown);
    return {};
  });
  std::remove(path.c_str());
  EXPECT_EQ(failures(results), "");
}

TEST_F(RecoveryTest, ExcludeListsThatCannotBeAreRefusedSayingWhy) {
  auto results = run_ranks(socket(), 3, [](int rank, int n, const auto& id) -> std::string {
    plexus_comm_t comm = nullptr;
    if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
    plexus_comm_t next = nullptr;
    struct Bad {
      std::vector<int> exclude;
      int flags;
      const char* says;
    };
    const int other = (rank + 1) % n;
    for (const Bad& bad :
         {Bad{{rank}, 0, "excludes itself"}, Bad{{7}, 0, "outside 0..2"},
          Bad{{other, other}, 0, "distinct"}, Bad{{0, 1, 2}, 0, "of 3"}, Bad{{}, 4, "flags 4"}}) {
      const plexus_result_t r = plexus_comm_shrink(
          comm, bad.exclude.data(), static_cast<int>(bad.exclude.size()), bad.flags, &next);
      if (std::string e = failed_as("shrink", r, PLEXUS_ERR_INVALID_ARGUMENT, {bad.says});
          !e.empty()) {
        return e;
      }
      if (next != nullptr) return "a refused shrink gave a communicator";
    }
    // The parent is untouched.
    if (std::string error = exact_allreduce(comm); !error.empty()) return error;
    plexus_comm_destroy(comm);
    return {};
  });
  EXPECT_EQ(failures(results), "");
}

// Across nodes: a revoke reaches a node that has no data link to the revoker (down the
// control tree), and one that has (its kAbort carries the code).
TEST(RecoveryAcrossNodesTest, ARevokeReachesEveryNodeLinkedToTheRevokerOrNot) {
  auto nodes = start_nodes(3);
  auto results = run_ranks_across(
      sockets_for(nodes, {0, 1, 2}),
      [&](int rank, int nranks, const plexus_unique_id_t& id) -> std::string {
        plexus_comm_t comm = nullptr;
        if (auto r = plexus_comm_init_rank(&comm, nranks, id, rank)) return describe("init", r);
        std::vector<float> buf(4096, 1.0f);
        if (rank == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          if (auto r = plexus_comm_revoke(comm, "round 0")) return describe("revoke", r);
        } else {
          // Nothing ran on it yet: nodes a and c have no data link to b.
          const auto before = Clock::now();
          const plexus_result_t r =
              plexus_recv(buf.data(), buf.size(), PLEXUS_FLOAT32, 1, comm, nullptr);
          if (std::string e = failed_as("recv from rank 1", r, PLEXUS_ERR_REVOKED,
                                        {"revoked by rank 1", "on node b", "round 0"});
              !e.empty()) {
            return e;
          }
          if (Clock::now() - before > std::chrono::seconds(5)) return "the revoke took > 5 s";
        }
        // Its successor with every rank (none excluded), linked from its first allreduce on.
        plexus_comm_t next = nullptr;
        if (auto r = plexus_comm_shrink(comm, nullptr, 0, PLEXUS_SHRINK_DEFAULT, &next)) {
          return describe("shrink", r);
        }
        if (std::string error = exact_allreduce(next); !error.empty()) return error;
        if (rank == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          if (auto r = plexus_comm_revoke(next, "round 1")) return describe("revoke", r);
        } else {
          const plexus_result_t r = plexus_allreduce(buf.data(), buf.data(), buf.size(),
                                                     PLEXUS_FLOAT32, PLEXUS_SUM, next, nullptr);
          if (std::string e =
                  failed_as("allreduce", r, PLEXUS_ERR_REVOKED, {"revoked by rank 1", "round 1"});
              !e.empty()) {
            return e;
          }
        }
        plexus_comm_destroy(next);
        plexus_comm_destroy(comm);
        return {};
      });
  EXPECT_EQ(failures(results), "") << logs(nodes);
}

// Kills node `victim` (and rank `victim_rank` on it) once every other rank wrote its ready
// file, while they run allreduces.
void kill_node_when_ready(Nodes& nodes, size_t victim, const std::string& ready,
                          const std::vector<pid_t>& pids, int victim_rank) {
  wait_for_rank_files(ready, pids.size());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  nodes[victim]->kill_now();
  ::kill(pids[static_cast<size_t>(victim_rank)], SIGKILL);
}

// Allreduces until one fails; "" when it failed PEER_LOST naming node `node`.
std::string until_node_lost(plexus_comm_t comm, const std::string& node) {
  std::vector<float> data(1 << 18, 1.0f);
  for (int i = 0; i < 100000; ++i) {
    const plexus_result_t r = plexus_allreduce(data.data(), data.data(), data.size(),
                                               PLEXUS_FLOAT32, PLEXUS_SUM, comm, nullptr);
    if (r == PLEXUS_SUCCESS) continue;
    return failed_as("allreduce", r, PLEXUS_ERR_PEER_LOST, {"node " + node});
  }
  return "never failed";
}

TEST(RecoveryAcrossNodesTest, SurvivorsOfAKilledNodeShrinkAndRunExact) {
  auto nodes = start_nodes(3);
  const std::string ready = temp_prefix("shrink-ready");
  auto results = run_ranks_across(
      sockets_for(nodes, {0, 0, 1, 2}),
      [&](int rank, int nranks, const plexus_unique_id_t& id) -> std::string {
        plexus_comm_t comm = nullptr;
        if (auto r = plexus_comm_init_rank(&comm, nranks, id, rank)) return describe("init", r);
        std::ofstream(ready + std::to_string(rank)) << "ready";
        if (rank == 3) ::pause();  // killed with its node
        if (std::string e = until_node_lost(comm, "c"); !e.empty()) return e;
        const auto lost = Clock::now();
        std::string error = shrink_and_run(comm, rank, {3}, PLEXUS_SHRINK_DEFAULT, rank);
        std::printf("rank %d: shrunk and ran 3 exact allreduces %.0f ms after the failure\n", rank,
                    std::chrono::duration<double, std::milli>(Clock::now() - lost).count());
        return error;
      },
      std::chrono::seconds(60),
      [&](const std::vector<pid_t>& pids) { kill_node_when_ready(nodes, 2, ready, pids, 3); });
  for (int r = 0; r < 4; ++r) std::remove((ready + std::to_string(r)).c_str());
  for (int r : {0, 1, 2}) {
    EXPECT_TRUE(results[r].ok) << "rank " << r << ": " << results[r].message << "\n" << logs(nodes);
  }
}

// The survivors of node c shrink, then grow back with a rank on a replacement node d.
TEST(RecoveryAcrossNodesTest, AReplacementNodeJoinsTheGrowthOfTheShrunkCommunicator) {
  auto nodes = start_nodes(4);
  const std::string ready = temp_prefix("replace-ready");
  const std::string path = temp_prefix("replace-id") + "id";
  std::remove(path.c_str());
  auto results = run_ranks_across(
      sockets_for(nodes, {0, 1, 2, 3}),
      [&](int rank, int, const plexus_unique_id_t& id) -> std::string {
        plexus_comm_t grown = nullptr;
        if (rank == 3) {  // the replacement, on node d
          std::ofstream(ready + std::to_string(rank)) << "ready";
          if (std::string e = join_growth(path, 3, 2, &grown); !e.empty()) return e;
        } else {
          plexus_comm_t comm = nullptr;
          if (auto r = plexus_comm_init_rank(&comm, 3, id, rank)) return describe("init", r);
          std::ofstream(ready + std::to_string(rank)) << "ready";
          if (rank == 2) ::pause();  // killed with node c
          if (std::string e = until_node_lost(comm, "c"); !e.empty()) return e;
          int lost = 2;
          plexus_comm_t shrunk = nullptr;
          if (auto r = plexus_comm_shrink(comm, &lost, 1, PLEXUS_SHRINK_DEFAULT, &shrunk)) {
            return describe("shrink", r);
          }
          if (std::string error = exact_allreduce(shrunk); !error.empty()) return error;
          if (rank == 0) {
            if (std::string e = hand_out_grow_id(shrunk, path); !e.empty()) return e;
          }
          if (auto r = plexus_comm_grow(shrunk, 3, &grown)) return describe("grow", r);
          plexus_comm_destroy(shrunk);
          plexus_comm_destroy(comm);
        }
        for (int round = 0; round < 3; ++round) {
          if (std::string error = exact_allreduce(grown); !error.empty()) return "grown: " + error;
        }
        plexus_comm_destroy(grown);
        return {};
      },
      std::chrono::seconds(90),
      [&](const std::vector<pid_t>& pids) { kill_node_when_ready(nodes, 2, ready, pids, 2); });
  for (int r = 0; r < 4; ++r) std::remove((ready + std::to_string(r)).c_str());
  std::remove(path.c_str());
  for (int r : {0, 1, 3}) {
    EXPECT_TRUE(results[r].ok) << "rank " << r << ": " << results[r].message << "\n" << logs(nodes);
  }
}

// Four nodes, a rank on each. Node d dies (with rank 3) once every rank is ready; the
// survivors see it, and `after_d` runs on ranks 0-2. Each calls `step()` at one point: rank
// 2 stays there to die with node c, `settle` after all three got there. Ranks 0 and 1 must
// end ok.
void two_nodes_lost(const std::string& name, std::chrono::milliseconds settle,
                    const std::function<std::string(int rank, plexus_comm_t comm,
                                                    const std::function<void()>& step)>& after_d) {
  auto nodes = start_nodes(4);
  const std::string ready = temp_prefix((name + "-ready").c_str());
  const std::string stepped = temp_prefix((name + "-step").c_str());
  auto results = run_ranks_across(
      sockets_for(nodes, {0, 1, 2, 3}),
      [&](int rank, int nranks, const plexus_unique_id_t& id) -> std::string {
        plexus_comm_t comm = nullptr;
        if (auto r = plexus_comm_init_rank(&comm, nranks, id, rank)) return describe("init", r);
        std::ofstream(ready + std::to_string(rank)) << "ready";
        if (rank == 3) ::pause();  // killed with node d
        if (std::string e = until_node_lost(comm, "d"); !e.empty()) return e;
        return after_d(rank, comm, [&] {
          std::ofstream(stepped + std::to_string(rank)) << "step";
          if (rank == 2) ::pause();  // killed with node c
        });
      },
      std::chrono::seconds(90),
      [&](const std::vector<pid_t>& pids) {
        kill_node_when_ready(nodes, 3, ready, pids, 3);
        wait_for_rank_files(stepped, 3);
        std::this_thread::sleep_for(settle);
        nodes[2]->kill_now();
        ::kill(pids[2], SIGKILL);
      });
  for (int r = 0; r < 4; ++r) {
    std::remove((ready + std::to_string(r)).c_str());
    std::remove((stepped + std::to_string(r)).c_str());
  }
  for (int r : {0, 1}) {
    EXPECT_TRUE(results[r].ok) << "rank " << r << ": " << results[r].message << "\n" << logs(nodes);
  }
}

TEST(RecoveryAcrossNodesTest,
     ASecondNodeLostDuringTheShrinkFailsItNamingThatNodeThenItShrinksAgain) {
  // Node c dies 300 ms after ranks 0 and 1 started the shrink.
  two_nodes_lost("second", std::chrono::milliseconds(300),
                 [](int rank, plexus_comm_t comm, const std::function<void()>& step) {
                   step();
                   std::vector<int> exclude = {3};
                   plexus_comm_t next = nullptr;
                   const plexus_result_t r = plexus_comm_shrink(comm, exclude.data(), 1, 0, &next);
                   if (std::string e = failed_as("shrink", r, PLEXUS_ERR_PEER_LOST,
                                                 {"node c", "during the shrink", "rank(s) 2"});
                       !e.empty()) {
                     return e;
                   }
                   return shrink_and_run(comm, rank, {2, 3}, PLEXUS_SHRINK_DEFAULT, rank);
                 });
}

// A successor that loses a node soon after it formed (as every survivor's does when the
// shrink's root dies after sending the topology to some of them) is left for the parent:
// shrunk again without the lost node's ranks too, it reaches the successor that survivors
// whose shrink failed reach the same way (the token derives from the parent and the set).
TEST(RecoveryAcrossNodesTest, ASuccessorThatLostANodeIsLeftForTheParentShrunkAgainWithoutIt) {
  two_nodes_lost("again", std::chrono::milliseconds(200),
                 [](int rank, plexus_comm_t comm, const std::function<void()>& step) {
                   int lost = 3;
                   plexus_comm_t next = nullptr;
                   if (auto r = plexus_comm_shrink(comm, &lost, 1, PLEXUS_SHRINK_DEFAULT, &next)) {
                     return describe("shrink", r);
                   }
                   if (std::string error = exact_allreduce(next); !error.empty()) return error;
                   step();  // node c dies once the successor formed and ran
                   if (std::string e = until_node_lost(next, "c"); !e.empty()) {
                     return "successor: " + e;
                   }
                   plexus_comm_destroy(next);
                   return shrink_and_run(comm, rank, {2, 3}, PLEXUS_SHRINK_DEFAULT, rank);
                 });
}

TEST(RecoveryAcrossNodesTest, RanksThatDisagreeOnWhomToExcludeFailWithMismatchNotATimeout) {
  auto nodes = start_nodes(4);
  auto results = run_ranks_across(
      sockets_for(nodes, {0, 1, 2, 3}),
      [&](int rank, int nranks, const plexus_unique_id_t& id) -> std::string {
        plexus_comm_t comm = nullptr;
        if (auto r = plexus_comm_init_rank(&comm, nranks, id, rank)) return describe("init", r);
        if (std::string error = exact_allreduce(comm); !error.empty()) return error;
        if (rank == 3) {
          std::this_thread::sleep_for(std::chrono::seconds(3));
          plexus_comm_destroy(comm);
          return {};
        }
        // Ranks 0 and 1 leave out rank 3; rank 2 leaves out 1 and 3. Both keep rank 0, so
        // both meet at node a.
        std::vector<int> exclude = rank == 2 ? std::vector<int>{1, 3} : std::vector<int>{3};
        plexus_comm_t next = nullptr;
        const auto before = Clock::now();
        const plexus_result_t r =
            plexus_comm_shrink(comm, exclude.data(), static_cast<int>(exclude.size()), 0, &next);
        if (std::string e = failed_as("shrink", r, PLEXUS_ERR_MISMATCH, {"disagree", "[1,3]"});
            !e.empty()) {
          return e;
        }
        if (Clock::now() - before > std::chrono::seconds(10)) return "took more than 10 s";
        plexus_comm_destroy(comm);
        return {};
      });
  EXPECT_EQ(failures(results), "") << logs(nodes);
}

}  // namespace
}  // namespace plexus::test
