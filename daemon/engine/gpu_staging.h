// The engine's side of GPU buffers: a process's allocations as regions, an op's GPU spans
// staged through host memory around the host algorithms (or, for a send, a receive, a copy
// collective or a kernel reduction within the node, moved where they lie), results copied
// back before their completions, and every copy polled from the engine loop so that none
// holds up other sessions. Engine thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "daemon/engine/comm.h"
#include "daemon/engine/op_watch.h"
#include "daemon/engine/session.h"
#include "daemon/gpu/device_memory.h"
#include "daemon/gpu/staged_op.h"
#include "daemon/internode/internode_op.h"

namespace plexus::daemon {

class GpuStaging {
 public:
  // What it asks of the engine: ending ops, failing communicators, handing staged ops on.
  struct Hooks {
    // An op ends (a GPU result still to go back goes first: start_copy_back).
    std::function<void(Session*, uint64_t user_data, plexus_result_t, const std::string&)> complete;
    // An op ends now: its stream released, its completion posted.
    std::function<void(Session*, uint64_t user_data, plexus_result_t, const std::string&)>
        finish_op;
    std::function<std::shared_ptr<Session>(const Session*)> shared_session;
    std::function<void(Comm&, plexus_result_t, const std::string& reason)> fail_comm;
    // Fails a multi-node communicator from the engine loop (not inside a transport callback).
    std::function<void(Comm&, const std::string& reason)> defer_failure;
    // A validated op whose input is in, to its communicator.
    std::function<void(Comm&, Contribution)> dispatch;
    // A multi-node op of `comm` has finished its network rounds.
    std::function<void(const std::shared_ptr<Comm>&)> network_done;
  };
  struct Settings {
    uint64_t max_staging_bytes = 0;    // per process (Session::staging_bytes)
    uint64_t reduce_kernel_bytes = 0;  // 0: never the daemon's own kernel
  };

  GpuStaging(Settings settings, Hooks hooks, OpWatch& watch);

  // A GPU allocation of `session`, mapped by `device` already: its region id, or why not.
  // The first registration brings the node's GPUs (`device`: opened by the control thread;
  // tests give a DeviceMemory over host memory).
  common::Result<uint32_t> register_memory(Session& session,
                                           std::shared_ptr<gpu::DeviceMemory> device,
                                           std::shared_ptr<gpu::DeviceMapping> mapping);

  // Whether `entry` (a rank's part of a collective within the node) moves where its spans
  // lie, with no host copy: a broadcast, allgather or alltoall on the copy engines (not an
  // in-place alltoall: its blocks would be overwritten while other ranks' copies read
  // them), or an allreduce on the daemon's kernel (--gpu-reduce-kernel-bytes).
  bool moves_directly(const Comm& comm, const shm::ValidatedEntry& entry);
  // What stage() did: the copies' owner, or the status and sentence the op's completion
  // carries to the client.
  struct Staged {
    gpu::StagedOp* op = nullptr;
    plexus_result_t status = PLEXUS_SUCCESS;
    std::string error;  // empty on success
  };
  // Points part.send / part.recv at host copies of the entry's GPU spans. `direct`: moved
  // later where it lies (StagedOp::direct). Fails with NO_MEMORY past the process's staging
  // budget or, if `job_capped` (it starts new work), its job's max_staging_bytes.
  Staged stage(Session& session, Contribution& part, bool direct, bool job_capped);
  // Starts copying a staged op's input in, unless an earlier op of the session has yet to
  // write its result where it reads: false then (asked again as that op moves on).
  bool start_input(Session& session, gpu::StagedOp& op);
  enum class Turn { kWait, kLeave };
  // Whether a staged op may leave its session's staging queue for its communicator
  // (`comm`, null once destroyed): its input is in, or, for a collective between nodes, has
  // started coming in; and it writes nowhere an earlier op's input is still arriving. A
  // failure says why its input copy failed: it leaves then, to be failed.
  common::Result<Turn> may_leave_staging(Session& session, const Comm* comm, gpu::StagedOp& op,
                                         const shm::ValidatedEntry& entry);
  // The direct op of a matched send or receive, or null.
  std::shared_ptr<gpu::StagedOp> direct_op(const Contribution& part) const;
  // Moves a matched local send and receive of which one or both are direct by one copy;
  // both complete when it ends.
  void start_direct_copy(Contribution send, Contribution recv);
  // A ready collective with direct parts: started on the kernel or the copy engines (true:
  // it completes later), or failed (true: its parts completed), or its direct parts staged
  // now, synchronously, for the host to run (false: the caller runs it).
  bool start_collective(Comm& comm, PendingCollective& op, uint64_t seq);
  // A finished op's result goes back to the GPU; its completion waits for it.
  void start_copy_back(Session& session, uint64_t user_data, std::shared_ptr<gpu::StagedOp> op);
  // Hands `op` the staged GPU inputs and results of its local parts (InternodeOp::
  // DeviceStaging); null when it has none, else where a failed input copy is described.
  std::shared_ptr<std::string> stage_slices(InternodeOp& op);
  // `op` of `comm` waits for GPU input of its next slice: resumed as it comes in.
  void wait_for_input(const std::shared_ptr<Comm>& comm, const std::shared_ptr<InternodeOp>& op,
                      std::shared_ptr<std::string> failure);

  // Moves on the session's ops whose copies have ended: the staged ones to their
  // communicators, the copied-back ones to their completions. True if any moved.
  bool advance(Session& session);
  // Moves on the copies, kernels and slices in flight. True if any moved.
  bool advance();
  // Copies started from now on: on the GPUs' latency streams, or not.
  void prefer_urgent_copies(bool urgent) {
    if (device_ && urgent != urgent_) device_->prefer_urgent_copies(urgent);
    urgent_ = urgent;
  }
  bool urgent_copies() const { return urgent_; }
  // New GPU work to watch: the engine looks again soon, whatever else has waited long.
  void note_new_work() { still_since_ = {}; }
  // How long a parked engine may sleep before it looks at the GPU again, while anything
  // there is awaited (`sessions_wait`: entries held for a stream, staged or copying back);
  // none otherwise.
  std::optional<std::chrono::nanoseconds> look_again_in(bool sessions_wait);

 private:
  // "" or why `session`'s GPU ops may not hold `needed` more bytes of host copies, once
  // `given_back` of theirs is released: past its process's --max-gpu-staging-bytes or (if
  // `job_capped`) its job's max_staging_bytes.
  [[nodiscard]] std::string refuse_staging(const Session& session, uint64_t needed,
                                           uint64_t given_back, bool job_capped) const;

  bool reduces_on_gpu(const Comm& comm, const shm::ValidatedEntry& entry);
  bool moves_on_copy_engines(const Comm& comm, const shm::ValidatedEntry& entry) const;
  bool has_direct_part(const PendingCollective& op) const;
  bool start_reduction(Comm& comm, PendingCollective& op, uint64_t seq);
  bool start_copies(Comm& comm, PendingCollective& op, uint64_t seq);
  // Stages a collective's direct parts now, waiting for their input, so that the host runs
  // it: true, or false with every part completed with the error naming the rank.
  bool stage_direct_parts_now(PendingCollective& op, const std::string& what);
  // Holds a collective the kernel or the copy engines have started (`run`) until it ends.
  void hand_to_gpu(PendingCollective& op, uint64_t seq,
                   std::vector<std::shared_ptr<gpu::StagedOp>> staged,
                   std::unique_ptr<gpu::CopyInFlight> run, const char* algorithm,
                   const char* run_by);
  // Whether `op` writes where an earlier op of the session is still copying its input in.
  bool overwrites_arriving_input(Session& session, const gpu::StagedOp& op);
  bool advance_direct_copies();
  bool advance_collectives();
  bool resume_input_waits();

  Settings settings_;
  Hooks hooks_;
  OpWatch& watch_;
  std::shared_ptr<gpu::DeviceMemory> device_;
  bool urgent_ = false;  // as last told to device_
  // Since when no GPU stream or copy the engine watches has moved (unset: one just did).
  std::chrono::steady_clock::time_point still_since_{};
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
  std::vector<GpuCollective> collectives_;
  // Multi-node ops whose next slice waits for a GPU input still being copied in.
  struct InputWait {
    std::weak_ptr<Comm> comm;
    std::weak_ptr<InternodeOp> op;
    std::shared_ptr<std::string> failure;  // stage_slices': set when a copy failed
  };
  std::vector<InputWait> input_waits_;
  bool warned_kernel_unavailable_ = false;
  bool warned_kernel_fallback_ = false;
};

}  // namespace plexus::daemon
