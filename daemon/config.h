// plexusd settings: defaults, then the config file, then command-line flags.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <unistd.h>

#include "shm/idle_strategy.h"

namespace plexus::daemon {

struct IdleConfig {
  // Busy-poll this long after the last work, then sched_yield() between polls this
  // long, then sleep on eventfds.
  shm::IdleSettings phases{shm::default_spin_us(), 2000};
  uint32_t park_timeout_ms = 100;  // longest sleep (bounded, to re-check state)
};

struct Config {
  std::string socket_path;  // empty: default_socket_path()
  uint32_t workers = 0;     // reduction threads besides the engine; 0 = hardware cores - 1
  size_t parallel_threshold_bytes = 256 * 1024;  // smaller ops run on the engine thread alone
  uint32_t sq_entries = 256;
  uint32_t cq_entries = 256;
  uint64_t max_pool_bytes = 64ull << 30;  // largest client pool the daemon maps
  // Host memory the staging copies of one process's GPU ops in flight may hold together:
  // an op past it is refused, so one client cannot take the node's memory.
  uint64_t max_gpu_staging_bytes = 16ull << 30;
  // An allreduce within the node whose every rank's buffers are on GPUs, of at least this
  // many bytes per rank, is reduced by the daemon's own kernel on the GPU (it uses SMs of
  // that GPU, none of the clients' processes) instead of through host memory. 0: never.
  uint64_t gpu_reduce_kernel_bytes = 0;
  IdleConfig engine_idle;
  std::string log_level = "info";

  // Multi-node: peer daemons connect here ("ip:port"; empty: this daemon serves only
  // communicators whose ranks are all on this node).
  std::string peer_listen;
  std::string node_name;                // in messages and peers' logs; empty: the host name
  std::string cluster_secret_file;      // peers must prove they hold its bytes; empty: none
  uint32_t connect_timeout_ms = 10000;  // to open the data connections a communicator needs
  std::string tcp_congestion;           // for connections to peers; empty: the host's default
  std::vector<std::string> nics;        // peers are reached over these; empty: every NIC
  uint32_t reconnect_max_ms = 2000;     // longest wait between attempts to reconnect a path
  // The reliable channel to each peer (transports/channel/reliable_channel.h).
  // "on", "off" (no sequence numbers or acknowledgements: a failed path loses the peer), or
  // "auto": on when the daemon serves peers over two or more NICs.
  std::string channel_acks = "auto";
  uint32_t path_timeout_ms = 200;     // a path silent this long has failed
  uint32_t heartbeat_ms = 50;         // an idle path sends a heartbeat this often
  uint32_t failback_stable_ms = 500;  // a returning path's probation
  uint32_t peer_grace_ms = 2000;      // the last path to a peer: silence allowed before it fails

  // Windowed telemetry per path and NIC (monitor/window_ring.h): "on" or "off".
  std::string telemetry = "on";
  uint32_t telemetry_window_us = 1000;
  uint32_t telemetry_history_s = 10;  // kept in memory, cut to kMaxTelemetryWindows windows

  // Events and anomaly rules (monitor/).
  std::string events_file;       // events appended here as JSON lines; empty: memory only
  uint32_t stall_ms = 1000;      // a collective with no progress this long is reported
  uint32_t rank_skew_ms = 10;    // a rank this late, op after op, is reported
  double slow_path_ratio = 0.1;  // a path under this share of its siblings' median

  std::string admin_group;  // its members may run admin commands too (admin_access.h)

  // The Prometheus exporter: "on" or "off", and where it serves /metrics.
  std::string metrics = "on";
  std::string metrics_listen = "127.0.0.1:9355";
};

// This node's name in messages, events and to peers: --node-name, else the host name.
inline std::string effective_node_name(const Config& config) {
  if (!config.node_name.empty()) return config.node_name;
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// Windows kept per path and per NIC at most (about 170 bytes each).
inline constexpr size_t kMaxTelemetryWindows = 20000;

inline size_t telemetry_windows(const Config& config) {
  const uint64_t wanted =
      uint64_t{config.telemetry_history_s} * 1000000 / std::max(config.telemetry_window_us, 1u) + 1;
  return static_cast<size_t>(std::clamp<uint64_t>(wanted, 2, kMaxTelemetryWindows));
}

}  // namespace plexus::daemon
