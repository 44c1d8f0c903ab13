#include "daemon/daemon.h"

#include <malloc.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>

#include <spdlog/spdlog.h>

#include "daemon/config_options.h"
#include "daemon/config_reload.h"
#include "daemon/control/control_server.h"
#include "daemon/engine/engine.h"
#include "daemon/local/reduce.h"
#include "daemon/peers/peer_nics.h"
#include "monitor/prometheus_endpoint.h"
#include "shm/framing.h"

namespace plexus::daemon {

struct Daemon::Impl {
  Config config;              // with its node name and socket path resolved; as reloads change it
  bool channel_acks = false;  // --channel-acks as decided at start
  std::shared_ptr<monitor::EventLog> events;
  std::optional<std::vector<std::string>> config_args;  // for reload
  std::string config_file;                              // the --config file it names
  std::vector<std::string> restart_needed;  // read by the last reload, waiting for a restart
  std::mutex status_mutex;  // the status line: set on the control thread, read by main's
  std::function<void(const std::string&)> status_listener;
  std::string last_status;
  std::string socket_path;  // resolved at construction; never changes (a reload keeps it)
  std::mutex reload_mutex;  // one reload at a time
  std::shared_ptr<gpu::DeviceMemory> device_memory;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<ControlServer> control;
  std::unique_ptr<monitor::PrometheusEndpoint> metrics;
  mutable std::mutex mutex;  // stopped, exit_requested, and config once started
  std::condition_variable stopped_cv;
  bool stopped = false;
  bool exit_requested = false;  // the daemon asked itself to stop (--idle-exit-s)
  std::function<void()> watchdog_ping;
  std::chrono::microseconds watchdog_every{0};
};

namespace {

// glibc serves a large allocation with mmap and, when one is freed, raises its threshold
// for the next to that size: which buffers the data path reallocates per op come from
// fresh, page-faulting mappings then depends on what was freed before. Measured: allreduce
// busbw at 64 MiB between two nodes fell to 55% when the telemetry rings (1.8 MB each)
// shifted it (docs/BENCHMARKS.md). Fixed thresholds: blocks under 32 MiB come from the
// heap and are reused; up to 64 MiB of free heap is kept rather than returned and faulted
// back in.
void tune_allocator() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

// The settings as read at start, with the names the Daemon resolves (node, socket path).
Config resolved(Config config) {
  config.node_name = effective_node_name(config);
  if (config.socket_path.empty()) config.socket_path = shm::default_socket_path();
  return config;
}

}  // namespace

ConfigReloadReport Daemon::reload() {
  Impl& d = *impl_;
  std::lock_guard one_at_a_time(d.reload_mutex);
  ConfigReloadReport report;
  auto refuse = [&report](std::string error) {
    spdlog::error("config reload refused, the settings in use are kept: {}", error);
    report.error = std::move(error);
    return report;
  };
  if (!d.config_args)
    return refuse("this plexusd has no command line or config file to read again");
  ConfigLoad load = load_config(*d.config_args);
  if (load.exit_code >= 0)
    return refuse(load.error.empty() ? "the command line asks for help, not a config" : load.error);
  ReloadPlan plan;
  {
    // Held while the new settings go to the threads: stop() cannot take them away meanwhile.
    std::lock_guard lock(d.mutex);
    if (d.stopped || !d.engine || !d.control || !d.events)
      return refuse("plexusd is not running (starting or stopping)");
    plan = plan_reload(d.config, resolved(std::move(load.config)));
    // Opened again even when unchanged: after logrotate moved it, a reload (the usual
    // postrotate) starts a new file.
    if (!plan.in_use.events_file.empty() || !d.config.events_file.empty()) {
      if (std::string error = d.events->reopen(plan.in_use.events_file); !error.empty())
        return refuse("events-file: " + error);
    }
    spdlog::set_level(spdlog::level::from_str(plan.in_use.log_level));
    d.engine->post([next = engine_config(plan.in_use, d.channel_acks)](Engine& engine) {
      engine.reconfigure(next);
    });
    d.control->post([&d, next = control_config(plan.in_use, {})] { d.control->reconfigure(next); });
    d.config = plan.in_use;
    d.config_file = load.file;
    d.restart_needed = plan.restart_needed;
  }
  spdlog::info("config reload ({}): {} change(s) applied, {} waiting for a restart",
               load.file.empty() ? "the command line alone" : load.file, plan.applied.size(),
               plan.restart_needed.size());
  for (const std::string& line : plan.applied) spdlog::info("config reload: {} (applied)", line);
  for (const std::string& line : plan.restart_needed) {
    spdlog::warn(
        "config reload: {} cannot change while plexusd runs; it takes effect at the "
        "next start (the old value stays in use)",
        line);
  }
  report.applied = std::move(plan.applied);
  report.restart_needed = std::move(plan.restart_needed);
  return report;
}

ConfigShown Daemon::shown_config() const {
  const Impl& d = *impl_;
  std::lock_guard lock(d.mutex);
  ConfigShown shown;
  shown.text = config_text(d.config);
  shown.file = d.config_file;
  shown.restart_needed = d.restart_needed;
  return shown;
}

Daemon::Daemon(Config config, std::shared_ptr<gpu::DeviceMemory> device_memory)
    : impl_(std::make_unique<Impl>()) {
  impl_->config = resolved(std::move(config));
  impl_->socket_path = impl_->config.socket_path;
  impl_->device_memory = std::move(device_memory);
}

Daemon::~Daemon() { stop(); }

void Daemon::set_engine_watchdog(std::function<void()> ping, std::chrono::microseconds every) {
  impl_->watchdog_ping = std::move(ping);
  impl_->watchdog_every = every;
}

void Daemon::set_config_args(std::vector<std::string> args, std::string file) {
  impl_->config_args = std::move(args);
  impl_->config_file = std::move(file);
}

void Daemon::set_status_listener(std::function<void(const std::string&)> listener) {
  Impl& d = *impl_;
  std::lock_guard lock(d.status_mutex);
  d.status_listener = std::move(listener);
  if (d.status_listener && !d.last_status.empty()) d.status_listener(d.last_status);
}

void Daemon::start() {
  Impl& d = *impl_;
  // What start() reads of the settings: a reload (from the control thread, once it runs)
  // may replace d.config meanwhile.
  const Config c = d.config;
  tune_allocator();
  d.events = std::make_shared<monitor::EventLog>(c.node_name, c.events_file);
  // The NICs to peers first: the channel's "auto" setting depends on how many there are.
  std::vector<PeerNic> peer_nics;
  if (!c.peer_listen.empty()) peer_nics = find_peer_nics(c.peer_listen, c.nics);
  const bool acks = c.channel_acks == common::OnOffAuto::kOn ||
                    (c.channel_acks == common::OnOffAuto::kAuto && peer_nics.size() >= 2);
  d.channel_acks = acks;
  // The engine asks the control thread to close sessions that broke the ring protocol.
  d.engine = std::make_unique<Engine>(
      engine_config(c, acks),
      [&d](uint64_t id, std::string reason) {
        d.control->post([&d, id, reason] { d.control->close_session(id, reason); });
      },
      Engine::LinkEvents{
          [&d](uint64_t instance) {
            d.control->post([&d, instance] { d.control->nodes().data_link_lost(instance); });
          },
          [&d](uint64_t instance, const std::string& nic, const std::string& remote,
               const std::string& rail_key, bool latency, bool pathless) {
            d.engine->events().emit("path_failed", "warning",
                                    std::string("the ") + (latency ? "latency class's " : "") +
                                        "path over NIC " + nic + " to " + remote + " failed",
                                    {{"nic", nic},
                                     {"remote", remote},
                                     {"peer_instance", instance},
                                     {"latency_class", latency}});
            d.control->post([&d, instance, nic, remote, rail_key, pathless] {
              d.control->nodes().data_path_lost(instance, nic, remote, rail_key, pathless);
            });
          },
          [&d](const std::string& nic) {
            d.engine->events().emit("nic_up", "info", "NIC " + nic + " is up again",
                                    {{"nic", nic}});
            d.control->post([&d, nic] { d.control->nodes().nic_up(nic); });
          },
          [&d](uint64_t instance, const std::vector<std::string>& addresses) {
            d.control->post(
                [&d, instance, addresses] { d.control->nodes().path_wanted(instance, addresses); });
          },
          [&d](uint64_t instance) {
            d.control->post([&d, instance] { d.control->nodes().data_link_retired(instance); });
          },
          [&d](uint64_t relay_id, std::shared_ptr<const weights::Version> version) {
            d.control->post([&d, relay_id, version = std::move(version)] {
              d.control->weights_arrived(relay_id, version);
            });
          }},
      d.events);
  ControlConfig control = control_config(c, std::move(peer_nics));
  // Called on the control thread, which stop() joins: wait() returns and its caller stops.
  control.on_idle = [&d] {
    std::lock_guard lock(d.mutex);
    d.exit_requested = true;
    d.stopped_cv.notify_all();
  };
  if (d.config_args) control.reload = [this] { return reload(); };
  control.show_config = [this] { return shown_config(); };
  control.on_status = [&d](const std::string& line) {
    std::lock_guard lock(d.status_mutex);
    d.last_status = line;
    if (d.status_listener) d.status_listener(line);
  };
  d.control = std::make_unique<ControlServer>(std::move(control), *d.engine, d.device_memory);
  d.control->start();
  if (!c.peer_listen.empty()) {
    spdlog::info("channel acknowledgements {} (--channel-acks {})", acks ? "on" : "off",
                 common::switch_name(c.channel_acks));
  }
  if (d.watchdog_ping) d.engine->set_watchdog(d.watchdog_ping, d.watchdog_every);
  d.engine->start();
  if (c.metrics == common::OnOff::kOn) {
    // One scrape: the control thread gathers the metrics; the exporter's thread waits for
    // them (an empty scrape if the daemon is stopping or the control thread is stuck).
    auto scrape = [&d]() -> std::vector<prometheus::MetricFamily> {
      auto promise = std::make_shared<std::promise<std::vector<prometheus::MetricFamily>>>();
      auto future = promise->get_future();
      d.control->post([&d, promise] {
        monitor::MetricFamilies metrics;
        d.control->collect_metrics(metrics);
        promise->set_value(metrics.take());
      });
      try {
        if (future.wait_for(std::chrono::seconds(2)) == std::future_status::ready) {
          return future.get();
        }
      } catch (const std::future_error&) {
        // The control thread stopped before running it.
      }
      return {};
    };
    try {
      d.metrics = std::make_unique<monitor::PrometheusEndpoint>(c.metrics_listen, scrape);
    } catch (...) {
      d.control->stop();
      d.engine->stop();
      throw;
    }
    spdlog::info("metrics at {}", d.metrics->url());
  }
  spdlog::info("plexusd {} ready: {} reduction workers, reduce kernels {}", PLEXUS_VERSION_STRING,
               d.engine->workers(), reduce_kernel_isa());
}

void Daemon::stop() {
  Impl& d = *impl_;
  {
    std::lock_guard lock(d.mutex);
    if (d.stopped) return;
    d.stopped = true;
  }
  d.stopped_cv.notify_all();
  d.metrics.reset();  // before what its scrapes read
  if (d.control) d.control->stop();
  if (d.engine) d.engine->stop();
  d.control.reset();
  d.engine.reset();
}

void Daemon::wait() {
  std::unique_lock lock(impl_->mutex);
  impl_->stopped_cv.wait(lock, [this] { return impl_->stopped || impl_->exit_requested; });
}

const std::string& Daemon::socket_path() const { return impl_->socket_path; }

}  // namespace plexus::daemon
