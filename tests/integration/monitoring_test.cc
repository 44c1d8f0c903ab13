// Monitoring against a real plexusd through plexusctl: a rank that never submits its
// collective is named (rank, pid, node) by plexusctl ops --stuck and by an event within
// 2 s; a rank late op after op by a rank_skew event; events follow; every command says
// clearly when no daemon runs.
#include <grp.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "tests/integration/command_output.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/rank_processes.h"
#include "tests/integration/test_data.h"

namespace plexus::test {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

CommandOutput plexusctl(const std::string& socket, std::vector<std::string> args) {
  std::vector<std::string> argv = {PLEXUSCTL_PATH, "--socket", socket};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv);
}

// Each rank allreduces `count` floats `ops` times; `late_rank` first sleeps `late` each time.
RankBody allreduce_with_late_rank(int late_rank, std::chrono::milliseconds late, int ops = 1,
                                  uint64_t count = 1024) {
  return [=](int rank, int n, const plexus_unique_id_t& id) -> std::string {
    plexus_comm_t comm;
    if (auto r = plexus_comm_init_rank(&comm, n, id, rank)) return describe("init", r);
    float* buf;
    if (auto r = plexus_alloc(reinterpret_cast<void**>(&buf), count * sizeof(float))) {
      return describe("alloc", r);
    }
    std::string error;
    for (int op = 0; op < ops && error.empty(); ++op) {
      fill_input(buf, PLEXUS_FLOAT32, PLEXUS_SUM, rank, count);
      if (rank == late_rank) std::this_thread::sleep_for(late);
      if (auto r = plexus_allreduce(buf, buf, count, PLEXUS_FLOAT32, PLEXUS_SUM, comm, nullptr)) {
        return describe("allreduce", r);
      }
      error = compare(buf, PLEXUS_FLOAT32, count,
                      [&](size_t j) { return reduced_bits(PLEXUS_FLOAT32, PLEXUS_SUM, n, j); });
    }
    plexus_comm_destroy(comm);
    return error;
  };
}

std::vector<json> event_lines(const std::string& text) {
  std::vector<json> events;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) events.push_back(json::parse(line));
  }
  return events;
}

TEST(MonitoringTest, RankThatNeverSubmitsIsNamedByOpsStuckAndAnEventWithinTwoSeconds) {
  DaemonProcess daemon({"--node-name", "node-a", "--stall-ms", "1000"});
  const std::string socket = daemon.socket_path();
  json stuck;
  std::chrono::milliseconds found_after{-1};
  std::vector<pid_t> rank_pids;
  auto results = run_ranks(
      socket, 3, allreduce_with_late_rank(2, std::chrono::milliseconds(4500)),
      std::chrono::seconds(60), [&](const std::vector<pid_t>& pids) {
        rank_pids = pids;
        // The clock starts at the fork, before the ranks have even joined: a bound on how
        // long the stall took to be named from when ranks 0 and 1 submitted.
        const auto start = Clock::now();
        while (Clock::now() - start < std::chrono::milliseconds(3000)) {
          CommandOutput out = plexusctl(socket, {"ops", "--stuck", "--json"});
          ASSERT_EQ(out.exit_code, 0) << out.err;
          json ops = json::parse(out.out);
          if (!ops["inflight"].empty()) {
            stuck = ops;
            found_after =
                std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
            break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        ASSERT_FALSE(stuck.is_null()) << "plexusctl ops --stuck named nothing within 3 s";
        const std::string who = "rank 2 (pid " + std::to_string(pids[2]) + ") on node node-a";
        // The table says the same.
        CommandOutput table = plexusctl(socket, {"ops", "--stuck"});
        EXPECT_EQ(table.exit_code, 0) << table.err;
        EXPECT_THAT(table.out, HasSubstr(who));
        EXPECT_THAT(table.out, HasSubstr("STALLED"));
        EXPECT_THAT(table.out, HasSubstr("allreduce"));
        // So does an event, in plexusctl events and in the event file.
        CommandOutput events = plexusctl(socket, {"events", "--json"});
        EXPECT_EQ(events.exit_code, 0) << events.err;
        bool named = false;
        for (const json& e : event_lines(events.out)) {
          if (e["kind"] != "op_stalled") continue;
          named = e["message"].get<std::string>().find(who) != std::string::npos &&
                  e["evidence"]["missing_ranks"][0]["pid"] == pids[2] && e["node"] == "node-a";
        }
        EXPECT_TRUE(named) << "no op_stalled event names " << who << ":\n" << events.out;
        std::ifstream file(daemon.events_path());
        std::stringstream text;
        text << file.rdbuf();
        EXPECT_THAT(text.str(), HasSubstr("\"kind\":\"op_stalled\""));
        EXPECT_THAT(text.str(), HasSubstr(who));
        CommandOutput table_events = plexusctl(socket, {"events"});
        EXPECT_THAT(table_events.out, HasSubstr("op_stalled"));
        EXPECT_THAT(table_events.out, HasSubstr(who));
      });
  EXPECT_EQ(failures(results), "");
  ASSERT_FALSE(stuck.is_null());
  std::printf("plexusctl ops --stuck named the rank %lld ms after the ranks were forked\n",
              static_cast<long long>(found_after.count()));
  EXPECT_LE(found_after.count(), 2000) << "named after " << found_after.count() << " ms";
  ASSERT_EQ(stuck["inflight"].size(), 1u) << stuck.dump(2);
  const json& op = stuck["inflight"][0];
  EXPECT_EQ(op["collective"], "allreduce");
  EXPECT_EQ(op["bytes"], 4096);
  EXPECT_EQ(op["state"], "waiting for ranks");
  EXPECT_EQ(op["arrived"], 2);
  EXPECT_EQ(op["local_ranks"], 3);
  EXPECT_GE(op["idle_ms"].get<uint64_t>(), 1000u);
  ASSERT_EQ(op["missing_ranks"].size(), 1u);
  EXPECT_EQ(op["missing_ranks"][0]["rank"], 2);
  EXPECT_EQ(op["missing_ranks"][0]["pid"], rank_pids[2]);
  EXPECT_EQ(op["missing_ranks"][0]["node"], "node-a");

  // Once rank 2 came, nothing is in flight, and the finished op shows who was late.
  CommandOutput after = plexusctl(socket, {"ops", "--json"});
  ASSERT_EQ(after.exit_code, 0) << after.err;
  json ops = json::parse(after.out);
  EXPECT_TRUE(ops["inflight"].empty()) << ops.dump(2);
  ASSERT_FALSE(ops["finished"].empty());
  const json& done = ops["finished"].back();
  EXPECT_EQ(done["status"], "ok");
  EXPECT_EQ(done["last_rank"], 2);
  EXPECT_GE(done["arrival_spread_us"].get<uint64_t>(), 4000000u);
}

std::vector<json> events_of_kind(const std::string& socket, const std::string& kind) {
  CommandOutput out = plexusctl(socket, {"events", "--json"});
  EXPECT_EQ(out.exit_code, 0) << out.err;
  std::vector<json> found;
  for (const json& e : event_lines(out.out)) {
    if (e["kind"] == kind) found.push_back(e);
  }
  return found;
}

// 16 allreduces with nobody late raise nothing; 16 with rank 1 submitting 30 ms after rank
// 0 each time raise one rank_skew event naming rank 1, its pid and node.
TEST(MonitoringTest, ARankSubmittingLateOpAfterOpIsReportedAsSkew) {
  DaemonProcess daemon(
      {"--node-name", "node-s", "--telemetry", "on", "--rank-skew-ms", "10", "--stall-ms", "5000"});
  const std::string socket = daemon.socket_path();
  auto in_step =
      run_ranks(socket, 2, allreduce_with_late_rank(-1, std::chrono::milliseconds(0), 16));
  ASSERT_EQ(failures(in_step), "");
  EXPECT_TRUE(events_of_kind(socket, "rank_skew").empty()) << "skew reported with no rank late";

  std::vector<pid_t> pids;
  auto skewed = run_ranks(socket, 2, allreduce_with_late_rank(1, std::chrono::milliseconds(30), 16),
                          std::chrono::seconds(60),
                          [&](const std::vector<pid_t>& started) { pids = started; });
  ASSERT_EQ(failures(skewed), "");
  ASSERT_EQ(pids.size(), 2u);
  const auto skew = events_of_kind(socket, "rank_skew");
  ASSERT_EQ(skew.size(), 1u) << "the rule is quiet for 10 s after a report";
  const json& e = skew[0];
  EXPECT_EQ(e["severity"], "warning");
  EXPECT_EQ(e["node"], "node-s");
  EXPECT_EQ(e["evidence"]["rank"], 1);
  EXPECT_EQ(e["evidence"]["pid"], pids[1]);
  EXPECT_EQ(e["evidence"]["of_ops"], 16);
  EXPECT_GE(e["evidence"]["late_ops"].get<int>(), 12);
  EXPECT_GE(e["evidence"]["median_lateness_us"].get<int64_t>(), 25000);
  EXPECT_THAT(e["message"].get<std::string>(),
              HasSubstr("rank 1 (pid " + std::to_string(pids[1]) + ")"));
  // The finished ops say who was last, and by how much.
  json ops = json::parse(plexusctl(socket, {"ops", "--finished", "--json"}).out);
  ASSERT_FALSE(ops["finished"].empty());
  EXPECT_EQ(ops["finished"].back()["last_rank"], 1);
  EXPECT_GE(ops["finished"].back()["arrival_spread_us"].get<uint64_t>(), 25000u);
}

// A two-node allreduce, timed: the finished op says where its time went, stage by stage
// over its slices; a single-node op has no stages.
TEST(MonitoringTest, AFinishedMultiNodeOpShowsItsStages) {
  std::vector<std::unique_ptr<DaemonProcess>> nodes;
  for (const char* name : {"stage-a", "stage-b"}) {
    nodes.push_back(std::make_unique<DaemonProcess>(std::vector<std::string>{
        "--peer-listen", "127.0.0.1:0", "--node-name", name, "--telemetry", "on"}));
  }
  const std::string a = nodes[0]->socket_path();
  const std::string b = nodes[1]->socket_path();
  constexpr uint64_t kCount = 4u << 20;  // 16 MiB: several 2 MiB slices
  auto results = run_ranks_across(
      {a, a, b, b}, allreduce_with_late_rank(-1, std::chrono::milliseconds(0), 1, kCount));
  ASSERT_EQ(failures(results), "") << nodes[0]->log() << nodes[1]->log();
  CommandOutput out = plexusctl(a, {"ops", "--finished", "--json"});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  const json ops = json::parse(out.out);
  ASSERT_EQ(ops["finished"].size(), 1u) << ops.dump(2);
  const json& op = ops["finished"][0];
  EXPECT_EQ(op["bytes"], kCount * 4);
  EXPECT_GE(op["slices"].get<uint64_t>(), 2u) << op.dump(2);
  EXPECT_GT(op["local_in_us"].get<uint64_t>(), 0u) << op.dump(2);
  EXPECT_GT(op["network_us"].get<uint64_t>(), 0u) << op.dump(2);
  EXPECT_GT(op["local_out_us"].get<uint64_t>(), 0u) << op.dump(2);
  // Every slice's rounds lie within the op's run; the slowest is one of them.
  EXPECT_LE(op["slowest_slice_us"].get<uint64_t>(), op["network_us"].get<uint64_t>());
  EXPECT_LE(op["slowest_slice_us"].get<uint64_t>(), op["run_us"].get<uint64_t>() + 1);
  EXPECT_GE(op["slowest_slice_us"].get<uint64_t>() * op["slices"].get<uint64_t>(),
            op["network_us"].get<uint64_t>());
  CommandOutput table = plexusctl(a, {"ops", "--finished"});
  EXPECT_THAT(table.out, HasSubstr("STAGES"));
  EXPECT_THAT(table.out, HasSubstr(" slices, slowest "));
  std::printf("%s", table.out.c_str());

  auto local = run_ranks(a, 2, allreduce_with_late_rank(-1, std::chrono::milliseconds(0)));
  ASSERT_EQ(failures(local), "");
  const json after = json::parse(plexusctl(a, {"ops", "--finished", "--json"}).out);
  ASSERT_EQ(after["finished"].size(), 2u);
  EXPECT_EQ(after["finished"][1]["slices"], 0) << "a single-node op has no inter-node stages";
}

TEST(MonitoringTest, EventsFollowPrintsEventsAsTheyHappen) {
  DaemonProcess daemon({"--stall-ms", "200"});
  CommandOutput followed;
  std::thread follower([&] {
    followed = plexusctl(daemon.socket_path(),
                         {"events", "--follow", "--for", "4", "--last", "0", "--json"});
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // it is following by now
  auto results = run_ranks(daemon.socket_path(), 2,
                           allreduce_with_late_rank(1, std::chrono::milliseconds(800)));
  follower.join();
  EXPECT_EQ(failures(results), "");
  EXPECT_EQ(followed.exit_code, 0) << followed.err;
  size_t stalls = 0;
  for (const json& e : event_lines(followed.out)) stalls += e["kind"] == "op_stalled" ? 1 : 0;
  EXPECT_EQ(stalls, 1u) << followed.out;
}

TEST(MonitoringTest, EveryCommandSaysClearlyThatNoDaemonRuns) {
  const std::string socket = "/tmp/plexus-no-daemon-here/plexusd.sock";
  for (std::vector<std::string> args : {std::vector<std::string>{"status"},
                                        {"comms"},
                                        {"paths"},
                                        {"nics"},
                                        {"ops"},
                                        {"ops", "--stuck", "--json"},
                                        {"events"},
                                        {"events", "--follow", "--for", "1"},
                                        {"nic", "drain", "eth0"},
                                        {"nic", "fault", "eth0"}}) {
    CommandOutput out = plexusctl(socket, args);
    EXPECT_EQ(out.exit_code, 2) << args[0] << ": " << out.err;
    EXPECT_THAT(out.err, HasSubstr(socket)) << args[0];
    EXPECT_EQ(out.out, "") << args[0];
  }
}

TEST(MonitoringTest, JobsAndTopShowWhatRan) {
  DaemonProcess daemon({"--node-name", "node-t"});
  ::setenv("PLEXUS_JOB", "train-x", 1);
  auto results = run_ranks(daemon.socket_path(), 2,
                           allreduce_with_late_rank(-1, std::chrono::milliseconds(0)));
  ::unsetenv("PLEXUS_JOB");
  ASSERT_EQ(failures(results), "");
  CommandOutput jobs = plexusctl(daemon.socket_path(), {"jobs"});
  EXPECT_EQ(jobs.exit_code, 0) << jobs.err;
  EXPECT_THAT(jobs.out, HasSubstr("train-x"));
  EXPECT_THAT(jobs.out, HasSubstr("allreduce 1"));
  json listed = json::parse(plexusctl(daemon.socket_path(), {"jobs", "--json"}).out);
  ASSERT_EQ(listed.size(), 1u) << listed.dump(2);
  EXPECT_EQ(listed[0]["name"], "train-x");
  EXPECT_EQ(listed[0]["failed_completions"], 0);
  EXPECT_EQ(listed[0]["collectives"][0]["collective"], "allreduce");
  EXPECT_EQ(listed[0]["collectives"][0]["ops"], 1);
  EXPECT_EQ(listed[0]["collectives"][0]["payload_bytes"], 4096);
  // top: a fresh screen per refresh, then it stops after -n frames.
  CommandOutput top = plexusctl(daemon.socket_path(), {"top", "-n", "2", "--interval", "0.2"});
  EXPECT_EQ(top.exit_code, 0) << top.err;
  size_t frames = 0;
  for (size_t at = top.out.find("\033[H\033[2Jplexus top  node node-t"); at != std::string::npos;
       at = top.out.find("\033[H\033[2Jplexus top  node node-t", at + 1)) {
    ++frames;
  }
  EXPECT_EQ(frames, 2u) << top.out;
  EXPECT_THAT(top.out, HasSubstr("train-x"));
  EXPECT_THAT(top.out, HasSubstr("collective(s) in flight"));
  CommandOutput top_json =
      plexusctl(daemon.socket_path(), {"top", "-n", "2", "--interval", "0.1", "--json"});
  const auto lines = event_lines(top_json.out);
  ASSERT_EQ(lines.size(), 2u) << top_json.out;
  for (const json& frame : lines) {
    EXPECT_EQ(frame["status"]["node"], "node-t");
    EXPECT_TRUE(frame["links"].contains("nic_info"));
    EXPECT_TRUE(frame["ops"]["inflight"].is_array());
  }
}

// plexusctl job set: a job that ran (or one the config names) takes a new class and weight,
// shown by plexusctl jobs; an unknown job, a bad weight or class is refused, saying why.
TEST(MonitoringTest, JobSetChangesAJobsPolicyAndRefusesBadInput) {
  DaemonProcess daemon({"--job", "rollout=latency:2"});
  const std::string socket = daemon.socket_path();
  ::setenv("PLEXUS_JOB", "train-x", 1);
  auto results = run_ranks(socket, 2, allreduce_with_late_rank(-1, std::chrono::milliseconds(0)));
  ::unsetenv("PLEXUS_JOB");
  ASSERT_EQ(failures(results), "");
  json listed = json::parse(plexusctl(socket, {"jobs", "--json"}).out);
  ASSERT_EQ(listed.size(), 1u) << listed.dump(2);
  EXPECT_EQ(listed[0]["class"], "bulk");
  EXPECT_EQ(listed[0]["weight"], 1);

  CommandOutput set =
      plexusctl(socket, {"job", "set", "train-x", "--class", "background", "--weight", "7"});
  EXPECT_EQ(set.exit_code, 0) << set.err;
  listed = json::parse(plexusctl(socket, {"jobs", "--json"}).out);
  EXPECT_EQ(listed[0]["class"], "background");
  EXPECT_EQ(listed[0]["weight"], 7);
  CommandOutput table = plexusctl(socket, {"jobs"});
  EXPECT_THAT(table.out, HasSubstr("background"));
  // A job the config names may be set before it runs.
  EXPECT_EQ(
      plexusctl(socket, {"job", "set", "rollout", "--class", "latency", "--weight", "3"}).exit_code,
      0);

  CommandOutput unknown = plexusctl(socket, {"job", "set", "nope", "--class", "bulk"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("unknown job 'nope'"));
  EXPECT_THAT(unknown.err, HasSubstr("known: rollout, train-x"));
  CommandOutput zero =
      plexusctl(socket, {"job", "set", "train-x", "--class", "bulk", "--weight", "0"});
  EXPECT_EQ(zero.exit_code, 1);
  EXPECT_THAT(zero.err, HasSubstr("weight"));
  CommandOutput big =
      plexusctl(socket, {"job", "set", "train-x", "--class", "bulk", "--weight", "1001"});
  EXPECT_EQ(big.exit_code, 1);
  EXPECT_THAT(big.err, HasSubstr("weight 1001 is out of range (a whole number from 1 to 1000)"));
  CommandOutput fast = plexusctl(socket, {"job", "set", "train-x", "--class", "fast"});
  EXPECT_EQ(fast.exit_code, 1);
  EXPECT_THAT(fast.err, HasSubstr("class 'fast' is not one of latency, bulk, background"));
  // Nothing refused changed the job.
  listed = json::parse(plexusctl(socket, {"jobs", "--json"}).out);
  EXPECT_EQ(listed[0]["class"], "background");
  EXPECT_EQ(listed[0]["weight"], 7);
}

// The config file's jobs table, read by a real plexusd: a job's class, weight and caps
// apply when it runs (shown by plexusctl jobs); a bad value stops plexusd at start with an
// error naming the file, the job and the key.
TEST(MonitoringTest, TheConfigFilesJobsTableAppliesAndABadEntryIsRefusedAtStart) {
  const std::string dir = "/tmp/plexus-jobs-config-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string good = dir + "/good.toml";
  std::ofstream(good) << "log_level = \"info\"\n\n[jobs.train-x]\nclass = \"latency\"\n"
                         "weight = 4\nmax_inflight_bytes = 1048576\nmax_staging_bytes = 2048\n";
  {
    DaemonProcess daemon({"--config", good});
    ::setenv("PLEXUS_JOB", "train-x", 1);
    auto results = run_ranks(daemon.socket_path(), 2,
                             allreduce_with_late_rank(-1, std::chrono::milliseconds(0)));
    ::unsetenv("PLEXUS_JOB");
    ASSERT_EQ(failures(results), "");
    json listed = json::parse(plexusctl(daemon.socket_path(), {"jobs", "--json"}).out);
    ASSERT_EQ(listed.size(), 1u) << listed.dump(2);
    EXPECT_EQ(listed[0]["class"], "latency");
    EXPECT_EQ(listed[0]["weight"], 4);
    EXPECT_EQ(listed[0]["max_inflight_bytes"], 1048576);
    EXPECT_EQ(listed[0]["max_staging_bytes"], 2048);
    EXPECT_EQ(listed[0]["inflight_bytes"], 0) << "every op ended";
    EXPECT_EQ(listed[0]["refused_ops"], 0);
  }
  const std::string bad = dir + "/bad.toml";
  std::ofstream(bad) << "[jobs.train-x]\nmax_inflight_bytes = \"lots\"\n";
  CommandOutput refused = run_command({PLEXUSD_PATH, "--config", bad, "--socket", dir + "/s.sock"});
  EXPECT_EQ(refused.exit_code, 1) << refused.err;
  EXPECT_THAT(refused.err, HasSubstr(bad));
  EXPECT_THAT(refused.err, HasSubstr("job 'train-x': max_inflight_bytes 'lots' is not a whole "
                                     "number of bytes"));
  std::filesystem::remove_all(dir);
}

// Runs in a child before exec: become user nobody (65534) in exactly `groups`.
std::function<void()> as_nobody(std::vector<gid_t> groups) {
  return [groups] {
    if (::setgroups(groups.size(), groups.data()) != 0 || ::setgid(65534) != 0 ||
        ::setuid(65534) != 0) {
      ::_exit(126);
    }
  };
}

TEST(MonitoringTest, AdminCommandsNeedRootTheDaemonsUserOrTheAdminGroup) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "needs root: plexusctl is run as user nobody with chosen groups";
  }
  const group* users = ::getgrnam("users");
  if (users == nullptr) GTEST_SKIP() << "this host has no group 'users' to make the admin group";
  const gid_t admin_gid = users->gr_gid;
  DaemonProcess daemon({"--admin-group", "users"});
  const std::string socket = daemon.socket_path();
  // Let user nobody reach the socket (the test's directory is private).
  std::filesystem::permissions(std::filesystem::path(socket).parent_path(),
                               std::filesystem::perms::others_exec,
                               std::filesystem::perm_options::add);
  const std::vector<std::string> drain = {PLEXUSCTL_PATH, "--socket", socket,
                                          "nic",          "drain",    "eth9"};
  // A member through a supplementary group passes; the daemon then says the NIC is unknown.
  CommandOutput member = run_command(drain, std::chrono::seconds(20), as_nobody({admin_gid}));
  EXPECT_EQ(member.exit_code, 1) << member.err;
  EXPECT_THAT(member.err, HasSubstr("'eth9' is not a NIC this plexusd reaches peers over"));
  // Not a member: refused, saying who may.
  CommandOutput stranger = run_command(drain, std::chrono::seconds(20), as_nobody({65534}));
  EXPECT_EQ(stranger.exit_code, 1) << stranger.err;
  EXPECT_THAT(stranger.err,
              HasSubstr("draining a NIC needs root, plexusd's own user (uid 0) or a member of "
                        "group users (--admin-group); this request came from uid 65534"));
  // Read-only commands are open to it.
  CommandOutput status = run_command({PLEXUSCTL_PATH, "--socket", socket, "status"},
                                     std::chrono::seconds(20), as_nobody({65534}));
  EXPECT_EQ(status.exit_code, 0) << status.err;
}

// plexusctl nic fault: refused where plexusd runs without --fault-injection (saying so),
// then as any admin command is (who may, which NIC).
TEST(MonitoringTest, FaultInjectionIsRefusedUnlessTheDaemonAllowsItAndTheNicIsKnown) {
  {
    DaemonProcess daemon;
    CommandOutput off = plexusctl(daemon.socket_path(), {"nic", "fault", "eth0"});
    EXPECT_EQ(off.exit_code, 1) << off.err;
    EXPECT_THAT(off.err, HasSubstr("fault injection is off in this plexusd (start it with "
                                   "--fault-injection)"));
  }
  DaemonProcess daemon({"--fault-injection"});
  CommandOutput unknown = plexusctl(daemon.socket_path(), {"nic", "fault", "eth9"});
  EXPECT_EQ(unknown.exit_code, 1) << unknown.err;
  EXPECT_THAT(unknown.err, HasSubstr("'eth9' is not a NIC this plexusd reaches peers over"));
  if (::geteuid() != 0) GTEST_SKIP() << "the rest runs plexusctl as user nobody: needs root";
  // User nobody is told who may, by a daemon with fault injection on and by one without it:
  // that comes first, so a stranger learns nothing of how the daemon runs.
  DaemonProcess without;
  for (const DaemonProcess* d : {&daemon, &without}) {
    std::filesystem::permissions(std::filesystem::path(d->socket_path()).parent_path(),
                                 std::filesystem::perms::others_exec,
                                 std::filesystem::perm_options::add);
    CommandOutput stranger =
        run_command({PLEXUSCTL_PATH, "--socket", d->socket_path(), "nic", "fault", "eth9"},
                    std::chrono::seconds(20), as_nobody({65534}));
    EXPECT_EQ(stranger.exit_code, 1) << stranger.err;
    EXPECT_THAT(stranger.err, HasSubstr("injecting a fault needs root"));
  }
}

TEST(MonitoringTest, AnUnknownAdminGroupStopsTheDaemonNamingIt) {
  const std::string dir = "/tmp/plexus-admin-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  CommandOutput out = run_command({PLEXUSD_PATH, "--socket", dir + "/plexusd.sock", "--metrics",
                                   "off", "--admin-group", "no-such-group-here"});
  std::filesystem::remove_all(dir);
  EXPECT_EQ(out.exit_code, 1);
  EXPECT_THAT(out.out + out.err, HasSubstr("--admin-group no-such-group-here: no such group"));
}

TEST(MonitoringTest, OpsOnAnIdleDaemonSaysNothingIsInFlight) {
  DaemonProcess daemon({"--node-name", "node-b"});
  CommandOutput table = plexusctl(daemon.socket_path(), {"ops", "--finished"});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("node node-b: 0 collective(s) in flight"));
  EXPECT_THAT(table.out, HasSubstr("no finished collectives recorded"));
  CommandOutput js = plexusctl(daemon.socket_path(), {"ops", "--json"});
  json ops = json::parse(js.out);
  EXPECT_EQ(ops["node"], "node-b");
  EXPECT_EQ(ops["stall_ms"], 1000);
  EXPECT_TRUE(ops["inflight"].empty());
}

}  // namespace
}  // namespace plexus::test
