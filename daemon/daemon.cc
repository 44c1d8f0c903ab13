#include "daemon/daemon.h"

#include <malloc.h>

#include <condition_variable>
#include <future>
#include <mutex>

#include <spdlog/spdlog.h>

#include "daemon/control/control_server.h"
#include "daemon/engine/engine.h"
#include "daemon/local/reduce.h"
#include "daemon/peers/peer_nics.h"
#include "monitor/prometheus_endpoint.h"
#include "shm/framing.h"

namespace plexus::daemon {

struct Daemon::Impl {
  Config config;  // with its node name and socket path resolved
  std::shared_ptr<gpu::DeviceMemory> device_memory;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<ControlServer> control;
  std::unique_ptr<monitor::PrometheusEndpoint> metrics;
  std::mutex mutex;
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

}  // namespace

Daemon::Daemon(Config config, std::shared_ptr<gpu::DeviceMemory> device_memory)
    : impl_(std::make_unique<Impl>()) {
  impl_->config = std::move(config);
  impl_->device_memory = std::move(device_memory);
  impl_->config.node_name = effective_node_name(impl_->config);
  if (impl_->config.socket_path.empty()) impl_->config.socket_path = shm::default_socket_path();
}

Daemon::~Daemon() { stop(); }

void Daemon::set_engine_watchdog(std::function<void()> ping, std::chrono::microseconds every) {
  impl_->watchdog_ping = std::move(ping);
  impl_->watchdog_every = every;
}

void Daemon::start() {
  Impl& d = *impl_;
  tune_allocator();
  auto events = std::make_shared<monitor::EventLog>(d.config.node_name, d.config.events_file);
  // The NICs to peers first: the channel's "auto" setting depends on how many there are.
  std::vector<PeerNic> peer_nics;
  if (!d.config.peer_listen.empty())
    peer_nics = find_peer_nics(d.config.peer_listen, d.config.nics);
  const bool acks = d.config.channel_acks == common::OnOffAuto::kOn ||
                    (d.config.channel_acks == common::OnOffAuto::kAuto && peer_nics.size() >= 2);
  // The engine asks the control thread to close sessions that broke the ring protocol.
  d.engine = std::make_unique<Engine>(
      engine_config(d.config, acks),
      [&d](uint64_t id, std::string reason) {
        d.control->post([&d, id, reason] { d.control->close_session(id, reason); });
      },
      Engine::LinkEvents{
          [&d](uint64_t instance) {
            d.control->post([&d, instance] { d.control->nodes().data_link_lost(instance); });
          },
          [&d](uint64_t instance, const std::string& nic, const std::string& remote) {
            d.engine->events().emit(
                "path_failed", "warning", "the path over NIC " + nic + " to " + remote + " failed",
                {{"nic", nic}, {"remote", remote}, {"peer_instance", instance}});
            d.control->post([&d, instance, nic, remote] {
              d.control->nodes().data_path_lost(instance, nic, remote);
            });
          },
          [&d](const std::string& nic) {
            d.engine->events().emit("nic_up", "info", "NIC " + nic + " is up again",
                                    {{"nic", nic}});
            d.control->post([&d, nic] { d.control->nodes().nic_up(nic); });
          }},
      events);
  ControlConfig control = control_config(d.config, std::move(peer_nics));
  // Called on the control thread, which stop() joins: wait() returns and its caller stops.
  control.on_idle = [&d] {
    std::lock_guard lock(d.mutex);
    d.exit_requested = true;
    d.stopped_cv.notify_all();
  };
  d.control = std::make_unique<ControlServer>(std::move(control), *d.engine, d.device_memory);
  d.control->start();
  if (!d.config.peer_listen.empty()) {
    spdlog::info("channel acknowledgements {} (--channel-acks {})", acks ? "on" : "off",
                 common::switch_name(d.config.channel_acks));
  }
  if (d.watchdog_ping) d.engine->set_watchdog(d.watchdog_ping, d.watchdog_every);
  d.engine->start();
  if (d.config.metrics == common::OnOff::kOn) {
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
      d.metrics = std::make_unique<monitor::PrometheusEndpoint>(d.config.metrics_listen, scrape);
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

const std::string& Daemon::socket_path() const { return impl_->config.socket_path; }

}  // namespace plexus::daemon
