// plexusd's options (daemon/config_options.h). Each option's default is the Config field it
// is bound to: written once, in config.h.
#include "daemon/config_options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "daemon/config_file.h"

namespace plexus::daemon {
namespace {

// The settings read as words or lists on the command line, typed after parsing; each starts
// as the Config's value, so that an App built over a Config shows that Config.
struct Words {
  explicit Words(const Config& config)
      : channel_acks(common::switch_name(config.channel_acks)),
        transport(data_transport_name(config.transport)),
        telemetry(common::switch_name(config.telemetry)),
        latency_connections(common::switch_name(config.latency_connections)),
        metrics(common::switch_name(config.metrics)) {
    for (const std::string& nic : config.nics) nics += (nics.empty() ? "" : ",") + nic;
  }
  std::string channel_acks;
  std::string transport;
  std::string telemetry;
  std::string latency_connections;
  std::string metrics;
  std::string nics;
  std::vector<std::string> jobs;  // --job; a Config's jobs are written as [jobs.NAME] tables
  std::string config_file;
};

// A ring's entries: a power of two up to 65536.
CLI::Validator ring_entries() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        // Base 0, as CLI11 converts it ("016" is 14 to both).
        const unsigned long long n = std::strtoull(text.c_str(), nullptr, 0);
        return n != 0 && n <= 65536 && (n & (n - 1)) == 0
                   ? std::string()
                   : text + " is not a power of two up to 65536";
      },
      "POWER OF 2");
}

// A finite number: CLI::Range lets NaN through (every comparison with it is false).
CLI::Validator finite() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        return std::isfinite(std::strtod(text.c_str(), nullptr)) ? std::string()
                                                                 : text + " is not a finite number";
      },
      "FINITE");
}

void define(CLI::App& app, Config& config, Words& w) {
  app.add_option("--config", w.config_file,
                 "Read options from this TOML file: each option is a key named without its "
                 "dashes (stall-ms = 500), jobs' policies are [jobs.NAME] tables; flags "
                 "override it. Read again on SIGHUP or plexusctl config reload");
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
      ->check(finite())
      ->check(CLI::Range(0.0, 1.0))
      // Not capture_default_str: CLI11 writes six digits, and plexusctl config and a
      // reload's comparison must see the value exactly.
      ->default_str(number_text(config.slow_node_below));
  app.add_option("--sq-entries", config.sq_entries,
                 "Submission ring entries per session (power of 2)")
      ->capture_default_str()
      ->check(ring_entries());
  app.add_option("--cq-entries", config.cq_entries,
                 "Completion ring entries per session (power of 2)")
      ->capture_default_str()
      ->check(ring_entries());
  app.add_option("--max-pool-bytes", config.max_pool_bytes, "Largest client pool accepted")
      ->capture_default_str();
  app.add_option("--max-gpu-staging-bytes", config.max_gpu_staging_bytes,
                 "Host memory the copies of one process's GPU buffers may take while its ops "
                 "are in flight; an op past it is refused with PLEXUS_ERR_NO_MEMORY")
      ->capture_default_str();
  app.add_option("--weight-store-bytes", config.weight_store_bytes,
                 "Host memory the weight store's versions may hold together (all models); a "
                 "publish past it is refused with PLEXUS_ERR_NO_MEMORY")
      ->capture_default_str();
  app.add_option("--weight-versions", config.weight_versions,
                 "Complete versions the weight store keeps per model (the oldest goes as a "
                 "newer one completes)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 64u));
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
  app.add_option("--latency-connections", w.latency_connections,
                 "A second data connection beside each rail for the latency class's frames "
                 "(jobs of class latency), with socket priority 6 and --latency-dscp, so that "
                 "the host's qdisc and the switches queue them apart from bulk data; auto: on "
                 "when the configuration names a latency-class job; off: one connection per "
                 "rail carries every class")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_option("--latency-dscp", config.latency_dscp,
                 "The DSCP of the latency class's connections (bulk ones keep 0); map it to a "
                 "priority queue on the switches (docs/NETWORK.md, \"Job classes on the "
                 "wire\")")
      ->capture_default_str()
      ->check(CLI::Range(0u, 63u));
  app.add_option("--transport", w.transport,
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
  app.add_option("--rdma-pinned-max-bytes", config.rdma_pinned_max_bytes,
                 "Memory RDMA may pin on this node, all peers together: each path's two rings "
                 "and the registered pool windows, which give way to a new path's rings. The "
                 "rings are sized so that --max-open-links paths per NIC fit (16 MiB each at "
                 "most, 1 MiB at least). A data connection whose rings would pass it goes over "
                 "TCP (with --transport rdma it is refused, naming this bound)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1} << 20, std::numeric_limits<uint64_t>::max()));
  app.add_option("--path-timeout-ms", config.path_timeout_ms,
                 "A path to a peer daemon that has carried nothing (not even a heartbeat) this "
                 "long (an idle one: this plus what its peer's --idle-heartbeat-ms adds to "
                 "--heartbeat-ms), while its TCP connection has not heard the peer's kernel "
                 "either, has failed; with channel acks its unacknowledged frames go again on "
                 "the others")
      ->check(CLI::Range(10u, 60000u));
  app.add_option("--heartbeat-ms", config.heartbeat_ms,
                 "A path with nothing to send sends a heartbeat this often (keep it well under "
                 "--path-timeout-ms)")
      ->check(CLI::Range(1u, 10000u));
  app.add_option(
         "--idle-heartbeat-ms", config.idle_heartbeat_ms,
         "A path with no traffic either way for a second sends a heartbeat this often "
         "instead, each heartbeat promising its interval, and its peer allows that much "
         "more silence; not above --heartbeat-ms: no backing off. Not with --transport rdma, "
         "whose paths keep --heartbeat-ms")
      ->capture_default_str()
      ->check(CLI::Range(1u, 60000u));
  app.add_option("--link-idle-close-ms", config.link_idle_close_ms,
                 "A link to a peer daemon whose paths have carried nothing this long (beyond "
                 "the second after which a path counts as idle), with nothing queued or "
                 "unacknowledged, closes them by agreement with the peer and opens one again "
                 "on its next use, losing nothing; a control connection quiet this long "
                 "closes too (reopened by the next message); 0: never for idleness")
      ->capture_default_str()
      ->check(CLI::Range(0u, 86400000u));
  app.add_option("--max-open-links", config.max_open_links,
                 "Past this many peer daemons with open paths, the quiet links close theirs "
                 "at once, least recently busy first (as --link-idle-close-ms); 0: no cap")
      ->capture_default_str();
  app.add_option("--failback-stable-ms", config.failback_stable_ms,
                 "A path that comes back carries data again after it has been live this long");
  app.add_option(
         "--peer-grace-ms", config.peer_grace_ms,
         "A peer daemon with no live path left (its NICs down, or silent) is kept this long "
         "for one to come back before the ops that need it fail naming it (its frames wait); "
         "the last path is failed for silence only after this long. A peer that closed its "
         "connections (its daemon stopped) is lost at once")
      ->check(CLI::Range(10u, 600000u));
  app.add_option("--channel-acks", w.channel_acks,
                 "on: number every frame to a peer daemon and keep it until the peer "
                 "acknowledges it (the reliable channel that NIC failover needs); off: a failed "
                 "path loses the peer's ops; auto: on with two or more NICs (its cost on "
                 "CPU-bound nodes: docs/BENCHMARKS.md)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_option("--telemetry", w.telemetry,
                 "Windowed telemetry of every path to a peer daemon and every NIC: data bytes "
                 "and chunks each way, resent bytes, failures, and chunk latency (send to "
                 "acknowledgement, with channel acks), recorded without locks")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--telemetry-window-us", config.telemetry_window_us, "Telemetry window width")
      ->capture_default_str()
      ->check(CLI::Range(100u, 1000000u));
  app.add_option("--telemetry-history-s", config.telemetry_history_s,
                 "Seconds of telemetry windows kept in memory per NIC (at most " +
                     std::to_string(kMaxTelemetryWindows) +
                     " windows: narrower windows keep less time); a path keeps the last second "
                     "of its own while it has traffic")
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
                 "paths to the same peer (one per rail, latency-class ones left out; busy: sent in "
                 "the last second, or has bytes queued)")
      ->default_str(number_text(config.slow_path_ratio))
      ->check(finite())
      ->check(CLI::Range(0.01, 0.99));
  app.add_option("--admin-group", config.admin_group,
                 "Members of this group (primary or supplementary) may run admin commands "
                 "(plexusctl nic drain|undrain|fault, node drain|undrain, config reload, job "
                 "set, engine hold) besides root and plexusd's own user; every other plexusctl "
                 "command is read-only and open to all local users");
  app.add_flag("--fault-injection", config.fault_injection,
               "Let admins inject faults into the paths over a NIC (plexusctl nic fault: an RDMA "
               "queue pair forced into the error state), for tests and failover drills")
      ->default_str(config.fault_injection ? "true" : "false");
  app.add_option("--idle-exit-s", config.idle_exit_s,
                 "Exit after this many seconds with no client or plexusctl connected, unless the "
                 "weight store holds a version (0: never; what a daemon started by libplexus "
                 "itself runs with)")
      ->capture_default_str();
  app.add_option("--metrics", w.metrics,
                 "Serve Prometheus metrics (plexus_*) over HTTP at --metrics-listen")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--metrics-listen", config.metrics_listen,
                 "Where /metrics is served: IP:PORT (port 0 picks a free one, logged at start)")
      ->capture_default_str();
  app.add_option("--nics", w.nics,
                 "Reach peer daemons over these interfaces, comma-separated (default: every "
                 "non-loopback interface with an IPv4 address, with --peer-listen 0.0.0.0:PORT). "
                 "Each is a rail: one data connection per peer NIC in its subnet (two with "
                 "--latency-connections), and with two or more a backup from each NIC to the "
                 "peer's next rail where a route joins "
                 "the rails");
  app.add_option("--reconnect-max-ms", config.reconnect_max_ms,
                 "A failed path to a peer is reconnected after 100 ms, then waits doubling up to "
                 "this long between attempts (each wait drawn at random from its upper half, so "
                 "that nodes do not all dial again at once)")
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
  app.add_option(
         "--connect-timeout-ms", config.connect_timeout_ms,
         "How long a data connection to another node may take to open; connections open when a "
         "communicator first sends to that node, and what it sends waits meanwhile. A connect "
         "that times out or whose handshake does not finish is dialled again (with backoff) "
         "until then, one refused (no plexusd listens) fails at once. Handshakes get half of "
         "it, at least 5 s")
      ->capture_default_str();
  app.add_option("--peer-backlog", config.peer_backlog,
                 "The peer listener's queue of connections not yet accepted (the kernel caps it "
                 "at net.core.somaxconn, logged at start): room for every node of a new "
                 "communicator connecting to its root at once")
      ->capture_default_str()
      ->check(CLI::Range(16u, 1u << 20));
  app.add_option("--job", w.jobs,
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
}

// Why `e`'s value is of the wrong TOML type for `option` ("" if it is not): a number for an
// option that takes one (a string would reach strtoull, which reads "010" as octal and "-1"
// as the largest value), a whole non-negative one for an unsigned option, true or false for
// a flag.
std::string kind_error(const CLI::Option& option, const ConfigFileEntry& e) {
  const std::string type = option.get_type_name();
  const bool is_unsigned = type.rfind("UINT", 0) == 0;
  const bool is_integer = is_unsigned || type.rfind("INT", 0) == 0;
  const bool is_float = type.rfind("FLOAT", 0) == 0;
  if (option.get_expected_min() == 0) {
    if (e.values.size() != 1 || e.kind != ConfigValueKind::kBoolean) return "takes true or false";
    return {};
  }
  if (is_integer && (e.kind != ConfigValueKind::kInteger ||
                     (is_unsigned && !e.values.empty() && e.values.front().rfind('-', 0) == 0))) {
    return std::string("takes a whole") + (is_unsigned ? " non-negative" : "") +
           " number, written without quotes";
  }
  if (is_float && e.kind != ConfigValueKind::kInteger && e.kind != ConfigValueKind::kFloat)
    return "takes a number, written without quotes";
  return {};
}

// What each file entry at the top names: an option the command line did not set takes the
// file's value, checked as the flag would be.
std::string apply_file(CLI::App& app, const std::string& path,
                       const std::vector<ConfigFileEntry>& entries) {
  std::set<const CLI::Option*> from_flags;
  for (const CLI::Option* option : app.get_options()) {
    if (option->count() > 0) from_flags.insert(option);
  }
  std::map<const CLI::Option*, int> from_file;  // and the line that set it
  for (const ConfigFileEntry& e : entries) {
    if (!e.section.empty()) continue;
    const std::string at = path + ":" + std::to_string(e.line) + ": ";
    std::string name = e.key;
    std::replace(name.begin(), name.end(), '_', '-');
    if (e.values.empty()) return at + name + ": an empty list, where a value belongs";
    if (name == "job") {
      return at +
             "jobs are [jobs.NAME] tables in the file (class = ..., weight = ...), not "
             "job = \"NAME=CLASS\" as with --job";
    }
    CLI::Option* option =
        name == "config" || name == "help" ? nullptr : app.get_option_no_throw("--" + name);
    if (option == nullptr) {
      return at + "unknown key '" + e.key.substr(0, 64) +
             "' (plexusd --help lists the options: each is a key named without its dashes)";
    }
    if (auto first = from_file.find(option); first != from_file.end()) {
      return at + "'" + e.key.substr(0, 64) + "' sets " + name + " again (line " +
             std::to_string(first->second) + " set it already)";
    }
    from_file[option] = e.line;
    // Checked even where the command line's value wins: the file is wrong either way.
    if (std::string why = kind_error(*option, e); !why.empty())
      return at + name + " " + why + " (it was given '" + e.values.front().substr(0, 64) + "')";
    if (from_flags.count(option) != 0) continue;
    try {
      if (option->get_expected_min() == 0) {  // a flag
        option->add_result(option->get_flag_value(name, e.values.front()));
      } else {
        option->add_result(e.values);
      }
      option->run_callback();
    } catch (const CLI::Error& error) {
      return at + error.what();
    }
  }
  return {};
}

// The jobs table's entries ([jobs.NAME] key = value) into `table`.
std::string apply_jobs(const std::string& path, const std::vector<ConfigFileEntry>& entries,
                       JobsTable* table) {
  std::vector<JobsTableEntry> jobs;
  for (const ConfigFileEntry& e : entries) {
    if (e.section.empty()) continue;
    if (e.values.size() != 1) {
      return path + ":" + std::to_string(e.line) + ": job '" + e.section.back() + "': " + e.key +
             " takes one value, not a list";
    }
    jobs.push_back({e.section, e.key, e.values.front(), e.line});
  }
  // One entry at a time, so that an error names its entry's line.
  for (const JobsTableEntry& job : jobs) {
    if (std::string error = read_jobs_table({job}, table); !error.empty())
      return path + ":" + std::to_string(job.line) + ": " + error;
  }
  return {};
}

// Each option's value in `config`: an App over a copy shows it as each option's default.
template <typename Fn>
void for_each_option(const Config& config, Fn fn) {
  Config copy = config;
  CLI::App app;
  app.option_defaults()->always_capture_default();
  Words words(copy);
  define(app, copy, words);
  for (const CLI::Option* option : app.get_options()) {
    const std::string name = option->get_single_name();
    if (name == "help" || name == "config" || name == "job") continue;
    fn(name, option->get_default_str(), option->get_type_name().find("TEXT") != std::string::npos);
  }
}

// A TOML basic string.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

ConfigLoad load_config(const std::vector<std::string>& args) {
  ConfigLoad load;
  Config& config = load.config;
  CLI::App app{
      "plexusd: per-node collective-communication service.\n"
      "Serves collectives for the rank processes on this node through shared-memory "
      "rings; libplexus clients find it on its unix socket. With --peer-listen it runs "
      "communicators across nodes together with the other nodes' plexusd."};
  app.name("plexusd");
  Words w(config);
  define(app, config, w);
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // as CLI11 takes them
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    std::ostringstream out, err;
    load.exit_code = app.exit(e, out, err);
    load.output = out.str();
    if (load.exit_code != 0) load.error = e.what();
    return load;
  }
  load.file = w.config_file;
  std::string error;
  if (!load.file.empty()) {
    const common::Result<std::vector<ConfigFileEntry>> entries = read_config_file(load.file);
    error = entries.error();
    if (error.empty()) error = apply_file(app, load.file, *entries);
    if (error.empty()) error = apply_jobs(load.file, *entries, &config.jobs);
  }
  for (size_t i = 0; error.empty() && i < w.jobs.size(); ++i)
    error = parse_job_option(w.jobs[i], &config.jobs);
  if (!error.empty()) {
    load.exit_code = 1;
    load.error = std::move(error);
    return load;
  }
  config.channel_acks = common::on_off_auto_words().at(w.channel_acks);
  config.transport = data_transport_words().at(w.transport);
  config.telemetry = common::on_off_words().at(w.telemetry);
  config.latency_connections = common::on_off_auto_words().at(w.latency_connections);
  config.metrics = common::on_off_words().at(w.metrics);
  config.nics.clear();
  // Split here: CLI11's own delimiter splitting trips GCC 12's -Wnull-dereference.
  for (size_t start = 0; start < w.nics.size();) {
    const size_t comma = std::min(w.nics.find(',', start), w.nics.size());
    if (comma > start) config.nics.push_back(w.nics.substr(start, comma - start));
    start = comma + 1;
  }
  return load;
}

std::map<std::string, std::string> config_values(const Config& config) {
  std::map<std::string, std::string> values;
  for_each_option(config, [&](const std::string& name, const std::string& value, bool) {
    values[name] = value;
  });
  for (const auto& [job, settings] : config.jobs) {
    const std::string at = "jobs." + job + ".";
    values[at + "class"] = transports::traffic_class_name(settings.policy.traffic_class);
    values[at + "weight"] = std::to_string(settings.policy.weight);
    values[at + "max_inflight_bytes"] = std::to_string(settings.caps.max_inflight_bytes);
    values[at + "max_staging_bytes"] = std::to_string(settings.caps.max_staging_bytes);
  }
  return values;
}

std::string config_text(const Config& config) {
  // Read back on another node, these would make it this one.
  std::string text =
      "# node-name, socket and spin-us are as this host resolved them: leave them out when\n"
      "# copying this file to another node.\n";
  for_each_option(config, [&](const std::string& name, const std::string& value, bool is_text) {
    // An unset one is shown commented out: "" is not a value every option takes (a file
    // that must exist), and the text reads back as the same settings.
    if (value.empty()) {
      text += "# " + name + " = (not set)\n";
    } else {
      text += name + " = " + (is_text ? quoted(value) : value) + "\n";
    }
  });
  for (const auto& [job, settings] : config.jobs) {
    text += "\n[jobs." + quoted(job) +
            "]\nclass = " + quoted(transports::traffic_class_name(settings.policy.traffic_class)) +
            "\nweight = " + std::to_string(settings.policy.weight) + "\n";
    if (settings.caps.max_inflight_bytes > 0)
      text += "max_inflight_bytes = " + std::to_string(settings.caps.max_inflight_bytes) + "\n";
    if (settings.caps.max_staging_bytes > 0)
      text += "max_staging_bytes = " + std::to_string(settings.caps.max_staging_bytes) + "\n";
  }
  return text;
}

}  // namespace plexus::daemon
