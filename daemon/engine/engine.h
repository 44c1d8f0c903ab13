// The engine thread: polls every session's submission ring, validates entries, matches
// them into ops per communicator, runs ops on the mapped buffers and posts completions.
// It owns all matching state, so none of that needs locks; other threads reach it only
// through post().
#pragma once

#include <atomic>
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

#include "daemon/engine/comm.h"
#include "daemon/engine/engine_config.h"
#include "daemon/engine/gpu_staging.h"
#include "daemon/engine/internode_state.h"
#include "daemon/engine/op_watch.h"
#include "daemon/engine/session.h"
#include "daemon/gpu/device_memory.h"
#include "daemon/links/node_links.h"
#include "daemon/local/local_collectives.h"
#include "daemon/local/worker_pool.h"
#include "monitor/event_log.h"

namespace plexus::daemon {

class Engine {
 public:
  // Called on the engine thread when a session broke the ring protocol; the receiver
  // closes its connection (the engine has already failed and dropped the session).
  using SessionCloser = std::function<void(uint64_t session_id, std::string reason)>;

  // Called on the engine thread about the data links to peer daemons.
  struct LinkEvents {
    std::function<void(uint64_t instance)> lost;  // the link is gone, with its last path
    // A path over local NIC `nic` to the peer's `remote` ("ip:port") failed; the link
    // stays (NodeLinks::Handler::on_path_lost).
    std::function<void(uint64_t instance, const std::string& nic, const std::string& remote)>
        path_lost;
    std::function<void(const std::string& nic)> nic_up;  // a local NIC came back
  };

  // `events`: where the engine's anomaly rules report (a memory-only log when null).
  Engine(const EngineConfig& config, SessionCloser close_session, LinkEvents link_events = {},
         std::shared_ptr<monitor::EventLog> events = nullptr);
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
  // A GPU allocation of the session, mapped by `device` already: its new region id, or 0
  // with *error (GpuStaging::register_memory).
  uint32_t register_gpu_memory(uint64_t session_id, std::shared_ptr<gpu::DeviceMemory> device,
                               std::shared_ptr<gpu::DeviceMapping> mapping, std::string* error);
  // False when the session has no such region.
  bool release_gpu_memory(uint64_t session_id, uint32_t region);
  // An authenticated data connection to peer daemon `instance`, opened as a path by `open`;
  // `backup`: across rails (NodeLinks::add).
  void add_peer_link(uint64_t instance, std::string name, transports::PathOpener open,
                     std::string nic, bool backup);
  // The control connection to peer daemon `instance` closed: the daemon is gone.
  void peer_daemon_gone(uint64_t instance, const std::string& reason) {
    links_.peer_gone(instance, reason);
  }
  // Drains (or undrains) local NIC `nic`'s paths: NodeLinks::drain_nic.
  size_t drain_nic(const std::string& nic, bool drained) { return links_.drain_nic(nic, drained); }
  // Any thread: the peer links as of the last ~100 ms.
  std::vector<NodeLinks::PeerInfo> peer_links() const { return links_.snapshot(); }
  std::vector<std::string> drained_nics() const { return links_.drained_snapshot(); }
  // Any thread: each NIC's telemetry windows (empty with telemetry off).
  std::map<std::string, std::shared_ptr<const monitor::WindowRing>> nic_windows() const {
    return links_.nic_windows();
  }

  // Any thread.
  monitor::EventLog& events() const { return *events_; }
  // The watch over the engine's ops: its report on the engine thread only, its counters
  // from any thread (OpWatch).
  OpWatch& op_watch() { return watch_; }
  const OpWatch& op_watch() const { return watch_; }
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
  // A submitted entry refused before it became an op (nothing staged is touched); a
  // stream-ordered one releases its stream.
  void refuse_entry(Session& session, const shm::SubmissionEntry& raw, plexus_result_t status,
                    const std::string& message);
  // Stream-ordered entries (engine_stream.cc): handled now, or held until their stream
  // reaches them; held entries taken up as their streams do. Returns whether any was.
  void accept_entry(Session& session, const shm::SubmissionEntry& raw);
  bool release_held_entries(Session& session);
  bool stream_reached(const Session& session, const shm::SubmissionEntry& raw) const;
  // Writes `done` of the stream-ordered op `user_data` of the session, if it is one.
  void release_stream(Session& session, uint64_t user_data);
  // Whether a session waits on GPU work that rings no doorbell (entries held for a stream,
  // input being copied in, results going back): the engine then parks only briefly.
  bool sessions_wait_on_gpu() const;
  void post_completion(Session* session, uint64_t user_data, plexus_result_t status,
                       const std::string& message);
  // An op ends: its GPU result goes back to the device first, then the completion.
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
  // The engine's owning pointer to `session`, or null when it is no longer served.
  std::shared_ptr<Session> shared_session(const Session* session) const;

  // Multi-node communicators (engine_internode.cc).
  void register_multi_node(const std::shared_ptr<Comm>& comm);
  void start_internode_op(Comm& comm, PendingCollective& op);
  std::string on_peer_frame(uint64_t peer, const transports::wire::DataFrameHeader& header,
                            std::span<const std::byte> payload);
  // Large pieces of the running op's plain receives are read straight into its scratch.
  transports::Placement place_peer_frame(uint64_t peer,
                                         const transports::wire::DataFrameHeader& header);
  std::string on_peer_frame_placed(uint64_t peer, const transports::wire::DataFrameHeader& header);
  void on_peer_lost(uint64_t peer, const std::string& name, const std::string& reason);
  // Fails `comm` from the engine loop (not inside a transport callback).
  void defer_failure(Comm& comm, const std::string& reason);
  void internode_progress();
  void finish_internode_op(Comm& comm);
  void tell_peers_failed(Comm& comm, const std::string& reason);
  void remote_rank_departed(Comm& comm, int node, int rank, uint64_t collectives,
                            const std::string& reason);
  void retire_multi_node(Comm& comm);
  // Drops the running collective; frames still being read into its ranks' buffers finish
  // into a sink (its clients are told it failed and may reuse those buffers at once).
  void stop_active_internode_op(Comm& comm);
  // Send/recv between ranks on different nodes (engine_p2p.cc).
  void submit_remote_p2p(Comm& comm, Contribution part);
  std::string on_p2p_frame(Comm& comm, int node, const transports::wire::DataFrameHeader& h,
                           std::span<const std::byte> payload);
  void match_remote_recvs(Comm& comm, uint64_t key);
  void fail_remote_p2p(Comm& comm);
  static int node_of(const Comm& comm, uint64_t instance);

  // Hands a validated op to its communicator.
  void dispatch(Comm& comm, Contribution part);
  // Ends an op: its stream is let go, its user_data freed, its completion posted.
  void finish_op(Session* session, uint64_t user_data, plexus_result_t status,
                 const std::string& message);

  static constexpr uint32_t kBatchEntries = 64;  // entries consumed from a ring at a time
  EngineConfig config_;
  std::shared_ptr<monitor::EventLog> events_;
  OpWatch watch_;
  GpuStaging gpu_;
  SessionCloser close_session_;
  WorkerPool pool_;
  LocalExecutor executor_;

  std::thread thread_;
  std::atomic<bool> stopping_{false};
  common::UniqueFd epoll_fd_;
  common::UniqueFd command_eventfd_;
  std::mutex command_mutex_;
  std::vector<std::function<void(Engine&)>> commands_;
  std::atomic<bool> has_commands_{false};

  std::vector<std::shared_ptr<Session>> sessions_;
  std::vector<Session*> to_publish_;
  std::vector<shm::SubmissionEntry> batch_;

  LinkEvents link_events_;
  NodeLinks links_;
  std::unordered_map<uint64_t, std::shared_ptr<Comm>> comm_by_id_;  // multi-node comms
  std::vector<uint64_t> retired_ids_;  // recent comm ids whose stray frames are dropped
  std::unordered_map<uint64_t, std::vector<std::pair<uint64_t, HeldFrame>>> unknown_frames_;
  size_t unknown_bytes_ = 0;
  std::vector<std::shared_ptr<Comm>> progress_;  // comms with internode work to look at
};

}  // namespace plexus::daemon
