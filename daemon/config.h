// plexusd settings: defaults (each written once, here; plexusd --help shows most), then the
// config file, then command-line flags (declared in config_options.cc). Each component gets
// its slice at construction (engine_config, control_config); none reads this struct.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/switch.h"
#include "daemon/control/control_config.h"
#include "daemon/engine/engine_config.h"
#include "daemon/jobs_table.h"
#include "daemon/peers/data_transport.h"
#include "transports/channel/reliable_channel.h"
#include "transports/rdma/rdma_path.h"

namespace plexus::daemon {

// The reliable channel's own defaults, in milliseconds, for the flags that set them.
inline uint32_t channel_default_ms(
    std::chrono::milliseconds transports::ReliableChannel::Settings::*field) {
  return static_cast<uint32_t>((transports::ReliableChannel::Settings{}.*field).count());
}

struct Config {
  std::string socket_path;  // empty: default_socket_path()
  uint32_t workers = 0;     // reduction threads besides the engine; 0 = hardware cores - 1
  size_t parallel_threshold_bytes = 256 * 1024;  // smaller ops run on the engine thread alone
  // A bulk or background job's op within the node runs in slices of about this much work,
  // and the engine takes latency-class jobs' ops between them: ~1 ms of reduction on one
  // core, so a latency op waits at most that long behind a large one. 0: never cut.
  size_t local_slice_bytes = 4 << 20;
  // Multi-node communicators plan for their nodes' measured bandwidths (the speed agreement:
  // docs/architecture.md): a node below this fraction of the median node's is slow, and
  // allreduces and allgathers may then take the offload schedule
  // (SpeedAgreement::Settings::alike_above; a slow node is alike again only higher,
  // recovered_above). 0: this daemon proposes no change for the communicators it leads
  // (node 0); it still follows the changes of the others' leaders.
  double slow_node_below = 0.75;
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
  // The weight store (plexus_weights_*): host memory every model's versions may hold together
  // (a publish past it is refused, naming what to change), and the complete versions kept per
  // model (two: a pull copying out of one while the next is published). Memory is taken only
  // as versions are published.
  uint64_t weight_store_bytes = 8ull << 30;
  uint32_t weight_versions = 2;
  IdleConfig engine_idle;
  std::string log_level = "info";

  // Multi-node: peer daemons connect here ("ip:port"; empty: this daemon serves only
  // communicators whose ranks are all on this node).
  std::string peer_listen;
  std::string node_name;            // in messages and peers' logs; empty: the host name
  std::string cluster_secret_file;  // peers must prove they hold its bytes; empty: none
  // To open a data connection to another node, on first use: what waits for it waits this long
  // at most, then the communicators that need it fail naming the node and the error. A connect
  // that times out or whose handshake does not finish is dialled again (jittered backoff) until
  // then; handshakes get half of it, at least 5 s.
  uint32_t connect_timeout_ms = 10000;
  std::string tcp_congestion;  // for connections to peers; empty: the host's default
  // Beside each rail a second data connection that carries only the latency class's frames,
  // with socket priority 6 and DSCP latency_dscp: one TCP stream per class, so that a
  // latency frame never waits in the kernel's or the switches' queues behind bulk bytes
  // that a single stream would put ahead of it. Costs one more socket per rail per peer in
  // use. auto: on when the configuration names a latency-class job (a job made latency at
  // run time shares its peers' connections with bulk data, scheduled first still); off:
  // every class shares one connection per rail.
  common::OnOffAuto latency_connections = common::OnOffAuto::kAuto;
  // AF41 (RFC 4594's low-latency data class): apart from RoCE's usual 26 and its CNPs' 48.
  uint32_t latency_dscp = 34;
  // What carries data connections to peers (daemon/peers/data_transport.h): auto is RDMA
  // where both ends' NICs have a verbs device, TCP otherwise.
  DataTransport transport = DataTransport::kAuto;
  // RDMA paths send payloads at least this large straight from the client's pool; smaller
  // ones are copied into the path's registered buffer (0: every one is copied).
  uint64_t rdma_zero_copy_min_bytes = transports::rdma::RdmaSettings{}.zero_copy_min_bytes;
  // Everything RDMA pins on this node, whatever the number of peers: every path's rings and
  // the registered pool windows (transports/rdma/pinned_budget.h). A path that would pass it
  // goes over TCP instead (--transport rdma: the connection is refused, naming it).
  uint64_t rdma_pinned_max_bytes = transports::rdma::RdmaSettings{}.pinned_max_bytes;
  std::vector<std::string> nics;     // peers are reached over these; empty: every NIC
  uint32_t reconnect_max_ms = 2000;  // longest wait between attempts to reconnect a path
  // The peer listener's queue of connections not yet accepted: a new communicator's members
  // all connect to its root (and its speed leader) at about the same moment, and a SYN that
  // finds it full waits a second to be resent. The kernel caps it at net.core.somaxconn (4096 by
  // default since Linux 5.4).
  uint32_t peer_backlog = 4096;
  // A control message to a peer daemon unacknowledged this long moves to a new control
  // connection over another address. Longer than a data path's timeout: the peer's control
  // thread, not its kernel, acknowledges, and a false alarm costs a reconnect.
  uint32_t control_ack_timeout_ms = 1000;
  // The reliable channel to each peer (transports/channel/reliable_channel.h): on, off (no
  // sequence numbers or acknowledgements: a failed path loses the peer), or auto: on when
  // the daemon serves peers over two or more NICs.
  common::OnOffAuto channel_acks = common::OnOffAuto::kAuto;
  uint32_t path_timeout_ms =
      channel_default_ms(&transports::ReliableChannel::Settings::path_timeout);
  uint32_t heartbeat_ms =
      channel_default_ms(&transports::ReliableChannel::Settings::heartbeat_interval);
  // A path with no traffic for a second heartbeats this often instead, and its peer allows
  // that much more silence (each heartbeat promises its interval: path_liveness.h): an idle
  // peer costs a frame a second each way, not twenty. A second: a dead idle path is still
  // found within about 1.2 s, and once it carries anything within --path-timeout-ms.
  uint32_t idle_heartbeat_ms =
      channel_default_ms(&transports::ReliableChannel::Settings::idle_heartbeat_interval);
  uint32_t failback_stable_ms =
      channel_default_ms(&transports::ReliableChannel::Settings::stable_after);
  uint32_t peer_grace_ms =
      channel_default_ms(&transports::ReliableChannel::Settings::last_path_grace);
  // Idle links close their paths by agreement and reopen on their next use (PeerLinks:
  // an idle peer then costs no descriptor or socket buffer): after this long quiet, and,
  // past this many links with paths, the least recently busy quiet ones at once. Control
  // connections quiet this long close too (ControlChannels).
  uint32_t link_idle_close_ms = static_cast<uint32_t>(PeerLinks::Retirement{}.idle_close.count());
  uint32_t max_open_links = static_cast<uint32_t>(PeerLinks::Retirement{}.max_open);

  // Jobs sharing the links (transports/channel/send_scheduler.h): each job's class and
  // weight (the config's [jobs.NAME] tables, --job), the floors of the lower classes, and
  // how long a frame of a higher class may wait behind others on a path.
  JobsTable jobs;
  uint32_t bulk_floor_percent =
      static_cast<uint32_t>(transports::SendScheduler::Settings{}.floor[1] * 100 + 0.5);
  uint32_t background_floor_percent =
      static_cast<uint32_t>(transports::SendScheduler::Settings{}.floor[2] * 100 + 0.5);
  uint32_t path_queue_us =
      static_cast<uint32_t>(transports::ReliableChannel::Settings{}.path_queue_time.count());

  // Windowed telemetry per path and NIC (monitor/window_ring.h).
  common::OnOff telemetry = common::OnOff::kOn;
  uint32_t telemetry_window_us = 1000;
  uint32_t telemetry_history_s = 10;  // kept in memory, cut to kMaxTelemetryWindows windows

  // Events and anomaly rules (monitor/).
  std::string events_file;       // events appended here as JSON lines; empty: memory only
  uint32_t stall_ms = 1000;      // a collective with no progress this long is reported
  uint32_t rank_skew_ms = 10;    // a rank this late, op after op, is reported
  double slow_path_ratio = 0.1;  // a path under this share of its siblings' median

  // Exit after this many seconds with no client or admin connection (0: never). What a
  // daemon started by libplexus itself runs with (PLEXUS_AUTOSTART), so that it goes away
  // once the jobs that needed it have.
  uint32_t idle_exit_s = 0;
  std::string admin_group;  // its members may run admin commands too (admin_access.h)
  // Admins may inject faults into paths (plexusctl nic fault): for tests and drills, never
  // on by default.
  bool fault_injection = false;

  // The Prometheus exporter, and where it serves /metrics.
  common::OnOff metrics = common::OnOff::kOn;
  std::string metrics_listen = "127.0.0.1:9355";
};

// This node's name in messages, events and to peers: --node-name, else the host name.
std::string effective_node_name(const Config& config);

// --latency-connections with auto decided: on when a configured job is of the latency class.
bool wants_latency_connections(const Config& config);

// Windows kept per path and per NIC at most (about 170 bytes each).
inline constexpr size_t kMaxTelemetryWindows = 20000;

// The components' slices, with the node name resolved (effective_node_name); the socket
// path is as given (the Daemon resolves an empty one). `channel_acks` is --channel-acks with
// auto decided.
EngineConfig engine_config(const Config& config, bool channel_acks);
// `peer_nics`: find_peer_nics for --peer-listen and --nics (none without --peer-listen).
ControlConfig control_config(const Config& config, std::vector<PeerNic> peer_nics);

}  // namespace plexus::daemon
