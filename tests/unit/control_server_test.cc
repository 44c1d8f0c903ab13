// The control thread's lifecycle as the engine sees it.
#include "daemon/control/control_server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "daemon/config.h"
#include "daemon/engine/engine.h"

namespace plexus::daemon {
namespace {

// The engine reports lost peer links to the control thread until it stops itself; a daemon
// shutting down stops the control thread first, so a link lost in between is posted to a
// control thread that is gone. That post must be dropped (it used to abort in libuv).
TEST(ControlServerTest, WhatIsPostedAfterStopIsDroppedNotRun) {
  char dir_template[] = "/tmp/plexus-control-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  Config config;
  config.socket_path = dir + "/plexusd.sock";
  Engine engine(engine_config(config, false), [](uint64_t, std::string) {});
  std::atomic<int> ran{0};
  {
    ControlServer control(control_config(config, {}), engine);
    control.start();
    control.post([&ran] { ++ran; });
    control.stop();
    const int before_stop_ran = ran.load();
    control.post([&ran] { ran += 100; });
    EXPECT_LE(before_stop_ran, 1);
    EXPECT_EQ(ran.load(), before_stop_ran);
  }
  EXPECT_LT(ran.load(), 100);
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace plexus::daemon
