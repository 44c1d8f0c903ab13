// The engine thread: polls every session's submission ring, validates entries and hands
// them to their communicators (CommMatcher matches and runs them; InternodeRunner carries
// those that span nodes; GpuStaging moves GPU buffers), and posts completions
// (Completions). Everything here is owned by this one thread, so none of it needs locks;
// other threads reach it only through post().
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

#include "common/result.h"
#include "daemon/engine/comm.h"
#include "daemon/engine/comm_matcher.h"
#include "daemon/engine/command_queue.h"
#include "daemon/engine/completions.h"
#include "daemon/engine/engine_config.h"
#include "daemon/engine/entry_intake.h"
#include "daemon/engine/gpu_staging.h"
#include "daemon/engine/internode_runner.h"
#include "daemon/engine/op_watch.h"
#include "daemon/engine/session.h"
#include "daemon/engine/session_table.h"
#include "daemon/engine/watchdog_pinger.h"
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

  // Told on the engine thread about the data links to peer daemons.
  using LinkEvents = InternodeRunner::LinkEvents;

  // `events`: where the engine's anomaly rules report (a memory-only log when null).
  Engine(const EngineConfig& config, SessionCloser close_session, LinkEvents link_events = {},
         std::shared_ptr<monitor::EventLog> events = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Before start(): `ping` runs on the engine thread, from its own loop, at least every
  // `every` while the loop turns (systemd's watchdog: an engine stuck in one op or command
  // stops pinging, and is restarted). Parks are cut to `every` so an idle engine pings too.
  void set_watchdog(std::function<void()> ping, std::chrono::microseconds every);
  void start();
  void stop();

  // Any thread: runs fn on the engine thread, in posting order.
  void post(std::function<void(Engine&)> fn);

  // Engine thread only (from posted closures).
  // A config reload: takes from `next` what may change while the engine runs (the jobs
  // table, the stall and rank-skew thresholds, the parallel and slice thresholds); the
  // rest of it is ignored (what cannot change live is named by the reload: plan_reload in
  // daemon/config_reload.h; docs/using.md, "Changing settings while it serves").
  void reconfigure(const EngineConfig& next);
  void add_session(std::shared_ptr<Session> session);
  void remove_session(uint64_t session_id, const std::string& reason);
  void add_comm(const std::shared_ptr<Comm>& comm);
  // The rank behind (session, handle) leaves; abort fails pending ops now.
  void leave_comm(uint64_t session_id, uint32_t handle, bool abort);
  // Revokes the communicator the session holds as `handle` (plexus_comm_revoke): its ops
  // here fail with PLEXUS_ERR_REVOKED and `text`, later ones at intake, and the nodes it is
  // linked to hear at once (kAbort); the control thread tells the rest down a tree.
  void revoke_comm(uint64_t session_id, uint32_t handle, const std::string& text);
  // Another node revoked multi-node communicator `comm_id` (nothing if it is not here):
  // `code` REVOKED, or PEER_LOST where that node's daemon lost one of its nodes.
  void revoke_remote(uint64_t comm_id, const std::string& text, plexus_result_t code);
  // The session's rank parks the communicator it holds as `handle`, or takes it up again
  // (plexus_comm_suspend, _resume): once every local rank has parked it, the memory kept for
  // it is released. Returns the bytes released by this call.
  uint64_t suspend_comm(uint64_t session_id, uint32_t handle, bool suspend);
  // A GPU allocation of the session, mapped by `device` already: its new region id, or why
  // not (GpuStaging::register_memory).
  common::Result<uint32_t> register_gpu_memory(uint64_t session_id,
                                               std::shared_ptr<gpu::DeviceMemory> device,
                                               std::shared_ptr<gpu::DeviceMapping> mapping);
  // False when the session has no such region.
  bool release_gpu_memory(uint64_t session_id, uint32_t region);
  // The session's GPU region `region` (the weight store copies a tensor there); null when it
  // has none such.
  std::shared_ptr<gpu::DeviceMapping> gpu_mapping(uint64_t session_id, uint32_t region) const;
  // The data links to peer daemons: adding one (an authenticated connection, opened as a
  // path), a peer daemon gone, a NIC drained, on the engine thread (from posted closures);
  // their snapshots (NodeLinks::snapshot, drained_snapshot, nic_windows) from any thread.
  NodeLinks& links() { return internode_.links(); }
  // Jobs' scheduling policies (engine thread only: from posted closures).
  JobPolicies& jobs() { return internode_.jobs(); }
  // The weight relay between nodes (engine thread only: from posted closures).
  WeightRelay& weights() { return internode_.weights(); }

  // Any thread.
  monitor::EventLog& events() const { return *events_; }
  // The watch over the engine's ops: its report on the engine thread only, its counters
  // from any thread (OpWatch).
  OpWatch& op_watch() { return watch_; }
  const OpWatch& op_watch() const { return watch_; }
  unsigned workers() const { return pool_.workers(); }

 private:
  void loop();
  // Between slices of a cut op (LocalExecutor): the latency-class sessions' new entries.
  void serve_latency_between_slices();
  // An op ends: its GPU result goes back to the device first, then the completion.
  void complete(Session* session, uint64_t user_data, plexus_result_t status,
                const std::string& message);
  void kill_session(Session& session, const std::string& reason);
  void park();

  EngineConfig config_;
  std::shared_ptr<monitor::EventLog> events_;
  OpWatch watch_;
  Completions completions_;
  GpuStaging gpu_;
  SessionCloser close_session_;
  WorkerPool pool_;
  LocalExecutor executor_;

  std::thread thread_;
  std::atomic<bool> stopping_{false};
  common::UniqueFd epoll_fd_;
  CommandQueue<Engine> commands_;
  WatchdogPinger watchdog_;

  SessionTable sessions_;
  std::vector<shm::SubmissionEntry> batch_;
  std::vector<shm::SubmissionEntry> urgent_batch_;  // serve_latency_between_slices'
  // True while the loop polls a session's own entries: only then may a cut op's pause
  // serve the latency sessions.
  bool between_slices_serves_ = false;

  // Bound to internode_ before that is built; neither is called until the engine runs.
  CommMatcher matcher_;
  EntryIntake intake_;  // bound to matcher_ and gpu_
  // Last: destroyed first, its links (whose callbacks reach the members above) with it.
  InternodeRunner internode_;
};

}  // namespace plexus::daemon
