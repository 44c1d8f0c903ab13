// A test suite that shares one plexusd, started for the suite and stopped after it (its
// tests do not disturb each other's state, and a daemon per test would cost seconds each);
// after every test the daemon must still be alive.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tests/integration/daemon_process.h"

namespace plexus::test {

class SharedDaemonTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { daemon_ = new DaemonProcess(); }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void TearDown() override {
    ASSERT_TRUE(daemon_->alive()) << "plexusd died; its log:\n" << daemon_->log();
  }
  static const std::string& socket() { return daemon_->socket_path(); }
  static DaemonProcess& daemon() { return *daemon_; }

 private:
  inline static DaemonProcess* daemon_ = nullptr;
};

}  // namespace plexus::test
