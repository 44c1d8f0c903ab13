// The control thread: a libuv loop serving the unix socket. It accepts clients, reads
// their Cap'n Proto requests (hostile until parsed within limits), creates sessions
// and rings, runs communicator rendezvous, and answers plexusctl.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "daemon/algorithms/cost_model.h"
#include "daemon/control/admin_service.h"
#include "daemon/control/comm_service.h"
#include "daemon/control/control_config.h"
#include "daemon/control/weight_service.h"
#include "daemon/engine/engine.h"
#include "monitor/metric_families.h"
#include "shm/control.capnp.h"
#include "shm/framing.h"

namespace plexus::daemon {

class ControlServer {
 public:
  // `device_memory`: the node's GPUs (tests give one over host memory); null: opened on the
  // first GPU registration.
  ControlServer(const ControlConfig& config, Engine& engine,
                std::shared_ptr<gpu::DeviceMemory> device_memory = nullptr);
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Binds the socket (refusing one a live daemon answers on) and starts the thread.
  void start();
  void stop();
  // Any thread: runs fn on the control thread.
  void post(std::function<void()> fn);
  // Control thread: ends a session's connection (e.g. its ring was found corrupt).
  void close_session(uint64_t session_id, const std::string& reason);
  // Control thread: multi-node communicators, the peer daemons and their data links.
  NodeJoins& nodes() { return comms_.nodes(); }
  // Control thread: every metric of a Prometheus scrape (AdminService, WeightService).
  void collect_metrics(monitor::MetricFamilies& metrics) {
    admin_service_.collect_metrics(metrics);
    weights_.collect_metrics(metrics);
  }
  // Control thread: a version of weight relay `relay_id` came whole from another node.
  void weights_arrived(uint64_t relay_id, std::shared_ptr<const weights::Version> version) {
    weights_.arrived(relay_id, std::move(version));
  }
  // Control thread: a config reload's settings; takes what may change while it runs (the
  // slow-path ratio, the stall time reported) and ignores the rest.
  void reconfigure(const ControlConfig& next) { admin_service_.reconfigure(next); }

 private:
  struct Connection;

  void bind_socket();
  void on_listen_readable();
  void on_connection_readable(Connection* connection);
  void handle_frame(Connection& connection, kj::Array<capnp::word> words);
  void handle_hello(Connection& connection, uint32_t request_id, shm::control::Hello::Reader hello);
  // control_server_gpu.cc
  // `fds`: what came with the message (a VMM allocation's handle).
  void handle_register_gpu_memory(const Session& session, uint32_t request_id,
                                  shm::control::GpuMemory::Reader memory,
                                  std::vector<common::UniqueFd> fds);
  void handle_release_gpu_memory(const Session& session, uint32_t request_id, uint32_t region);
  void send_error(uint64_t session_id, uint32_t request_id, plexus_result_t code,
                  const std::string& message);
  bool send_message(Connection& connection, capnp::MessageBuilder& message,
                    std::span<const int> fds = {});
  void close_connection(Connection* connection, const std::string& reason);
  void run_posted();
  Connection* find_connection(uint64_t session_id);
  // control_server_weights.cc: what the weight service asks of this server.
  WeightService::Hooks weight_hooks();
  // Its session while the connection is open (null once it closed).
  std::shared_ptr<const Session> session_of(uint64_t session_id);
  // The session of every connected client whose hello was accepted.
  std::vector<std::shared_ptr<const Session>> sessions() const;
  ControlConfig config_;
  Engine& engine_;
  // Opened here, off the engine thread (the driver's start takes a while), with every
  // allocation's mapping; the engine gets both with the registration.
  std::shared_ptr<gpu::DeviceMemory> device_memory_;
  std::string no_device_memory_;  // why there is none, once opening failed

  uv_loop_t loop_{};
  uv_poll_t listen_poll_{};
  uv_async_t wakeup_{};
  uv_timer_t path_watch_timer_{};  // the slow-path rule, with telemetry on
  uv_timer_t idle_timer_{};        // --idle-exit-s
  uv_timer_t status_timer_{};      // the status line and the end of a node drain
  uint32_t idle_seconds_ = 0;      // whole seconds with no connection, as the timer saw them
  bool idle_held_said_ = false;    // the log said once why an idle daemon stays (weights)
  bool socket_released_ = false;   // unlinked by an idle exit (control thread, then stop())
  void check_idle();
  int listen_fd_ = -1;
  std::thread thread_;
  bool running_ = false;

  std::mutex posted_mutex_;
  std::vector<std::function<void()>> posted_;
  bool stop_requested_ = false;

  uint64_t next_session_id_ = 1;
  std::unordered_map<uint64_t, Connection*> connections_;
  CommService comms_;
  uint64_t bad_messages_ = 0;
  // plexusctl's and Prometheus's view, and the admin commands (after what its hooks read).
  AdminService admin_service_;
  // The weight store: destroyed first, so that its copier thread has ended before the post
  // its copies end with goes away.
  WeightService weights_;
};

}  // namespace plexus::daemon
