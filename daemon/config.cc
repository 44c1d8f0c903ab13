#include "daemon/config.h"

#include <unistd.h>

#include <algorithm>
#include <thread>

#include "daemon/links/node_links.h"
#include "transports/rdma/pinned_budget.h"
#include "transports/wire/data_frame.h"

namespace plexus::daemon {

std::string effective_node_name(const Config& config) {
  if (!config.node_name.empty()) return config.node_name;
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

bool wants_latency_connections(const Config& config) {
  if (config.latency_connections != common::OnOffAuto::kAuto) {
    return config.latency_connections == common::OnOffAuto::kOn;
  }
  return std::any_of(config.jobs.begin(), config.jobs.end(), [](const auto& job) {
    return job.second.policy.traffic_class == transports::TrafficClass::kLatency;
  });
}

namespace {

// --telemetry-history-s in windows of --telemetry-window-us, at most kMaxTelemetryWindows.
size_t telemetry_windows(const Config& config) {
  const uint64_t wanted =
      uint64_t{config.telemetry_history_s} * 1000000 / std::max(config.telemetry_window_us, 1u) + 1;
  return static_cast<size_t>(std::clamp<uint64_t>(wanted, 2, kMaxTelemetryWindows));
}

// A path's windows: what its readers look at (plexusctl's last second, the slow-path rule's
// AdminService::kSlowPathSpan), not the NIC's history: a path to each of a thousand peers
// would hold a NIC's ten seconds each (1.6 MiB at 1 ms windows), even while idle.
constexpr uint64_t kPathTelemetryUs = 1000000;
size_t path_telemetry_windows(const Config& config) {
  const uint64_t wanted = kPathTelemetryUs / std::max(config.telemetry_window_us, 1u) + 2;
  return static_cast<size_t>(std::min<uint64_t>(wanted, telemetry_windows(config)));
}

}  // namespace

EngineConfig engine_config(const Config& config, bool channel_acks) {
  EngineConfig e;
  e.node_name = effective_node_name(config);
  if (config.workers > 0) {
    e.workers = config.workers;
  } else {
    const unsigned hw = std::thread::hardware_concurrency();
    e.workers = hw > 1 ? hw - 1 : 0;
  }
  e.parallel_threshold_bytes = config.parallel_threshold_bytes;
  e.local_slice_bytes = config.local_slice_bytes;
  e.slow_node_below = config.slow_node_below;
  e.max_gpu_staging_bytes = config.max_gpu_staging_bytes;
  e.gpu_reduce_kernel_bytes = config.gpu_reduce_kernel_bytes;
  e.idle = config.engine_idle;
  e.channel.reliable = channel_acks;
  e.channel.path_timeout = std::chrono::milliseconds(config.path_timeout_ms);
  e.channel.heartbeat_interval = std::chrono::milliseconds(config.heartbeat_ms);
  e.channel.idle_heartbeat_interval = std::chrono::milliseconds(config.idle_heartbeat_ms);
  // Not over RDMA yet: with idle paths backing off, failover between soft-RoCE VMs failed
  // in 2 of 4 runs of rdma_cluster (a backup or a returning path found silent), against
  // none without; until that is understood RDMA paths keep the short interval.
  if (config.transport == DataTransport::kRdma) {
    e.channel.idle_heartbeat_interval = e.channel.heartbeat_interval;
  }
  e.channel.stable_after = std::chrono::milliseconds(config.failback_stable_ms);
  e.channel.last_path_grace = std::chrono::milliseconds(config.peer_grace_ms);
  e.retirement.idle_close = std::chrono::milliseconds(config.link_idle_close_ms);
  e.retirement.max_open = config.max_open_links;
  e.retirement.reopen_within = std::chrono::milliseconds(config.connect_timeout_ms);
  e.channel.path_queue_time = std::chrono::microseconds(config.path_queue_us);
  // A held path is looked at again before a quarter of its queue can drain.
  e.channel.held_path_retry = std::min(e.channel.held_path_retry, e.channel.path_queue_time / 4);
  e.channel.scheduling.floor[1] = config.bulk_floor_percent / 100.0;
  e.channel.scheduling.floor[2] = config.background_floor_percent / 100.0;
  e.jobs = config.jobs;
  e.follow_nics = !config.peer_listen.empty();
  e.telemetry = config.telemetry == common::OnOff::kOn;
  e.telemetry_window = std::chrono::microseconds(config.telemetry_window_us);
  e.telemetry_windows = telemetry_windows(config);
  e.telemetry_path_windows = path_telemetry_windows(config);
  e.stall = std::chrono::milliseconds(config.stall_ms);
  e.rank_skew = std::chrono::milliseconds(config.rank_skew_ms);
  return e;
}

ControlConfig control_config(const Config& config, std::vector<PeerNic> peer_nics) {
  ControlConfig c;
  c.socket_path = config.socket_path;
  c.node_name = effective_node_name(config);
  c.sq_entries = config.sq_entries;
  c.cq_entries = config.cq_entries;
  c.max_pool_bytes = config.max_pool_bytes;
  c.weight_store_bytes = config.weight_store_bytes;
  c.weight_versions = config.weight_versions;
  // A copy in or out of the store is bound by memory bandwidth, which a few threads fill.
  c.weight_copy_workers = std::min(engine_config(config, false).workers, 3u);
  c.peer_listen = config.peer_listen;
  c.cluster_secret_file = config.cluster_secret_file;
  c.peers.tcp_congestion = config.tcp_congestion;
  c.peers.latency_connections = wants_latency_connections(config);
  c.peers.latency_dscp = config.latency_dscp;
  c.peers.nics = std::move(peer_nics);
  c.peers.reconnect_max = std::chrono::milliseconds(config.reconnect_max_ms);
  c.peers.control_ack_timeout = std::chrono::milliseconds(config.control_ack_timeout_ms);
  c.peers.control_grace = std::chrono::milliseconds(config.peer_grace_ms);
  c.peers.control_idle_close = std::chrono::milliseconds(config.link_idle_close_ms);
  c.peers.transport = config.transport;
  c.peers.rdma.zero_copy_min_bytes = config.rdma_zero_copy_min_bytes;
  c.peers.rdma.pinned_max_bytes = config.rdma_pinned_max_bytes;
  // Each path's rings from that bound, shared by every path the link cap allows (a path per
  // NIC, two with the latency class's connections; backups across rails are not counted):
  // 16 MiB each at the defaults with one NIC; a smaller bound gives smaller rings before it
  // gives fewer RDMA paths. No cap (0) is sized as the default cap.
  const uint32_t links =
      config.max_open_links == 0 ? PeerLinks::Retirement{}.max_open : config.max_open_links;
  const uint64_t paths = uint64_t{links} * std::max<size_t>(c.peers.nics.size(), 1) *
                         (c.peers.latency_connections ? 2 : 1);
  transports::rdma::RdmaSettings rings_only = c.peers.rdma;
  rings_only.ring_bytes = rings_only.bounce_bytes = 0;
  c.peers.rdma.ring_bytes = c.peers.rdma.bounce_bytes = transports::rdma::ring_bytes_within(
      config.rdma_pinned_max_bytes, paths, transports::rdma::path_pinned_bytes(rings_only),
      transports::wire::kDataFrameHeaderBytes + NodeLinks::kDefaultChunkBytes,
      transports::rdma::RdmaSettings{}.ring_bytes);
  c.connect_timeout = std::chrono::milliseconds(config.connect_timeout_ms);
  c.peers.backlog = static_cast<int>(config.peer_backlog);
  // Half the time to form, at least 5 s: a handshake outlasting that is retried within it.
  c.peers.handshake_timeout = std::max(std::chrono::milliseconds(5000),
                                       std::chrono::milliseconds(config.connect_timeout_ms / 2));
  c.telemetry = config.telemetry == common::OnOff::kOn;
  c.telemetry_window_us = config.telemetry_window_us;
  c.stall_ms = config.stall_ms;
  c.slow_path_ratio = config.slow_path_ratio;
  c.admin_group = config.admin_group;
  c.fault_injection = config.fault_injection;
  c.idle_exit_s = config.idle_exit_s;
  return c;
}

}  // namespace plexus::daemon
