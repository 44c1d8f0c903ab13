// The plexusd service as a library: plexusd's main() and plexus-bench's embedded
// daemon both run it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

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
