// The process-wide connection to plexusd: control channel, buffer pool, SQ/CQ rings and
// the table of outstanding requests. Created on first use; a forked child starts afresh.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "clientlib/control/control_channel.h"
#include "clientlib/src/gpu_buffers.h"
#include "clientlib/src/stream_flag_slots.h"
#include "plexus/plexus.h"
#include "shm/idle_strategy.h"
#include "shm/pool.h"
#include "shm/ring.h"

namespace plexus::client {

struct CommState {
  uint32_t handle = 0;
  int nranks = 0;
  int rank = 0;
  std::atomic<int> outstanding{0};
  std::atomic<bool> closed{false};
  // Growths this rank took part in (plexus_comm_grow): the members number them alike, and
  // plexus_comm_grow_id names the next one.
  std::atomic<uint32_t> growths{0};
  std::atomic<bool> suspended{false};  // plexus_comm_suspend until plexus_comm_resume
  void* stream = nullptr;  // plexus_comm_set_stream: calls are ordered on this CUDA stream
  // The failure of a stream-ordered call made without a request, reported by the next
  // call on the communicator.
  std::mutex async_mutex;
  plexus_result_t async_status = PLEXUS_SUCCESS;
  std::string async_message;
};

}  // namespace plexus::client

// The request behind plexus_request_t.
struct plexus_request {
  uint64_t id = 0;
  std::atomic<bool> done{false};
  plexus_result_t status = PLEXUS_SUCCESS;
  std::string message;
  std::shared_ptr<plexus::client::CommState> comm;
  // Staging for buffers outside the pool: result copied out to user_recv on completion.
  void* staging = nullptr;
  void* user_recv = nullptr;
  size_t copy_out_bytes = 0;
  size_t copy_out_offset = 0;   // within staging
  bool owned_by_group = false;  // NULL request inside a group: waited at group end
  int stream_slot = -1;         // stream-ordered: its StreamFlagSlots slot until completion
  uint32_t stream_ticket = 0;
  bool detached = false;      // stream-ordered with no request: freed at completion
  size_t bytes = 0;           // data the op moves for this rank; large ops park at once
  int* source_out = nullptr;  // a recv from any source: where the sender's rank goes
};

namespace plexus::client {

class ClientContext {
 public:
  // The context of this process, connecting on first use. Throws std::runtime_error.
  static ClientContext& get();
  // Whether ptr lies in the pool of a process this one was forked from (plexus_free of it
  // has nothing to do: the memory is this process's private copy).
  static bool inherited_from_parent(const void* ptr);

  shm::ClientPool& pool() { return *pool_; }
  ControlChannel& control() { return *control_; }
  GpuBuffers& gpu() { return gpu_; }
  StreamFlagSlots& stream_flags() { return *stream_flags_; }
  uint64_t session_id() const { return session_id_; }

  // Registers a request for the entry and submits it (or buffers it in the calling
  // thread's open group). Takes ownership of req.
  void submit(plexus_request* req, shm::SubmissionEntry entry);
  // Submits a group's buffered entries at once.
  void submit_batch(std::span<const std::pair<plexus_request*, shm::SubmissionEntry>> batch);

  // Waits until req is done (or the daemon is gone).
  void wait(plexus_request* req);
  // Takes completions that have arrived; returns true if any.
  bool progress();
  // Waits until comm has no outstanding requests, or at most `limit`: false if some still are.
  bool quiesce(CommState& comm, std::chrono::milliseconds limit = std::chrono::milliseconds::max());
  // Before the first stream-ordered call: starts a thread that watches the daemon's
  // socket, so that if plexusd dies the done flags of stream-ordered calls are written
  // here and no GPU stream waits forever (the host may be blocked on that stream, making
  // no call that would notice).
  void watch_daemon_for_streams();

 private:
  ClientContext();
  // pthread_atfork's child handler: drops the parent's session in the child.
  static void forget_parent_in_child() noexcept;
  void complete(uint64_t id, plexus_result_t status, std::string message, int32_t source = -1);
  void fail_all(const std::string& reason);
  bool daemon_gone();
  template <typename Done>
  void wait_until(Done&& done, shm::IdleSettings idle);

  std::unique_ptr<ControlChannel> control_;
  GpuBuffers gpu_;
  std::unique_ptr<shm::ClientPool> pool_;
  std::unique_ptr<StreamFlagSlots> stream_flags_;  // over pool_
  std::optional<shm::RingMemory> rings_;
  std::optional<shm::ClientRingEnd> ring_end_;
  common::UniqueFd submission_eventfd_;
  common::UniqueFd completion_eventfd_;
  uint64_t session_id_ = 0;
  shm::IdleSettings idle_{shm::default_spin_us(), 2000};
  // Waiters on ops this large sleep at once: the wakeup costs far less than the op, and
  // a polling waiter would take CPU from the daemon doing the work.
  size_t park_at_once_bytes_ = 1 << 20;

  std::mutex ring_mutex_;  // SQ production and CQ consumption
  std::mutex requests_mutex_;
  std::unordered_map<uint64_t, plexus_request*> outstanding_;
  uint64_t next_request_id_ = 1;
  std::atomic<bool> dead_{false};
  std::string dead_reason_;
  std::once_flag stream_watch_started_;
};

}  // namespace plexus::client
