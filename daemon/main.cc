// plexusd: the per-node collective-communication service.
#include <signal.h>

#include <spdlog/spdlog.h>

#include <cstdio>
#include <thread>

#include "daemon/config_options.h"
#include "daemon/daemon.h"
#include "daemon/service_notify.h"

int main(int argc, char** argv) {
  // Signals are taken by a dedicated thread with sigwait, so every other thread blocks them
  // (set first: before any thread starts, and before a SIGHUP sent early could kill).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);  // read the config again
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  const std::vector<std::string> args(argv + 1, argv + argc);
  plexus::daemon::ConfigLoad load = plexus::daemon::load_config(args);
  if (load.exit_code >= 0) {
    std::fputs(load.output.c_str(), stdout);
    // A bad flag (CLI11's exit codes) is pointed to --help; a bad file names its line.
    if (!load.error.empty()) {
      std::fprintf(stderr, "plexusd: %s\n%s", load.error.c_str(),
                   load.exit_code == 1 ? "" : "Run with --help for more information.\n");
    }
    return load.exit_code;
  }
  const plexus::daemon::Config& config = load.config;

  spdlog::set_level(spdlog::level::from_str(config.log_level));

  // Before the daemon: it outlives the engine thread that pings through it.
  const plexus::daemon::ServiceNotify notify;
  plexus::daemon::Daemon daemon(config);
  daemon.set_config_args(args, load.file);
  if (const auto every = notify.watchdog_interval()) {
    // From the engine thread's own loop: an engine stuck in an op stops the pings and
    // systemd restarts the service (the unit's WatchdogSec).
    daemon.set_engine_watchdog([&notify] { notify.watchdog(); }, *every);
    spdlog::info("systemd watchdog: the engine pings every {} ms", every->count() / 1000);
  }
  try {
    daemon.start();
  } catch (const std::exception& e) {
    spdlog::error("plexusd cannot start: {}", e.what());
    notify.status(std::string("cannot start: ") + e.what());
    return 1;
  }
  notify.ready("serving ranks on " + daemon.socket_path() +
               (config.peer_listen.empty() ? std::string("; single node")
                                           : "; peer daemons on " + config.peer_listen));
  daemon.set_status_listener([&notify](const std::string& line) { notify.status(line); });
  std::thread signal_thread([&] {
    int signal_number = 0;
    while (sigwait(&signals, &signal_number) == 0 && signal_number == SIGHUP) {
      spdlog::info("SIGHUP: reading the config again");
      notify.reloading();
      daemon.reload();  // logs what it applied, or why it refused
      notify.reloaded();
    }
    spdlog::info("signal {}: shutting down", signal_number);
    notify.stopping("stopping (signal " + std::to_string(signal_number) + ")");
    daemon.stop();
  });
  daemon.wait();
  daemon.stop();  // after an idle exit; a no-op after a signal
  // Wake the signal thread if stop() came from elsewhere.
  ::kill(::getpid(), SIGTERM);
  signal_thread.join();
  return 0;
}
