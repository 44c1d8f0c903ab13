// A daemon that starts itself: ranks that find no plexusd start exactly one between them,
// it serves them, and it exits after its idle time, removing its socket.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "plexus/plexus.h"
#include "tests/integration/rank_processes.h"

namespace plexus::test {
namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The pids of plexusd processes whose command line names `socket`.
std::vector<pid_t> daemons_on(const std::string& socket) {
  std::vector<pid_t> pids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string cmdline = read_file(entry.path() / "cmdline");
    if (cmdline.find("plexusd") != std::string::npos && cmdline.find(socket) != std::string::npos) {
      pids.push_back(static_cast<pid_t>(std::stoi(name)));
    }
  }
  return pids;
}

class AutostartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/plexus-autostart.XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    socket_ = dir_ + "/run/plexusd.sock";  // its directory is made by the first rank
    ::setenv("PLEXUS_AUTOSTART", "1", 1);
    ::setenv("PLEXUS_AUTOSTART_IDLE_S", "2", 1);
    ::setenv("PLEXUSD", PLEXUSD_PATH, 1);
  }
  void TearDown() override {
    for (pid_t pid : daemons_on(socket_)) ::kill(pid, SIGKILL);
    ::unsetenv("PLEXUS_AUTOSTART");
    ::unsetenv("PLEXUS_AUTOSTART_IDLE_S");
    ::unsetenv("PLEXUSD");
    std::filesystem::remove_all(dir_);
  }
  std::string dir_;
  std::string socket_;
};

TEST_F(AutostartTest, FourRanksStartOneDaemonThatExitsWhenIdle) {
  ASSERT_TRUE(daemons_on(socket_).empty());
  std::vector<pid_t> seen_while_running;
  auto results = run_ranks(socket_, 4, [&](int rank, int nranks, const auto& id) -> std::string {
    plexus_comm_t comm = nullptr;
    if (plexus_result_t r = plexus_comm_init_rank(&comm, nranks, id, rank); r != PLEXUS_SUCCESS) {
      return describe("init", r);
    }
    float x[64];
    for (float& v : x) v = static_cast<float>(rank + 1);
    if (plexus_result_t r = plexus_allreduce(x, x, 64, PLEXUS_FLOAT32, PLEXUS_SUM, comm, nullptr);
        r != PLEXUS_SUCCESS) {
      return describe("allreduce", r);
    }
    if (x[63] != 10.0f) return "allreduce gave " + std::to_string(x[63]);
    // Every rank sees the same single daemon while it is connected.
    const auto daemons = daemons_on(socket_);
    if (daemons.size() != 1) return "rank sees " + std::to_string(daemons.size()) + " daemons";
    plexus_comm_destroy(comm);
    return {};
  });
  EXPECT_EQ(failures(results), "");
  const std::vector<pid_t> after = daemons_on(socket_);
  ASSERT_EQ(after.size(), 1u) << "exactly one plexusd was started";

  // No client left: it exits after its 2 s (the check runs once a second).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (!daemons_on(socket_).empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(daemons_on(socket_).empty()) << "the started plexusd did not exit when idle";
  EXPECT_FALSE(std::filesystem::exists(socket_)) << "its socket was left behind";
  const std::string text = read_file(dir_ + "/run/plexusd.log");
  EXPECT_NE(text.find("listening on " + socket_), std::string::npos) << text;
  EXPECT_NE(text.find("--idle-exit-s): exiting"), std::string::npos) << text;
}

// A trainer publishes a version and exits; the daemon it started outlives its idle time
// (its log says why), and a rollout started afterwards pulls the version exact from it.
TEST_F(AutostartTest, ADaemonWhoseStoreHoldsAVersionStaysPastItsIdleTimeForLaterPulls) {
  const std::vector<uint8_t> weights = {1, 2, 3, 5, 8, 13, 21, 34, 55, 89};
  auto published = run_ranks(socket_, 1, [&](int, int, const auto&) -> std::string {
    plexus_weight_tensor_t t = {"w", const_cast<uint8_t*>(weights.data()), weights.size()};
    if (plexus_result_t r = plexus_weights_publish("policy", 1, &t, 1); r != PLEXUS_SUCCESS) {
      return describe("publish", r) + ": " + plexus_get_last_error();
    }
    return {};
  });
  ASSERT_EQ(failures(published), "");
  ASSERT_EQ(daemons_on(socket_).size(), 1u);
  const std::string log = dir_ + "/run/plexusd.log";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (read_file(log).find("but staying for pulls") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const std::string text = read_file(log);
  ASSERT_NE(
      text.find(
          "(--idle-exit-s), but staying for pulls yet to come: 4.0 KiB of weights in 1 model(s)"),
      std::string::npos)
      << text;
  EXPECT_EQ(text.find("--idle-exit-s): exiting"), std::string::npos) << text;
  auto pulled = run_ranks(socket_, 1, [&](int, int, const auto&) -> std::string {
    std::vector<uint8_t> out(weights.size());
    plexus_weight_tensor_t t = {"w", out.data(), out.size()};
    uint64_t got = 0;
    if (plexus_result_t r = plexus_weights_pull("policy", 0, 0, 0, &t, 1, &got);
        r != PLEXUS_SUCCESS) {
      return describe("pull", r) + ": " + plexus_get_last_error();
    }
    return got == 1 && out == weights ? "" : "pulled version " + std::to_string(got) + " wrong";
  });
  EXPECT_EQ(failures(pulled), "") << read_file(log);
  EXPECT_EQ(daemons_on(socket_).size(), 1u) << "a second daemon was started";
}

TEST_F(AutostartTest, OffMeansAClearErrorAndNoDaemon) {
  ::setenv("PLEXUS_AUTOSTART", "0", 1);
  auto results = run_ranks(socket_, 1, [](int, int, const auto& id) -> std::string {
    ::setenv("PLEXUS_CONNECT_TIMEOUT_MS", "0", 1);
    plexus_comm_t comm = nullptr;
    const plexus_result_t r = plexus_comm_init_rank(&comm, 1, id, 0);
    if (r != PLEXUS_ERR_DAEMON_UNAVAILABLE) return describe("init", r);
    return {};
  });
  EXPECT_EQ(failures(results), "");
  EXPECT_TRUE(daemons_on(socket_).empty());
}

TEST_F(AutostartTest, AMissingBinaryIsNamed) {
  ::setenv("PLEXUSD", "/nonexistent/plexusd", 1);
  auto results = run_ranks(socket_, 1, [](int, int, const auto& id) -> std::string {
    plexus_comm_t comm = nullptr;
    const plexus_result_t r = plexus_comm_init_rank(&comm, 1, id, 0);
    const std::string message = plexus_get_last_error();
    if (r != PLEXUS_ERR_DAEMON_UNAVAILABLE ||
        message.find("/nonexistent/plexusd") == std::string::npos) {
      return describe("init", r);
    }
    return {};
  });
  EXPECT_EQ(failures(results), "");
}

}  // namespace
}  // namespace plexus::test
