// The engine thread: polls every session's submission ring, validates entries, matches
// them into ops per communicator, runs ops on the mapped buffers and posts completions.
// It owns all matching state, so none of that needs locks; other threads reach it only
// through post().
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "daemon/comm.h"
#include "daemon/config.h"
#include "daemon/local_collectives.h"
#include "daemon/session.h"
#include "daemon/worker_pool.h"

namespace plexus::daemon {

class Engine {
 public:
  // Called on the engine thread when a session broke the ring protocol; the receiver
  // closes its connection (the engine has already failed and dropped the session).
  using SessionCloser = std::function<void(uint64_t session_id, std::string reason)>;

  Engine(const Config& config, SessionCloser close_session);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void start();
  void stop();

  // Any thread: runs fn on the engine thread, in posting order.
  void post(std::function<void(Engine&)> fn);

  // Engine thread only (from posted closures).
  void add_session(std::shared_ptr<Session> session);
  void remove_session(uint64_t session_id, const std::string& reason);
  void add_comm(const std::shared_ptr<Comm>& comm);
  // The rank behind (session, handle) leaves; abort fails pending ops now.
  void leave_comm(uint64_t session_id, uint32_t handle, bool abort);

  uint64_t ops_completed() const { return ops_completed_.load(std::memory_order_relaxed); }
  unsigned workers() const { return pool_.workers(); }

 private:
  void loop();
  void run_commands();
  bool poll_session(Session& session);
  void handle_entry(Session& session, const shm::SubmissionEntry& raw);
  void submit_collective(Comm& comm, Contribution part);
  void submit_p2p(Comm& comm, Contribution part);
  void run_ready_collectives(Comm& comm);
  void execute_collective(Comm& comm, PendingCollective& op, uint64_t seq);
  std::string find_mismatch(const Comm& comm, const PendingCollective& op, uint64_t seq) const;
  void complete(Session* session, uint64_t user_data, plexus_result_t status,
                const std::string& message);
  void fail_comm(Comm& comm, plexus_result_t status, const std::string& reason,
                 const Session* aborting_session);
  void member_gone(Comm& comm, int rank);
  // A rank destroyed its communicator: fail only what needs it (every pending collective,
  // point-to-point ops to or from it); the other ranks may still talk among themselves.
  void rank_departed(Comm& comm, int rank, const std::string& reason);
  // Why `rank` is no longer a member, or nullptr while it is.
  static const std::string* departure_of(const Comm& comm, int rank);
  void kill_session(Session& session, const std::string& reason);
  void publish_completions();
  void park();
  Session* find_session(uint64_t id);

  Config config_;
  SessionCloser close_session_;
  WorkerPool pool_;
  LocalExecutor executor_;

  std::thread thread_;
  std::atomic<bool> stopping_{false};
  shm::UniqueFd epoll_fd_;
  shm::UniqueFd command_eventfd_;
  std::mutex command_mutex_;
  std::vector<std::function<void(Engine&)>> commands_;
  std::atomic<bool> has_commands_{false};

  std::vector<std::shared_ptr<Session>> sessions_;
  std::vector<Session*> to_publish_;
  std::vector<shm::SubmissionEntry> batch_;
  std::atomic<uint64_t> ops_completed_{0};
};

}  // namespace plexus::daemon
