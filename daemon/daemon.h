// The plexusd service as a library: plexusd's main() and plexus-bench's embedded
// daemon both run it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "daemon/config.h"

namespace plexus::daemon {
namespace gpu {
class DeviceMemory;
}

class Daemon {
 public:
  // `device_memory`: the node's GPUs; null (the service) opens them through CUDA when a
  // client first registers GPU memory. Tests pass one over host memory.
  explicit Daemon(Config config, std::shared_ptr<gpu::DeviceMemory> device_memory = nullptr);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Before start(): the engine thread calls `ping` from its own loop at least every `every`
  // (systemd's watchdog, Engine::set_watchdog).
  void set_engine_watchdog(std::function<void()> ping, std::chrono::microseconds every);
  // Before start(): the command line a reload reads the config with again (plexusd's own,
  // without its program name) and the --config file it names; without it a reload says
  // there is nothing to read.
  void set_config_args(std::vector<std::string> args, std::string file);
  // Called from the control thread with a line on how the daemon is doing (sessions,
  // communicators, a drain) when it changes, and at once with the last line: systemd's
  // STATUS=. Set it after READY=1, whose own STATUS the line would otherwise precede.
  void set_status_listener(std::function<void(const std::string&)> listener);
  // Any thread, once started (SIGHUP, plexusctl config reload): reads the config again
  // and applies what may change while it runs (config_reload.h); a file that does not read
  // is refused whole, naming its line, and the settings in use are kept.
  ConfigReloadReport reload();
  // The settings in use (plexusctl config).
  ConfigShown shown_config() const;
  // Binds the socket and starts the control and engine threads. Throws
  // std::runtime_error with a sentence (e.g. "socket path ... is in use by a running
  // plexusd") on failure.
  void start();
  // Stops serving, fails outstanding ops, unlinks the socket; safe to call twice.
  void stop();
  // Blocks until stop() is called (from another thread or a signal handler's thread), or
  // the daemon asks to exit (idle_exit_s): the caller then calls stop().
  void wait();

  const std::string& socket_path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace plexus::daemon
