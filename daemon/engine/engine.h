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
  // The node's GPUs (the control server opens them on the first GPU registration; tests
  // give a DeviceMemory over host memory). Before start(), or on the engine thread.
  void use_device_memory(std::shared_ptr<gpu::DeviceMemory> device) {
    device_memory_ = std::move(device);
  }
  // A GPU allocation of the session, mapped by `device` already: its new region id, or 0
  // with *error (engine_gpu.cc).
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
  // GPU work that rings no doorbell: entries held for a stream, or copies in flight. The
  // engine then parks only briefly.
  bool watching_gpu() const;
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

  // Points part.send / part.recv at host copies of the entry's GPU spans (engine_gpu.cc);
  // *staged is the copies' owner. Else the status and *error: NO_MEMORY past the process's
  // staging budget.
  // `direct`: a send or receive to a rank of this node, moved later by one copy from
  // where its data is to where it goes (StagedOp::direct), with no host copy of its own.
  plexus_result_t stage_gpu_buffers(Session& session, Contribution& part, bool direct,
                                    gpu::StagedOp** staged, std::string* error);
  // The direct op of a matched send or receive, or null (engine_gpu.cc).
  std::shared_ptr<gpu::StagedOp> direct_op(const Contribution& part) const;
  // Moves a matched local send and receive of which one or both are direct by one copy;
  // both complete when it ends.
  void start_direct_copy(Contribution send, Contribution recv);
  // Completes the matched pairs whose copy has ended. True if any did.
  bool advance_direct_copies();
  // Whether `entry` (a rank's part of a collective) goes to the daemon's reduction kernel
  // on the GPU, so takes no host copy (config gpu_reduce_kernel_bytes).
  bool reduces_on_gpu(const Comm& comm, const shm::ValidatedEntry& entry);
  // Whether `entry` is a rank's part of a broadcast, allgather or alltoall within the node,
  // moved block by block by the copy engines from where each input lies to where each
  // result goes, so takes no host copy. An in-place alltoall is staged (its blocks would
  // be overwritten while other ranks' copies read them).
  bool moves_on_copy_engines(const Comm& comm, const shm::ValidatedEntry& entry) const;
  // Whether any rank's part of `op` is direct (StagedOp::direct).
  bool has_direct_part(const PendingCollective& op) const;
  // A ready collective with direct parts (engine_gpu.cc): handed to the kernel (true, it
  // completes later), or failed (true, its parts completed), or its direct parts staged
  // now, synchronously, to run on the host (false: the caller runs it). The fallback is for
  // ranks the kernel cannot reach (a host buffer, a GPU without peer access).
  bool start_gpu_reduction(Comm& comm, PendingCollective& op, uint64_t seq);
  // A ready broadcast, allgather or alltoall with direct parts: every block's copy started
  // on the copy engines (true, it completes when the last ends), or, for an alltoall with
  // a rank in place, its direct parts staged now to run on the host (false), or failed
  // (true, its parts completed).
  bool start_gpu_copies(Comm& comm, PendingCollective& op, uint64_t seq);
  // Stages a collective's direct parts now, waiting for their input, so that the host runs
  // it: true, or false with every part completed with the error naming the rank.
  bool stage_direct_parts_now(PendingCollective& op, const std::string& what);
  // Holds a collective the kernel or the copy engines have started (`run`) until it ends.
  void hand_to_gpu(PendingCollective& op, uint64_t seq,
                   std::vector<std::shared_ptr<gpu::StagedOp>> staged,
                   std::unique_ptr<gpu::CopyInFlight> run, const char* algorithm,
                   const char* run_by);
  // Completes the collectives whose kernel or copies have ended. True if any did.
  bool advance_gpu_collectives();
  // Starts copying a staged op's input in, unless an earlier op of the session has yet to
  // write its result where it reads: false then (asked again as that op moves on).
  bool start_staged_input(Session& session, gpu::StagedOp& op);
  // Hands a validated op to its communicator.
  void dispatch(Comm& comm, Contribution part);
  // Whether a staged op may leave its session's staging queue for its communicator
  // (`comm`, null once destroyed): its input is in, or failed (*copy_error: it leaves to be
  // failed), or, for a collective between nodes, has started coming in; and it writes
  // nowhere an earlier op's input is still arriving.
  bool may_leave_staging(Session& session, const Comm* comm, gpu::StagedOp& op,
                         const shm::ValidatedEntry& entry, std::string* copy_error);
  // Whether `op` writes where an earlier op of the session is still copying its input in
  // (one that runs while its input arrives): it waits.
  bool overwrites_arriving_input(Session& session, const gpu::StagedOp& op);
  // Hands `op` the staged GPU inputs and results of its local parts (InternodeOp::
  // DeviceStaging); null when it has none, else where a failed input copy is described.
  std::shared_ptr<std::string> stage_gpu_slices(InternodeOp& op);
  // Starts the slices whose input has come in; fails the communicator (naming the rank)
  // when an input copy failed. True if anything moved.
  bool resume_input_waits();
  // Moves on the session's ops whose GPU copies have ended: the staged ones to their
  // communicators, the copied-back ones to their completions. True if any moved.
  bool advance_gpu_copies(Session& session);
  // Ends an op: its stream is let go, its user_data freed, its completion posted.
  void finish_op(Session* session, uint64_t user_data, plexus_result_t status,
                 const std::string& message);

  EngineConfig config_;
  std::shared_ptr<monitor::EventLog> events_;
  OpWatch watch_;
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
  // The node's GPUs, opened when the first GPU allocation is registered.
  std::shared_ptr<gpu::DeviceMemory> device_memory_;
  // Since when no GPU stream or copy the engine watches has moved (unset: one just did).
  std::chrono::steady_clock::time_point gpu_still_since_{};
  std::vector<Session*> to_publish_;
  std::vector<shm::SubmissionEntry> batch_;

  LinkEvents link_events_;
  NodeLinks links_;
  std::unordered_map<uint64_t, std::shared_ptr<Comm>> comm_by_id_;  // multi-node comms
  std::vector<uint64_t> retired_ids_;  // recent comm ids whose stray frames are dropped
  std::unordered_map<uint64_t, std::vector<std::pair<uint64_t, HeldFrame>>> unknown_frames_;
  size_t unknown_bytes_ = 0;
  std::vector<std::shared_ptr<Comm>> progress_;  // comms with internode work to look at
  // Matched local sends and receives moved by one copy (GPU to GPU, or to or from a host
  // pool), in flight. Their sessions are held: a host pool must stay mapped under the copy.
  struct DirectCopy {
    std::shared_ptr<Session> send_session;
    std::shared_ptr<Session> recv_session;
    uint64_t send_user_data;
    uint64_t recv_user_data;
    int send_rank;
    int recv_rank;
    std::shared_ptr<gpu::StagedOp> from;  // null: the send is in its host pool
    std::shared_ptr<gpu::StagedOp> to;    // null: the receive is in its host pool
    std::unique_ptr<gpu::CopyInFlight> copy;
  };
  std::vector<DirectCopy> direct_copies_;
  // Collectives the daemon's kernel is reducing on a GPU, or its copy engines are moving;
  // sessions and ops are held so that the mappings and host pools they read and write
  // stay until they end.
  struct GpuCollective {
    std::shared_ptr<Comm> comm;
    PendingCollective op;
    uint64_t seq = 0;
    std::vector<std::shared_ptr<Session>> sessions;
    std::vector<std::shared_ptr<gpu::StagedOp>> staged;
    std::unique_ptr<gpu::CopyInFlight> run;
    const char* algorithm = "";  // for plexusctl ops --finished: "gpu-kernel", "copy-engines"
    const char* run_by = "";     // for an error: "reduced on the GPU by plexusd's kernel"
  };
  std::vector<GpuCollective> gpu_collectives_;
  // Multi-node ops whose next slice waits for a GPU input still being copied in.
  struct InputWait {
    std::weak_ptr<Comm> comm;
    std::weak_ptr<InternodeOp> op;
    std::shared_ptr<std::string> failure;  // stage_gpu_slices': set when a copy failed
  };
  std::vector<InputWait> input_waits_;
  bool warned_kernel_unavailable_ = false;
  bool warned_kernel_fallback_ = false;
};

}  // namespace plexus::daemon
