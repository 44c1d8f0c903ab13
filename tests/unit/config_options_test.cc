// plexusd's settings (daemon/config_options.h, config_file.h, config_reload.h): the config
// file read strictly, every error naming its line; flags over the file; the settings in use
// written back as a file that reads as the same settings; and which changes a reload applies
// while plexusd runs and which wait for a restart.
#include "daemon/config_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "daemon/config_reload.h"

namespace plexus::daemon {
namespace {

using ::testing::HasSubstr;

class ConfigOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() /
            ("plexus-config-" + std::to_string(::getpid()) + ".toml");
  }
  void TearDown() override { std::filesystem::remove(path_); }
  // Writes `text` as the config file and loads it with `flags` before --config.
  ConfigLoad load(const std::string& text, std::vector<std::string> flags = {}) {
    std::ofstream(path_) << text;
    flags.push_back("--config");
    flags.push_back(path_.string());
    return load_config(flags);
  }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

TEST_F(ConfigOptionsTest, ReadsKeysJobsAndUnderscoresAndFlagsOverrideTheFile) {
  ConfigLoad l = load(
      "stall_ms = 700\nnics = \"eth1,eth2\"\nfault-injection = true\nchannel-acks = \"on\"\n"
      "[jobs.trainer]\nclass = \"bulk\"\nweight = 3\nmax_inflight_bytes = 4096\n",
      {"--stall-ms", "900"});
  ASSERT_EQ(l.exit_code, -1) << l.error;
  EXPECT_EQ(l.file, path());
  EXPECT_EQ(l.config.stall_ms, 900u) << "the flag wins over the file";
  EXPECT_EQ(l.config.nics, (std::vector<std::string>{"eth1", "eth2"}));
  EXPECT_TRUE(l.config.fault_injection);
  EXPECT_EQ(l.config.channel_acks, common::OnOffAuto::kOn);
  EXPECT_EQ(l.config.jobs.at("trainer").policy.weight, 3u);
  EXPECT_EQ(l.config.jobs.at("trainer").caps.max_inflight_bytes, 4096u);
}

TEST_F(ConfigOptionsTest, LatencyConnectionsOnAutoFollowWhetherALatencyJobIsConfigured) {
  ConfigLoad bulk = load("[jobs.trainer]\nclass = \"bulk\"\n");
  ASSERT_EQ(bulk.exit_code, -1) << bulk.error;
  EXPECT_EQ(bulk.config.latency_connections, common::OnOffAuto::kAuto);
  EXPECT_FALSE(wants_latency_connections(bulk.config));
  ConfigLoad latency = load("[jobs.rollout]\nclass = \"latency\"\n");
  ASSERT_EQ(latency.exit_code, -1) << latency.error;
  EXPECT_TRUE(wants_latency_connections(latency.config));
  ConfigLoad off = load("[jobs.rollout]\nclass = \"latency\"\n", {"--latency-connections", "off"});
  ASSERT_EQ(off.exit_code, -1) << off.error;
  EXPECT_FALSE(wants_latency_connections(off.config));
  ConfigLoad on = load("", {"--latency-connections", "on", "--latency-dscp", "46"});
  ASSERT_EQ(on.exit_code, -1) << on.error;
  EXPECT_TRUE(wants_latency_connections(on.config));
  EXPECT_EQ(on.config.latency_dscp, 46u);
  EXPECT_NE(load("", {"--latency-dscp", "64"}).exit_code, -1) << "DSCP is 6 bits";
}

TEST_F(ConfigOptionsTest, EveryBadFileIsRefusedNamingItsLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"stall-ms = 500\nstal-ms = 5\n", ":2: unknown key 'stal-ms'"},
      {"\nstall-ms = 5\n", ":2: --stall-ms: Value 5 not in range"},
      {"log-level = \"loud\"\n", ":1: --log-level: loud not in"},
      {"stall-ms = 500\n[jobs.x\n", ":2:"},
      {"garbage here\n", ":1:"},
      {"stall-ms = 1\nstall-ms = 2\n", ":2:"},
      {"[metrics]\nlisten = 1\n", ":1:1: [metrics] is not a table plexusd reads"},
      {"[jobs.x]\nclass = \"bulk\"\nweight = 0\n", ":3: job 'x': weight"},
      {"[jobs.x]\ncolour = \"red\"\n", ":2: job 'x': unknown key 'colour'"},
      {"fault-injection = \"maybe\"\n", ":1: fault-injection takes true or false"},
      {"stall_ms = 500\nstall-ms = 600\n", ":2: 'stall-ms' sets stall-ms again (line 1"},
      {"max-pool-bytes = -1\n", ":1: max-pool-bytes takes a whole non-negative number"},
      {"max-pool-bytes = \"010\"\n", ":1: max-pool-bytes takes a whole non-negative number"},
      {"max-pool-bytes = 1e10\n", ":1: max-pool-bytes takes a whole non-negative number"},
      {"slow-path-ratio = \"0.5\"\n", ":1: slow-path-ratio takes a number"},
      {"job = [\"a=bulk\"]\n", ":1: jobs are [jobs.NAME] tables"},
      {"nics = []\n", ":1: nics: an empty list"},
      {"\n\nsq-entries = 100\n", ":3: --sq-entries: 100 is not a power of two"},
      {"slow-path-ratio = nan\n", ":1: --slow-path-ratio: nan is not a finite number"},
      {"stall-ms = 2026-11-26\n", ":1:12: 'stall-ms' takes a string, a number or true/false"},
  };
  for (const auto& [text, error] : cases) {
    ConfigLoad l = load(text);
    EXPECT_EQ(l.exit_code, 1) << text;
    EXPECT_THAT(l.error, HasSubstr(path() + error)) << text;
  }
  // A file value is checked even where a flag overrides it.
  ConfigLoad overridden = load("stall-ms = \"abc\"\n", {"--stall-ms", "900"});
  EXPECT_THAT(overridden.error, HasSubstr(path() + ":1: stall-ms takes a whole"));
  // "016" is 14 to CLI11 (base 0): refused as the ring's entries, not taken as 16.
  EXPECT_THAT(load_config({"--sq-entries", "016"}).error, HasSubstr("is not a power of two"));
  ConfigLoad missing = load_config({"--config", path() + ".absent"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.error, HasSubstr(path() + ".absent"));
}

TEST_F(ConfigOptionsTest, TheSettingsInUseReadBackAsTheSameSettings) {
  ConfigLoad l = load(
      "stall-ms = 700\nnode-name = \"n \\\"quoted\\\"\\tand tabbed\"\nslow-path-ratio = 0.25\n"
      "slow-node-below = 0.7512345\n"
      "[jobs.\"a job\"]\nclass = \"latency\"\nweight = 7\nmax_staging_bytes = 99\n");
  ASSERT_EQ(l.exit_code, -1) << l.error;
  const std::string text = config_text(l.config);
  EXPECT_THAT(text, HasSubstr("\nstall-ms = 700\n"));
  EXPECT_THAT(text, HasSubstr("# cluster-secret-file = (not set)\n"));
  ConfigLoad again = load(text);
  ASSERT_EQ(again.exit_code, -1) << again.error << "\n" << text;
  EXPECT_EQ(config_values(again.config), config_values(l.config)) << text;
  EXPECT_EQ(again.config.node_name, "n \"quoted\"\tand tabbed");
  // Every digit kept, in the settings shown and in a reload's comparison.
  EXPECT_EQ(again.config.slow_node_below, 0.7512345);
  EXPECT_EQ(config_values(l.config).at("slow-node-below"), "0.7512345");
}

TEST(ConfigReloadTest, LiveSettingsAreAppliedAndTheOthersWaitForARestart) {
  Config in_use;
  in_use.jobs["trainer"].policy.weight = 2;
  Config read = in_use;
  read.stall_ms = 300;
  read.slow_path_ratio = 0.3;
  read.jobs["trainer"].policy.weight = 5;
  read.jobs["rollout"].policy.traffic_class = transports::TrafficClass::kLatency;
  read.peer_listen = "0.0.0.0:7355";
  read.telemetry_window_us = 500;
  const ReloadPlan plan = plan_reload(in_use, read);
  EXPECT_THAT(plan.applied,
              ::testing::UnorderedElementsAre(HasSubstr("stall-ms: 1000 -> 300"),
                                              HasSubstr("slow-path-ratio: 0.1 -> 0.3"),
                                              HasSubstr("jobs.trainer.weight: 2 -> 5"),
                                              HasSubstr("jobs.rollout.class: (none) -> latency"),
                                              HasSubstr("jobs.rollout.weight: (none) -> 1"),
                                              HasSubstr("jobs.rollout.max_inflight_bytes"),
                                              HasSubstr("jobs.rollout.max_staging_bytes")));
  EXPECT_THAT(
      plan.restart_needed,
      ::testing::UnorderedElementsAre(
          HasSubstr("peer-listen:  -> 0.0.0.0:7355"), HasSubstr("telemetry-window-us: 1000 -> 500"),
          // The first latency job: its connections open at the next start.
          HasSubstr("latency-connections (auto, by the jobs' classes): off -> on")));
  EXPECT_EQ(plan.in_use.stall_ms, 300u);
  EXPECT_EQ(plan.in_use.jobs.at("trainer").policy.weight, 5u);
  EXPECT_EQ(plan.in_use.peer_listen, "") << "what waits for a restart stays as it runs";
  EXPECT_EQ(plan.in_use.telemetry_window_us, 1000u);
  EXPECT_TRUE(plan_reload(in_use, in_use).applied.empty());
}

}  // namespace
}  // namespace plexus::daemon
