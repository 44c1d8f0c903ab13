// plexusd: the per-node collective-communication service.
#include <signal.h>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <thread>

#include "daemon/daemon.h"
#include "daemon/service_notify.h"
#include "shm/framing.h"
#include "shm/ring_layout.h"

int main(int argc, char** argv) {
  plexus::daemon::Config config;
  CLI::App app{
      "plexusd: per-node collective-communication service.\n"
      "Serves collectives for the rank processes on this node through shared-memory "
      "rings; libplexus clients find it on its unix socket. With --peer-listen it runs "
      "communicators across nodes together with the other nodes' plexusd."};
  app.set_config("--config", "", "Read options from this TOML/INI file (flags override it)");
  // The on/off/auto settings are read as words (CLI11 shows and checks those) and typed after
  // parsing; their defaults are the config's.
  std::string channel_acks(plexus::common::switch_name(config.channel_acks));
  std::string transport(plexus::daemon::data_transport_name(config.transport));
  std::string telemetry(plexus::common::switch_name(config.telemetry));
  std::string metrics(plexus::common::switch_name(config.metrics));
  app.add_option("--socket", config.socket_path,
                 "Control socket path (default: $PLEXUS_SOCKET, else " +
                     std::string("/run/plexus/plexusd.sock as root, else ") +
                     "$XDG_RUNTIME_DIR/plexus/plexusd.sock, else /tmp/plexus-<uid>/plexusd.sock)");
  app.add_option("--workers", config.workers,
                 "Reduction threads besides the engine thread (0 = cores - 1)");
  app.add_option("--parallel-threshold", config.parallel_threshold_bytes,
                 "Ops moving fewer bytes run on the engine thread alone")
      ->capture_default_str();
  app.add_option("--local-slice-bytes", config.local_slice_bytes,
                 "A bulk or background job's op within the node runs in slices of about this "
                 "much work, and latency-class jobs' ops are taken between them (0: never cut)")
      ->capture_default_str();
  app.add_option("--slow-node-below", config.slow_node_below,
                 "Multi-node communicators follow their nodes' measured bandwidths: a node "
                 "below this fraction of the median node's is slow, and allreduces and "
                 "allgathers may then take the offload schedule (it is alike again above "
                 "60 % of the way from this to 1; 0: this daemon proposes no change for the "
                 "communicators it leads; it still follows the changes of those it does not)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--sq-entries", config.sq_entries,
                 "Submission ring entries per session (power of 2)")
      ->capture_default_str();
  app.add_option("--cq-entries", config.cq_entries,
                 "Completion ring entries per session (power of 2)")
      ->capture_default_str();
  app.add_option("--max-pool-bytes", config.max_pool_bytes, "Largest client pool accepted")
      ->capture_default_str();
  app.add_option("--max-gpu-staging-bytes", config.max_gpu_staging_bytes,
                 "Host memory the copies of one process's GPU buffers may take while its ops "
                 "are in flight; an op past it is refused with PLEXUS_ERR_NO_MEMORY")
      ->capture_default_str();
  app.add_option("--gpu-reduce-kernel-bytes", config.gpu_reduce_kernel_bytes,
                 "Reduce an allreduce within the node whose ranks' buffers are all on GPUs, of "
                 "at least this many bytes per rank, with plexusd's own kernel on the GPU "
                 "(copy engines and host memory otherwise); 0: never")
      ->capture_default_str();
  app.add_option("--spin-us", config.engine_idle.phases.spin_us,
                 "Idle strategy: busy-poll this long after the last work (default: 50 with 4 or "
                 "more cores, else 0)")
      ->capture_default_str();
  app.add_option("--yield-us", config.engine_idle.phases.yield_us,
                 "Idle strategy: then poll with sched_yield this long, then park on eventfds")
      ->capture_default_str();
  app.add_option("--park-timeout-ms", config.engine_idle.park_timeout_ms,
                 "Longest single park before re-checking")
      ->capture_default_str();
  app.add_option("--peer-listen", config.peer_listen,
                 "Accept peer daemons on IP:PORT (0.0.0.0:7355 for every interface; port 0 picks "
                 "a free one). Without it, communicators must have all their ranks on this node");
  app.add_option("--tcp-congestion", config.tcp_congestion,
                 "TCP congestion control of connections to peer daemons, e.g. cubic, bbr, dctcp "
                 "(default: the host's net.ipv4.tcp_congestion_control); plexusd refuses to "
                 "start with one this kernel lacks");
  app.add_option("--transport", transport,
                 "What carries data connections to peer daemons: tcp; rdma (an RC queue pair on "
                 "the verbs port of the NIC each connection is set up over; a connection whose "
                 "NIC or peer has none is refused, naming it); auto: RDMA where both ends' "
                 "NICs have a verbs device, TCP otherwise. The connection's TCP socket carries "
                 "the setup either way")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "tcp", "rdma"}));
  app.add_option("--rdma-zero-copy-min-bytes", config.rdma_zero_copy_min_bytes,
                 "Over RDMA, a payload of at least this many bytes in a client's pool is sent "
                 "straight from it (each 16 MiB window of the pool registered once, pinned); "
                 "smaller ones, and data outside the pools, are copied into the path's "
                 "registered buffer first. 0: copy every payload")
      ->capture_default_str();
  app.add_option("--path-timeout-ms", config.path_timeout_ms,
                 "A path to a peer daemon that has carried nothing (not even a heartbeat) this "
                 "long, while its TCP connection has not heard the peer's kernel either, has "
                 "failed; with channel acks its unacknowledged frames go again on the others")
      ->check(CLI::Range(10u, 60000u));
  app.add_option("--heartbeat-ms", config.heartbeat_ms,
                 "An idle path sends a heartbeat this often (keep it well under --path-timeout-ms)")
      ->check(CLI::Range(1u, 10000u));
  app.add_option("--failback-stable-ms", config.failback_stable_ms,
                 "A path that comes back carries data again after it has been live this long");
  app.add_option(
         "--peer-grace-ms", config.peer_grace_ms,
         "A peer daemon with no live path left (its NICs down, or silent) is kept this long "
         "for one to come back before the ops that need it fail naming it (its frames wait); "
         "the last path is failed for silence only after this long. A peer that closed its "
         "connections (its daemon stopped) is lost at once")
      ->check(CLI::Range(10u, 600000u));
  app.add_option("--channel-acks", channel_acks,
                 "on: number every frame to a peer daemon and keep it until the peer "
                 "acknowledges it (the reliable channel that NIC failover needs); off: a failed "
                 "path loses the peer's ops; auto: on with two or more NICs (its cost on "
                 "CPU-bound nodes: docs/BENCHMARKS.md)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_option("--telemetry", telemetry,
                 "Windowed telemetry of every path to a peer daemon and every NIC: data bytes "
                 "and chunks each way, resent bytes, failures, and chunk latency (send to "
                 "acknowledgement, with channel acks), recorded without locks")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--telemetry-window-us", config.telemetry_window_us, "Telemetry window width")
      ->capture_default_str()
      ->check(CLI::Range(100u, 1000000u));
  app.add_option("--telemetry-history-s", config.telemetry_history_s,
                 "Seconds of telemetry windows kept in memory per path and NIC (at most " +
                     std::to_string(plexus::daemon::kMaxTelemetryWindows) +
                     " windows: narrower windows keep less time)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 3600u));
  app.add_option("--events-file", config.events_file,
                 "Append events (stalled ops, slow paths, rank skew, failed paths, lost peers) "
                 "here as JSON lines; plexusctl events shows the last 1024 either way");
  app.add_option("--stall-ms", config.stall_ms,
                 "A collective that makes no progress this long (no rank submits, no data "
                 "arrives) is reported as stalled, naming the rank or node it waits for")
      ->capture_default_str()
      ->check(CLI::Range(100u, 3600000u));
  app.add_option("--rank-skew-ms", config.rank_skew_ms,
                 "A rank that submits last, this long after the first, in 12 of the last 16 "
                 "collectives of a communicator is reported (with --telemetry on)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 600000u));
  app.add_option("--slow-path-ratio", config.slow_path_ratio,
                 "A path to a peer daemon is reported as slow (with --telemetry on) when, in "
                 "three looks in a row (250 ms apart), its throughput (the "
                 "kernel's delivery rate) is under this share of the median of its busy sibling "
                 "paths to the same peer (one per rail; busy: sent in the last second, or has "
                 "bytes queued)")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 0.99));
  app.add_option("--admin-group", config.admin_group,
                 "Members of this group (primary or supplementary) may run admin commands "
                 "(plexusctl nic drain|undrain|fault) besides root and plexusd's own user; every "
                 "other plexusctl command is read-only and open to all local users");
  app.add_flag("--fault-injection", config.fault_injection,
               "Let admins inject faults into the paths over a NIC (plexusctl nic fault: an RDMA "
               "queue pair forced into the error state), for tests and failover drills");
  app.add_option("--idle-exit-s", config.idle_exit_s,
                 "Exit after this many seconds with no client or plexusctl connected (0: never; "
                 "what a daemon started by libplexus itself runs with)")
      ->capture_default_str();
  app.add_option("--metrics", metrics,
                 "Serve Prometheus metrics (plexus_*) over HTTP at --metrics-listen")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--metrics-listen", config.metrics_listen,
                 "Where /metrics is served: IP:PORT (port 0 picks a free one, logged at start)")
      ->capture_default_str();
  std::string nics_text;
  app.add_option("--nics", nics_text,
                 "Reach peer daemons over these interfaces, comma-separated (default: every "
                 "non-loopback interface with an IPv4 address, with --peer-listen 0.0.0.0:PORT). "
                 "Each is a rail: one data connection per peer NIC in its subnet, and with two "
                 "or more a backup from each NIC to the peer's next rail where a route joins "
                 "the rails");
  app.add_option("--reconnect-max-ms", config.reconnect_max_ms,
                 "A failed path to a peer is reconnected after 100 ms, then waits doubling up to "
                 "this long between attempts")
      ->capture_default_str()
      ->check(CLI::Range(100u, 600000u));
  app.add_option("--control-timeout-ms", config.control_ack_timeout_ms,
                 "A control message to a peer daemon (communicator set-up) unacknowledged this "
                 "long moves, with every other unacknowledged one, to a new control connection "
                 "over another of the peer's addresses; a data path failing over the same NIC "
                 "moves them at once")
      ->capture_default_str()
      ->check(CLI::Range(50u, 600000u));
  app.add_option("--node-name", config.node_name,
                 "This node's name in errors and in peers' logs (default: the host name)");
  app.add_option("--cluster-secret-file", config.cluster_secret_file,
                 "Peers must prove (HMAC-SHA256 challenge) that they hold this file's bytes; mode "
                 "0600, at least 16 bytes. Without it any host reaching --peer-listen may join")
      ->check(CLI::ExistingFile);
  app.add_option("--connect-timeout-ms", config.connect_timeout_ms,
                 "How long a new communicator may wait for its data connections to other nodes")
      ->capture_default_str();
  std::vector<std::string> job_options;
  app.add_option("--job", job_options,
                 "A job's scheduling policy, NAME=CLASS[:WEIGHT] (latency, bulk or background; "
                 "weight 1..1000, default 1); repeatable; the config file's [jobs.NAME] tables "
                 "(class = ..., weight = ...) do the same, and set its caps on this node "
                 "(max_inflight_bytes = ..., max_staging_bytes = ...)");
  app.add_option("--bulk-floor-percent", config.bulk_floor_percent,
                 "Share of a link that bulk jobs get at least while latency jobs keep it busy")
      ->capture_default_str()
      ->check(CLI::Range(0, 90));
  app.add_option("--background-floor-percent", config.background_floor_percent,
                 "Share of a link that background jobs get at least while others keep it busy")
      ->capture_default_str()
      ->check(CLI::Range(0, 90));
  app.add_option("--path-queue-us", config.path_queue_us,
                 "How long a frame may wait behind others once given to a path: a path's "
                 "transport holds this much of its measured rate unsent (and, while several "
                 "jobs send to a peer, about this much beyond a round trip unacknowledged: "
                 "TCP, at least 64 KiB), and frames are cut to about this much")
      ->capture_default_str()
      ->check(CLI::Range(50, 100000));
  app.add_option("--log-level", config.log_level, "trace, debug, info, warn, error")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  CLI11_PARSE(app, argc, argv);
  if (const std::string file = app["--config"]->as<std::string>(); !file.empty()) {
    std::vector<plexus::daemon::JobsTableEntry> entries;
    try {
      for (const CLI::ConfigItem& item : CLI::ConfigTOML().from_file(file)) {
        entries.push_back(
            {item.parents, item.name, item.inputs.empty() ? std::string() : item.inputs.front()});
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "plexusd: %s: %s\n", file.c_str(), e.what());
      return 1;
    }
    if (std::string error = plexus::daemon::read_jobs_table(entries, &config.jobs);
        !error.empty()) {
      std::fprintf(stderr, "plexusd: %s: %s\n", file.c_str(), error.c_str());
      return 1;
    }
  }
  for (const std::string& option : job_options) {
    if (std::string error = plexus::daemon::parse_job_option(option, &config.jobs);
        !error.empty()) {
      std::fprintf(stderr, "plexusd: %s\n", error.c_str());
      return 1;
    }
  }
  config.channel_acks = plexus::common::on_off_auto_words().at(channel_acks);
  config.transport = plexus::daemon::data_transport_words().at(transport);
  config.telemetry = plexus::common::on_off_words().at(telemetry);
  config.metrics = plexus::common::on_off_words().at(metrics);
  // Split here: CLI11's own delimiter splitting trips GCC 12's -Wnull-dereference.
  for (size_t start = 0; start < nics_text.size();) {
    const size_t comma = std::min(nics_text.find(',', start), nics_text.size());
    if (comma > start) config.nics.push_back(nics_text.substr(start, comma - start));
    start = comma + 1;
  }
  for (auto [name, entries] : {std::pair{"--sq-entries", config.sq_entries},
                               std::pair{"--cq-entries", config.cq_entries}}) {
    if (!plexus::shm::is_power_of_two(entries) || entries > 65536) {
      std::fprintf(stderr, "plexusd: %s %u must be a power of two up to 65536\n", name, entries);
      return 1;
    }
  }

  spdlog::set_level(spdlog::level::from_str(config.log_level));
  // Signals are taken by a dedicated thread with sigwait, so every other thread
  // blocks them (set before any thread starts).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  // Before the daemon: it outlives the engine thread that pings through it.
  const plexus::daemon::ServiceNotify notify;
  plexus::daemon::Daemon daemon(config);
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
  std::thread signal_thread([&] {
    int signal_number = 0;
    sigwait(&signals, &signal_number);
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
