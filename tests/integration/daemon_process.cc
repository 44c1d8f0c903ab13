#include "tests/integration/daemon_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace plexus::test {

DaemonProcess::DaemonProcess(std::vector<std::string> extra_args) {
  char pattern[] = "/tmp/plexus-test-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = pattern;
  socket_path_ = dir_ + "/plexusd.sock";
  log_path_ = dir_ + "/plexusd.log";
  events_path_ = dir_ + "/events.jsonl";
  // PLEXUS_TEST_PLEXUSD: a copied test binary (tools/gpu-check's bundle) runs the daemon
  // copied beside it, far from the build tree that PLEXUSD_PATH names.
  const char* plexusd = std::getenv("PLEXUS_TEST_PLEXUSD");
  std::vector<std::string> args = {plexusd != nullptr && *plexusd != '\0' ? plexusd : PLEXUSD_PATH,
                                   "--socket", socket_path_, "--log-level", "debug"};
  auto given = [&extra_args](const std::string& flag) {
    return std::find(extra_args.begin(), extra_args.end(), flag) != extra_args.end();
  };
  // Many test daemons run at once: each serves metrics on a port of its own.
  if (!given("--metrics") && !given("--metrics-listen")) {
    args.insert(args.end(), {"--metrics-listen", "127.0.0.1:0"});
  }
  if (!given("--events-file")) args.insert(args.end(), {"--events-file", events_path_});
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  pid_ = ::fork();
  if (pid_ == 0) {
    int log = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(log, 1);
    ::dup2(log, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!std::filesystem::exists(socket_path_)) {
    if (!alive() || std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("plexusd did not come up on " + socket_path_ + ": " + log());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

DaemonProcess::~DaemonProcess() {
  if (alive()) {
    // A clean stop must exit 0: under the sanitizers, a leak report changes the status.
    ::kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (alive() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (alive()) {
      kill_now();
      ADD_FAILURE() << "plexusd did not stop within 10 s of SIGTERM; its log:\n" << log();
    } else if (!WIFEXITED(exit_status_) || WEXITSTATUS(exit_status_) != 0) {
      ADD_FAILURE() << "plexusd did not exit cleanly on SIGTERM (wait status " << exit_status_
                    << "); its log:\n"
                    << log();
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

bool DaemonProcess::alive() {
  if (exit_status_ != -1 || pid_ <= 0) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_status_ = status;
    return false;
  }
  return true;
}

void DaemonProcess::kill_now() {
  if (!alive()) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  exit_status_ = status;
}

std::string DaemonProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace plexus::test
