// The control thread's lifecycle as the engine sees it.
#include "daemon/control_server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "daemon/engine.h"

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
  Engine engine(config, [](uint64_t, std::string) {});
  std::atomic<int> ran{0};
  {
    ControlServer control(config, dir + "/plexusd.sock", engine);
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
