// plexusd's configuration: each default written once, and the slices the components get at
// construction carrying exactly what the flags said.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "common/switch.h"
#include "daemon/config.h"
#include "daemon/peers/peer_nics.h"

namespace plexus::daemon {
namespace {

using std::chrono::milliseconds;

TEST(ConfigSlicesTest, TheChannelsTimingDefaultsAreTheChannelsOwn) {
  const Config config;
  const transports::ReliableChannel::Settings channel;
  EXPECT_EQ(milliseconds(config.path_timeout_ms), channel.path_timeout);
  EXPECT_EQ(milliseconds(config.heartbeat_ms), channel.heartbeat_interval);
  EXPECT_EQ(milliseconds(config.failback_stable_ms), channel.stable_after);
  EXPECT_EQ(milliseconds(config.peer_grace_ms), channel.last_path_grace);
}

TEST(ConfigSlicesTest, TheEngineGetsWhatTheFlagsSaid) {
  Config config;
  config.node_name = "n7";
  config.workers = 3;
  config.parallel_threshold_bytes = 12345;
  config.max_gpu_staging_bytes = 1 << 20;
  config.gpu_reduce_kernel_bytes = 4096;
  config.path_timeout_ms = 333;
  config.heartbeat_ms = 44;
  config.failback_stable_ms = 555;
  config.peer_grace_ms = 6666;
  config.telemetry = common::OnOff::kOff;
  config.stall_ms = 1500;
  config.rank_skew_ms = 25;
  config.peer_listen = "127.0.0.1:0";
  const EngineConfig e = engine_config(config, /*channel_acks=*/true);
  EXPECT_EQ(e.node_name, "n7");
  EXPECT_EQ(e.workers, 3u);
  EXPECT_EQ(e.parallel_threshold_bytes, 12345u);
  EXPECT_EQ(e.max_gpu_staging_bytes, uint64_t{1} << 20);
  EXPECT_EQ(e.gpu_reduce_kernel_bytes, 4096u);
  EXPECT_TRUE(e.channel.reliable);
  EXPECT_EQ(e.channel.path_timeout, milliseconds(333));
  EXPECT_EQ(e.channel.heartbeat_interval, milliseconds(44));
  EXPECT_EQ(e.channel.stable_after, milliseconds(555));
  EXPECT_EQ(e.channel.last_path_grace, milliseconds(6666));
  EXPECT_FALSE(e.telemetry);
  EXPECT_TRUE(e.follow_nics);
  EXPECT_EQ(e.stall, milliseconds(1500));
  EXPECT_EQ(e.rank_skew, milliseconds(25));
  EXPECT_FALSE(engine_config(config, false).channel.reliable);
}

TEST(ConfigSlicesTest, NoWorkersAskedForIsOneFewerThanTheCoresAndANameIsAlwaysThere) {
  Config config;  // workers 0, node name empty
  const EngineConfig e = engine_config(config, false);
  EXPECT_LE(e.workers, std::max(1u, std::thread::hardware_concurrency()) - 1);
  EXPECT_FALSE(e.node_name.empty());  // the host name
  EXPECT_FALSE(control_config(config, {}).node_name.empty());
  EXPECT_EQ(control_config(config, {}).node_name, e.node_name);
}

TEST(ConfigSlicesTest, TheControlThreadGetsWhatTheFlagsSaidAndTheNicsFound) {
  Config config;
  config.node_name = "n2";
  config.socket_path = "/tmp/x.sock";
  config.sq_entries = 64;
  config.cq_entries = 128;
  config.tcp_congestion = "cubic";
  config.reconnect_max_ms = 900;
  config.connect_timeout_ms = 700;
  config.telemetry_window_us = 500;
  config.slow_path_ratio = 0.25;
  config.admin_group = "ops";
  PeerNic nic;
  nic.rail.name = "nic1";
  nic.address_text = "198.18.1.1";
  const ControlConfig c = control_config(config, {nic});
  EXPECT_EQ(c.node_name, "n2");
  EXPECT_EQ(c.socket_path, "/tmp/x.sock");
  EXPECT_EQ(c.sq_entries, 64u);
  EXPECT_EQ(c.cq_entries, 128u);
  EXPECT_EQ(c.peers.tcp_congestion, "cubic");
  EXPECT_EQ(c.peers.reconnect_max, milliseconds(900));
  ASSERT_EQ(c.peers.nics.size(), 1u);
  EXPECT_EQ(c.peers.nics[0].rail.name, "nic1");
  EXPECT_EQ(c.connect_timeout, milliseconds(700));
  EXPECT_TRUE(c.telemetry);
  EXPECT_EQ(c.telemetry_window_us, 500u);
  EXPECT_DOUBLE_EQ(c.slow_path_ratio, 0.25);
  EXPECT_EQ(c.admin_group, "ops");
}

TEST(ConfigSlicesTest, SwitchWordsNameTheirValuesBothWays) {
  for (const auto& [word, value] : common::on_off_words()) {
    EXPECT_EQ(common::switch_name(value), word);
  }
  for (const auto& [word, value] : common::on_off_auto_words()) {
    EXPECT_EQ(common::switch_name(value), word);
  }
  EXPECT_EQ(common::on_off_auto_words().size(), 3u);
}

}  // namespace
}  // namespace plexus::daemon
