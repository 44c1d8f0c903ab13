// The engine's slice of plexusd's configuration. daemon/config.h holds every setting with
// its default (its flag is declared in daemon/config_options.cc) and builds this slice at
// start-up: nothing here restates a default.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "daemon/engine/job_settings.h"
#include "daemon/links/peer_links.h"
#include "shm/idle_strategy.h"
#include "transports/channel/reliable_channel.h"

namespace plexus::daemon {

struct IdleConfig {
  // Busy-poll this long after the last work, then sched_yield() between polls this
  // long, then sleep on eventfds.
  shm::IdleSettings phases{shm::default_spin_us(), 2000};
  uint32_t park_timeout_ms = 100;  // longest sleep (bounded, to re-check state)
};

struct EngineConfig {
  std::string node_name;                 // in events and reports
  unsigned workers = 0;                  // reduction threads besides the engine's own
  size_t parallel_threshold_bytes = 0;   // smaller ops run on the engine thread alone
  size_t local_slice_bytes = 0;          // LocalExecutor's slices of bulk work (0: none)
  double slow_node_below = 0;            // SpeedAgreement::Settings::alike_above (0: off)
  uint64_t max_gpu_staging_bytes = 0;    // per process (Session::staging_bytes)
  uint64_t gpu_reduce_kernel_bytes = 0;  // 0: never the daemon's own kernel
  IdleConfig idle;
  // The reliable channel to each peer; `reliable` as the daemon decided it.
  transports::ReliableChannel::Settings channel;
  PeerLinks::Retirement retirement;  // when idle links close their paths
  bool follow_nics = false;          // multi-node: fail paths as their NICs go down (netlink)
  // Windowed telemetry per path and NIC, op timing and the rank-skew rule.
  bool telemetry = false;
  std::chrono::microseconds telemetry_window{0};
  size_t telemetry_windows = 0;            // per NIC
  size_t telemetry_path_windows = 0;       // per path with traffic
  std::chrono::milliseconds stall{0};      // the op watch's threshold
  std::chrono::milliseconds rank_skew{0};  // the rank-skew rule's threshold
  // Jobs' scheduling policies and caps by name (the config's jobs table); others get the defaults.
  JobsTable jobs;
};

}  // namespace plexus::daemon
