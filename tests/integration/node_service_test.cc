// plexusd's settings and drain while it serves: a config reload (SIGHUP, plexusctl config
// reload) changes a job's policy and caps and the stall threshold under a running
// communicator without dropping its sessions, names what waits for a restart, and refuses a
// broken file with its line (the settings in use kept); a node drain refuses new
// communicators, lets one admitted before it form and finish exact, then reports the node
// safe to stop.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/command_output.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/rank_processes.h"
#include "tests/integration/test_data.h"

namespace plexus::test {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

CommandOutput ctl(const std::string& socket, std::vector<std::string> args) {
  std::vector<std::string> argv = {PLEXUSCTL_PATH, "--socket", socket};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv);
}

json ctl_json(const std::string& socket, std::vector<std::string> args) {
  args.push_back("--json");
  const CommandOutput out = ctl(socket, args);
  if (out.exit_code != 0) return json();
  return json::parse(out.out, nullptr, false);
}

// Polls `done` every 50 ms for up to `limit`.
template <typename Fn>
bool wait_until(Fn done, milliseconds limit) {
  for (const auto end = Clock::now() + limit; Clock::now() < end;) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return done();
}

// A temporary directory, removed at the end.
struct TempDir {
  TempDir() {
    char name[] = "/tmp/plexus-node-service-XXXXXX";
    path = ::mkdtemp(name);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string path;
};

// One exact allreduce of 4096 floats.
std::string allreduce_once(plexus_comm_t comm, float* buf, int rank, int n) {
  constexpr uint64_t kCount = 4096;
  fill_input(buf, PLEXUS_FLOAT32, PLEXUS_SUM, rank, kCount);
  if (auto r = plexus_allreduce(buf, buf, kCount, PLEXUS_FLOAT32, PLEXUS_SUM, comm, nullptr))
    return describe("allreduce", r);
  return compare(buf, PLEXUS_FLOAT32, kCount,
                 [&](size_t j) { return reduced_bits(PLEXUS_FLOAT32, PLEXUS_SUM, n, j); });
}

// Ranks that allreduce, wait for the file `go` (at most 60 s), then (rank `late_rank`
// `late` behind the others) allreduce again, and leave.
RankBody allreduce_around(const std::string& go, int late_rank, milliseconds late) {
  return [=](int rank, int n, const plexus_unique_id_t& id) -> std::string {
    plexus_comm_t comm;
    if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
    float* buf;
    if (auto r = plexus_alloc(reinterpret_cast<void**>(&buf), 4096 * sizeof(float)))
      return describe("alloc", r);
    std::string error;
    for (int op = 0; op < 3 && error.empty(); ++op) error = allreduce_once(comm, buf, rank, n);
    if (error.empty() &&
        !wait_until([&] { return std::filesystem::exists(go); }, milliseconds(60000))) {
      error = "the test never said go";
    }
    if (error.empty() && rank == late_rank) std::this_thread::sleep_for(late);
    for (int op = 0; op < 3 && error.empty(); ++op) error = allreduce_once(comm, buf, rank, n);
    plexus_comm_destroy(comm);
    return error;
  };
}

std::set<uint64_t> rank_sessions(const std::string& socket) {
  std::set<uint64_t> ids;
  json status = ctl_json(socket, {"status"});
  if (!status.is_object()) return ids;
  for (const auto& s : status["sessions"]) {
    if (s["role"] == "rank") ids.insert(s["id"].get<uint64_t>());
  }
  return ids;
}

json job_named(const std::string& socket, const std::string& name) {
  json jobs = ctl_json(socket, {"jobs"});
  if (!jobs.is_array()) return json();
  for (const auto& j : jobs) {
    if (j["name"] == name) return j;
  }
  return json();
}

TEST(NodeServiceTest, AReloadChangesAJobPolicyAndTheStallThresholdWithoutDroppingASession) {
  TempDir dir;
  const std::string config = dir.path + "/plexusd.toml";
  const std::string go = dir.path + "/go";
  std::ofstream(config) << "stall-ms = 5000\n[jobs.reload-job]\nclass = \"bulk\"\nweight = 2\n";
  DaemonProcess daemon({"--config", config});
  const std::string socket = daemon.socket_path();

  std::set<uint64_t> before, after;
  ::setenv("PLEXUS_JOB", "reload-job", 1);
  auto results = run_ranks(
      socket, 2, allreduce_around(go, 1, milliseconds(1500)), std::chrono::seconds(120),
      [&](const std::vector<pid_t>&) {
        // Both ranks connected and their communicator formed.
        EXPECT_TRUE(wait_until(
            [&] {
              json comms = ctl_json(socket, {"comms"});
              return comms.is_array() && comms.size() == 1 && rank_sessions(socket).size() == 2;
            },
            milliseconds(30000)))
            << daemon.log();
        before = rank_sessions(socket);
        EXPECT_EQ(job_named(socket, "reload-job")["class"], "bulk");

        // SIGHUP: the job's class, weight and cap and the stall threshold change now;
        // peer-grace-ms waits for a restart, and says so.
        std::ofstream(config) << "stall-ms = 300\npeer-grace-ms = 4000\n[jobs.reload-job]\n"
                                 "class = \"latency\"\nweight = 5\nmax_inflight_bytes = 1048576\n";
        ::kill(daemon.pid(), SIGHUP);
        EXPECT_TRUE(
            wait_until([&] { return job_named(socket, "reload-job")["class"] == "latency"; },
                       milliseconds(5000)))
            << daemon.log();
        const json job = job_named(socket, "reload-job");
        EXPECT_EQ(job["weight"], 5) << job.dump();
        EXPECT_EQ(job["max_inflight_bytes"], 1048576) << job.dump();
        EXPECT_EQ(ctl_json(socket, {"ops"})["stall_ms"], 300);
        EXPECT_THAT(daemon.log(), HasSubstr("config reload: peer-grace-ms: 2000 -> 4000 cannot "
                                            "change while plexusd runs"));

        // plexusctl config reload of a broken file: refused with its line; nothing changes.
        std::ofstream(config) << "stall-ms = 900\n[jobs.reload-job\nclass = \"background\"\n";
        CommandOutput refused = ctl(socket, {"config", "reload"});
        EXPECT_EQ(refused.exit_code, 1) << refused.out;
        EXPECT_THAT(refused.err, HasSubstr(config + ":2:"));
        EXPECT_THAT(refused.err, HasSubstr("the settings in use are kept"));
        std::ofstream(config) << "stal-ms = 900\n";
        refused = ctl(socket, {"config", "reload"});
        EXPECT_THAT(refused.err, HasSubstr(config + ":1: unknown key 'stal-ms'"));
        const CommandOutput shown = ctl(socket, {"config"});
        EXPECT_THAT(shown.out, HasSubstr("\nstall-ms = 300\n"));
        EXPECT_THAT(shown.out, HasSubstr("[jobs.\"reload-job\"]\nclass = \"latency\"\nweight = 5"));
        EXPECT_THAT(shown.out, HasSubstr("waiting for a restart: peer-grace-ms: 2000 -> 4000"));
        EXPECT_EQ(job_named(socket, "reload-job")["class"], "latency");
        after = rank_sessions(socket);
        std::ofstream(go) << "go\n";
      });
  ::unsetenv("PLEXUS_JOB");
  ASSERT_EQ(failures(results), "") << daemon.log();
  EXPECT_EQ(before.size(), 2u);
  EXPECT_EQ(before, after) << "a rank's session was dropped by the reload";
  // Rank 1 came 1.5 s late to an allreduce: stalled under the reloaded 300 ms, not the 5 s
  // the daemon started with.
  std::ifstream events(daemon.events_path());
  std::stringstream text;
  text << events.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("\"kind\":\"op_stalled\"")) << daemon.log();
}

TEST(NodeServiceTest, ADrainRefusesNewCommunicatorsLetsTheRunningOneFinishThenIsSafeToStop) {
  TempDir dir;
  const std::string join = dir.path + "/join";
  const std::string go = dir.path + "/go";
  DaemonProcess daemon({"--node-name", "drain-node"});
  const std::string socket = daemon.socket_path();
  json forming, during;
  CommandOutput drain;
  // Rank 1 joins only once the drain has begun: the communicator rank 0 joined before it
  // still forms.
  const RankBody body = allreduce_around(go, -1, milliseconds(0));
  auto results = run_ranks(
      socket, 2,
      [&](int rank, int n, const plexus_unique_id_t& id) -> std::string {
        if (rank == 1 &&
            !wait_until([&] { return std::filesystem::exists(join); }, milliseconds(60000))) {
          return "the test never said join";
        }
        return body(rank, n, id);
      },
      std::chrono::seconds(120),
      [&](const std::vector<pid_t>&) {
        EXPECT_TRUE(wait_until(
            [&] {
              forming = ctl_json(socket, {"node", "status"});
              return forming.is_object() && forming["forming"] == true;
            },
            milliseconds(30000)))
            << forming.dump() << daemon.log();
        drain = ctl(socket, {"node", "drain"});
        std::ofstream(join) << "join\n";
        EXPECT_TRUE(wait_until(
            [&] {
              json comms = ctl_json(socket, {"comms"});
              return comms.is_array() && comms.size() == 1;
            },
            milliseconds(30000)))
            << daemon.log();
        during = ctl_json(socket, {"node", "status"});
        // A new communicator is refused, naming the node and the drain.
        const auto fresh = run_ranks(socket, 2, [](int rank, int n, const plexus_unique_id_t& id) {
          plexus_comm_t comm;
          const plexus_result_t r = plexus_comm_init_rank(&comm, n, id, rank);
          if (r == PLEXUS_SUCCESS) {
            plexus_comm_destroy(comm);
            return std::string("formed while the node was draining");
          }
          const std::string why = describe("init", r);
          return r == PLEXUS_ERR_DAEMON_UNAVAILABLE &&
                         why.find("node drain-node is draining") != std::string::npos
                     ? std::string()
                     : why;
        });
        EXPECT_EQ(failures(fresh), "") << daemon.log();
        std::ofstream(go) << "go\n";
        // The running communicator finishes; --wait reports when the node is drained.
        const CommandOutput wait = ctl(socket, {"node", "drain", "--wait", "60"});
        EXPECT_EQ(wait.exit_code, 0) << wait.out << wait.err;
        EXPECT_THAT(wait.out, HasSubstr("drained: no communicator left; safe to stop plexusd"));
      });
  ASSERT_EQ(failures(results), "") << "the communicator admitted before the drain did not "
                                      "form and finish exact\n"
                                   << daemon.log();
  EXPECT_EQ(drain.exit_code, 0) << drain.err;
  EXPECT_THAT(drain.out, HasSubstr("admitted before the drain still forming")) << drain.out;
  EXPECT_EQ(during["draining"], true) << during.dump();
  EXPECT_EQ(during["comms"], 1) << during.dump();
  EXPECT_EQ(during["safe_to_stop"], false) << during.dump();
  const json drained = ctl_json(socket, {"node", "status"});
  EXPECT_EQ(drained["safe_to_stop"], true) << drained.dump();
  // Undrained, the node admits communicators again.
  ASSERT_EQ(ctl(socket, {"node", "undrain"}).exit_code, 0);
  const auto again = run_ranks(socket, 2, allreduce_around(go, -1, milliseconds(0)));
  EXPECT_EQ(failures(again), "") << daemon.log();
  // SIGTERM after the drain: plexusd stops cleanly.
  ::kill(daemon.pid(), SIGTERM);
  EXPECT_TRUE(wait_until([&] { return !daemon.alive(); }, milliseconds(10000)));
}

}  // namespace
}  // namespace plexus::test
