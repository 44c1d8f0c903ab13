// Runs a program (plexusctl, promtool, curl) to completion and captures what it printed,
// with a time limit so a test never hangs on it.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace plexus::test {

struct CommandOutput {
  int exit_code = -1;  // -1: killed at the time limit or by a signal
  std::string out;
  std::string err;
};

// `in_child` runs in the child before exec (e.g. to drop to another user).
CommandOutput run_command(const std::vector<std::string>& argv,
                          std::chrono::milliseconds limit = std::chrono::seconds(20),
                          const std::function<void()>& in_child = {});

}  // namespace plexus::test
