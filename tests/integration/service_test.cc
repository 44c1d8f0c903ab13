// plexusd as a systemd service: the notify protocol's datagrams (READY, STATUS, WATCHDOG,
// STOPPING) on a NOTIFY_SOCKET this test listens on, as systemd would; the watchdog pings
// come from the engine thread's loop, so they stop while the engine is held; SIGHUP (the
// unit's ExecReload) reads the config again in place, and the status line follows a drain.
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/command_output.h"
#include "tests/integration/daemon_process.h"

namespace plexus::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A datagram socket where plexusd's sd_notify calls land.
class NotifySocket {
 public:
  NotifySocket() {
    char dir_template[] = "/tmp/plexus-notify-XXXXXX";
    dir_ = ::mkdtemp(dir_template);
    path_ = dir_ + "/notify.sock";
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ADD_FAILURE() << "bind " << path_ << ": " << std::strerror(errno);
    }
  }
  ~NotifySocket() {
    ::close(fd_);
    std::filesystem::remove_all(dir_);
  }
  const std::string& path() const { return path_; }

  // The next datagram within `limit`; "" when none came.
  std::string next(milliseconds limit) {
    timeval tv{static_cast<time_t>(limit.count() / 1000),
               static_cast<suseconds_t>((limit.count() % 1000) * 1000)};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buffer[4096];
    const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
    return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : std::string();
  }
  // Every datagram until `limit` passes, with when each came.
  std::vector<std::pair<Clock::time_point, std::string>> all_for(milliseconds limit) {
    std::vector<std::pair<Clock::time_point, std::string>> got;
    const auto end = Clock::now() + limit;
    for (auto now = Clock::now(); now < end; now = Clock::now()) {
      std::string d = next(std::chrono::duration_cast<milliseconds>(end - now) + milliseconds(1));
      if (!d.empty()) got.emplace_back(Clock::now(), std::move(d));
    }
    return got;
  }
  // Waits up to `limit` for a datagram containing `text`; it, or "".
  std::string wait_for(const std::string& text, milliseconds limit) {
    const auto end = Clock::now() + limit;
    for (auto now = Clock::now(); now < end; now = Clock::now()) {
      std::string d = next(std::chrono::duration_cast<milliseconds>(end - now) + milliseconds(1));
      if (d.find(text) != std::string::npos) return d;
    }
    return "";
  }

 private:
  std::string dir_;
  std::string path_;
  int fd_ = -1;
};

// A plexusd started as systemd would with `watchdog_usec` (0: no watchdog).
std::unique_ptr<DaemonProcess> start_notified(const NotifySocket& socket, uint64_t watchdog_usec,
                                              std::vector<std::string> args) {
  ::setenv("NOTIFY_SOCKET", socket.path().c_str(), 1);
  if (watchdog_usec > 0) ::setenv("WATCHDOG_USEC", std::to_string(watchdog_usec).c_str(), 1);
  auto daemon = std::make_unique<DaemonProcess>(std::move(args));
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
  return daemon;
}

size_t count_pings(const std::vector<std::pair<Clock::time_point, std::string>>& got) {
  size_t n = 0;
  for (const auto& [at, d] : got) n += d.find("WATCHDOG=1") != std::string::npos ? 1 : 0;
  return n;
}

TEST(ServiceTest, ReadyThenWatchdogPingsThatStopWhileTheEngineIsHeld) {
  NotifySocket notify;
  // WatchdogSec=0.4s: the engine pings every 200 ms.
  auto daemon = start_notified(notify, 400000, {"--fault-injection"});
  const std::string ready = notify.wait_for("READY=1", milliseconds(10000));
  ASSERT_FALSE(ready.empty()) << "no READY=1 within 10 s\n" << daemon->log();
  EXPECT_NE(ready.find("STATUS=serving ranks on " + daemon->socket_path()), std::string::npos)
      << ready;
  EXPECT_GE(count_pings(notify.all_for(milliseconds(1000))), 3u) << daemon->log();

  const CommandOutput hold =
      run_command({PLEXUSCTL_PATH, "--socket", daemon->socket_path(), "engine", "hold", "1500"});
  ASSERT_EQ(hold.exit_code, 0) << hold.out << hold.err;
  const auto held_at = Clock::now();
  // A ping already on its way may still land in the first 100 ms; none after that until the
  // hold ends at 1.5 s; then they come back.
  auto during = notify.all_for(milliseconds(1400));
  size_t late = 0;
  for (const auto& [at, d] : during) {
    if (at - held_at > milliseconds(250) && d.find("WATCHDOG=1") != std::string::npos) ++late;
  }
  EXPECT_EQ(late, 0u) << "watchdog pings went on while the engine was held";
  EXPECT_FALSE(notify.wait_for("WATCHDOG=1", milliseconds(2000)).empty())
      << "the pings did not come back after the hold";
  EXPECT_NE(daemon->log().find("the engine thread is held for 1500 ms"), std::string::npos);

  ::kill(daemon->pid(), SIGTERM);
  EXPECT_FALSE(notify.wait_for("STOPPING=1", milliseconds(5000)).empty());
}

TEST(ServiceTest, NoWatchdogWithoutWatchdogUsecAndNoHoldWithoutFaultInjection) {
  NotifySocket notify;
  auto daemon = start_notified(notify, 0, {});
  ASSERT_FALSE(notify.wait_for("READY=1", milliseconds(10000)).empty()) << daemon->log();
  EXPECT_EQ(count_pings(notify.all_for(milliseconds(500))), 0u);
  const CommandOutput hold =
      run_command({PLEXUSCTL_PATH, "--socket", daemon->socket_path(), "engine", "hold", "100"});
  EXPECT_NE(hold.exit_code, 0);
  EXPECT_NE(hold.err.find("fault injection is off"), std::string::npos) << hold.err;
}

TEST(ServiceTest, SighupReloadsInPlaceAndTheStatusLineFollowsADrain) {
  NotifySocket notify;
  char dir_template[] = "/tmp/plexus-reload-XXXXXX";
  const std::string dir = ::mkdtemp(dir_template);
  const std::string config = dir + "/plexusd.toml";
  std::ofstream(config) << "stall-ms = 2000\n";
  auto daemon = start_notified(notify, 0, {"--config", config});
  ASSERT_FALSE(notify.wait_for("READY=1", milliseconds(10000)).empty()) << daemon->log();
  EXPECT_FALSE(
      notify.wait_for("STATUS=0 session(s), 0 communicator(s)", milliseconds(5000)).empty())
      << daemon->log();
  // systemctl reload: SIGHUP. plexusd stays (the same process) and reads the file again.
  std::ofstream(config) << "stall-ms = 400\n";
  ::kill(daemon->pid(), SIGHUP);
  // As systemctl reload waits for them with Type=notify.
  EXPECT_NE(notify.wait_for("RELOADING=1", milliseconds(5000)).find("MONOTONIC_USEC="),
            std::string::npos);
  EXPECT_FALSE(notify.wait_for("READY=1", milliseconds(5000)).empty()) << daemon->log();
  const auto end = Clock::now() + milliseconds(5000);
  while (Clock::now() < end &&
         daemon->log().find("stall-ms: 2000 -> 400 (applied)") == std::string::npos) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_NE(daemon->log().find("stall-ms: 2000 -> 400 (applied)"), std::string::npos)
      << daemon->log();
  EXPECT_TRUE(daemon->alive());
  const CommandOutput drain =
      run_command({PLEXUSCTL_PATH, "--socket", daemon->socket_path(), "node", "drain"});
  EXPECT_EQ(drain.exit_code, 0) << drain.err;
  EXPECT_FALSE(notify.wait_for("drained: safe to stop", milliseconds(5000)).empty())
      << daemon->log();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace plexus::test
