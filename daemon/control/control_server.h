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
#include "daemon/control/comm_rendezvous.h"
#include "daemon/control/control_config.h"
#include "daemon/control/node_joins.h"
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
  NodeJoins& nodes() { return nodes_; }
  // Control thread: every metric of a Prometheus scrape (AdminService).
  void collect_metrics(monitor::MetricFamilies& metrics) {
    admin_service_.collect_metrics(metrics);
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
  void handle_comm_init(Connection& connection, uint32_t request_id,
                        shm::control::CommInit::Reader init);
  void handle_comm_revoke(Connection& connection, uint32_t request_id,
                          shm::control::CommRevoke::Reader revoke);
  void handle_comm_shrink(Connection& connection, uint32_t request_id,
                          shm::control::CommShrink::Reader shrink);
  // The communicator session `session_id` holds as `handle`, and its rank there (null, -1:
  // none).
  std::pair<std::shared_ptr<const Comm>, int> membership(uint64_t session_id,
                                                         uint32_t handle) const;
  void handle_comm_leave(Connection& connection, uint32_t request_id,
                         shm::control::CommLeave::Reader leave);
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
  void arm_rendezvous_timer();
  void on_rendezvous_timer();
  void run_posted();
  void prune_finished_comms();
  Connection* find_connection(uint64_t session_id);
  // The session of every connected client whose hello was accepted.
  std::vector<std::shared_ptr<const Session>> sessions() const;
  // A rank joins a communicator of this node alone.
  void join_here(const Session& session, uint32_t request_id, const CommToken& token, int nranks,
                 int rank, uint32_t timeout_ms);
  // Fails `comm`'s ops here with PLEXUS_ERR_REVOKED and `text`, tells its other nodes, and
  // then runs `then` on this thread.
  void revoke(const std::shared_ptr<const Comm>& comm, uint64_t session_id, uint32_t handle,
              const std::string& text, std::function<void()> then);
  // Replies to every joiner and hands the communicator to the engine.
  void form_comm(const CommToken& token, int nranks,
                 const std::vector<CommRendezvous::Joiner>& joiners, std::optional<NodeSpan> span);

  ControlConfig config_;
  Engine& engine_;
  // Opened here, off the engine thread (the driver's start takes a while), with every
  // allocation's mapping; the engine gets both with the registration.
  std::shared_ptr<gpu::DeviceMemory> device_memory_;
  std::string no_device_memory_;  // why there is none, once opening failed

  uv_loop_t loop_{};
  uv_poll_t listen_poll_{};
  uv_async_t wakeup_{};
  uv_timer_t rendezvous_timer_{};
  uv_timer_t path_watch_timer_{};  // the slow-path rule, with telemetry on
  uv_timer_t idle_timer_{};        // --idle-exit-s
  uv_timer_t status_timer_{};      // the status line and the end of a node drain
  uint32_t idle_seconds_ = 0;      // whole seconds with no connection, as the timer saw them
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
  CommRendezvous rendezvous_;

  NodeJoins nodes_;                                 // after rendezvous_, which it shares
  std::vector<std::shared_ptr<const Comm>> comms_;  // const: the engine owns their state
  // Successors asked for here and not formed yet (a shrink's token: what it succeeds);
  // bounded: the oldest go past kPendingSuccessors.
  std::map<CommToken, Comm::Origin> pending_successors_;
  static constexpr size_t kPendingSuccessors = 256;
  uint64_t bad_messages_ = 0;
  // plexusctl's and Prometheus's view, and the admin commands (after what its hooks read).
  AdminService admin_service_;
};

}  // namespace plexus::daemon
