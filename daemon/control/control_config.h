// The control thread's slice of plexusd's configuration. daemon/config.h holds every
// setting with its default (its flag is declared in daemon/config_options.cc) and builds
// this slice at start-up: nothing here restates a default.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "daemon/peers/peer_server.h"

namespace plexus::daemon {

// What a config reload did (Daemon::reload): refused with `error` (nothing changed), or the
// changes applied and those that wait for a restart, each "key: old -> new".
struct ConfigReloadReport {
  std::string error;
  std::vector<std::string> applied;
  std::vector<std::string> restart_needed;
};

// The settings in use, for plexusctl config.
struct ConfigShown {
  std::string text;  // as a config file
  std::string file;  // the --config file ("": none)
  std::vector<std::string> restart_needed;
};

struct ControlConfig {
  std::string socket_path;  // resolved: where clients and plexusctl connect
  std::string node_name;    // resolved: --node-name, else the host name
  uint32_t sq_entries = 0;
  uint32_t cq_entries = 0;
  uint64_t max_pool_bytes = 0;       // largest client pool mapped
  uint64_t weight_store_bytes = 0;   // the weight store's cap
  uint32_t weight_versions = 0;      // complete versions kept per model
  unsigned weight_copy_workers = 0;  // threads besides the copier's own for large copies
  // Multi-node: peer daemons connect here ("ip:port"); empty: single node only.
  std::string peer_listen;
  std::string cluster_secret_file;  // empty: peers need no proof
  PeerServer::Settings peers;
  std::chrono::milliseconds connect_timeout{0};  // a new comm's data connections
  // Telemetry as the daemon runs it (for plexusctl and the slow-path rule).
  bool telemetry = false;
  uint32_t telemetry_window_us = 0;
  uint32_t stall_ms = 0;  // reported to plexusctl ops
  double slow_path_ratio = 0;
  std::string admin_group;  // empty: root and plexusd's own user only
  bool fault_injection = false;
  uint32_t idle_exit_s = 0;  // 0: never; else on_idle runs after this long with no connection
  std::function<void()> on_idle;
  // Any thread (the daemon's wiring): re-reads the config and applies it (null: nothing
  // to read again, e.g. a daemon embedded in plexus-bench), and the settings in use.
  std::function<ConfigReloadReport()> reload;
  std::function<ConfigShown()> show_config;
  // A line on how the daemon is doing, every kStatusIntervalMs and when a drain ends
  // (systemd's STATUS=; null: none).
  std::function<void(const std::string&)> on_status;
};

}  // namespace plexus::daemon
