// The control thread: a libuv loop serving the unix socket. It accepts clients, reads
// their Cap'n Proto requests (hostile until parsed within limits), creates sessions
// and rings, runs communicator rendezvous, and answers plexusctl.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "daemon/comm_rendezvous.h"
#include "daemon/config.h"
#include "daemon/engine.h"
#include "shm/control.capnp.h"
#include "shm/framing.h"

namespace plexus::daemon {

class ControlServer {
 public:
  ControlServer(const Config& config, std::string socket_path, Engine& engine);
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

 private:
  struct Connection;

  void bind_socket();
  void on_listen_readable();
  void on_connection_readable(Connection* connection);
  void handle_frame(Connection& connection, kj::Array<capnp::word> words);
  void handle_hello(Connection& connection, uint32_t request_id, shm::control::Hello::Reader hello);
  void handle_comm_init(Connection& connection, uint32_t request_id,
                        shm::control::CommInit::Reader init);
  void handle_comm_leave(Connection& connection, uint32_t request_id,
                         shm::control::CommLeave::Reader leave);
  void handle_status(Connection& connection, uint32_t request_id);
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

  Config config_;
  std::string socket_path_;
  Engine& engine_;
  std::chrono::steady_clock::time_point started_at_;

  uv_loop_t loop_{};
  uv_poll_t listen_poll_{};
  uv_async_t wakeup_{};
  uv_timer_t rendezvous_timer_{};
  int listen_fd_ = -1;
  std::thread thread_;
  bool running_ = false;

  std::mutex posted_mutex_;
  std::vector<std::function<void()>> posted_;
  bool stop_requested_ = false;

  uint64_t next_session_id_ = 1;
  std::unordered_map<uint64_t, Connection*> connections_;
  CommRendezvous rendezvous_;
  std::vector<std::shared_ptr<Comm>> comms_;
  uint64_t bad_messages_ = 0;
};

}  // namespace plexus::daemon
