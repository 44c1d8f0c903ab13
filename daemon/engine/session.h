// One connected client process (a rank process or plexusctl). Made by the control thread
// once its hello is accepted, with what it said and what it shares (immutable from then
// on); the engine thread owns the rest (the ring end, the communicator table, its ops in
// flight), which the control thread cannot write: it keeps only a const view.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "daemon/engine/comm.h"
#include "daemon/engine/job_metrics.h"
#include "daemon/gpu/gpu_regions.h"
#include "daemon/gpu/staged_op.h"
#include "shm/memfd.h"
#include "shm/ring.h"
#include "transports/path/sendable_memory.h"

namespace plexus::daemon {

class Comm;

enum class SessionRole { kRank, kAdmin };

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// A rank's membership seen from the session: which communicator and rank a
// session-local handle names.
struct CommMembership {
  std::shared_ptr<Comm> comm;
  int rank = 0;
};

// A job name as it may appear in reports and metric labels: at most 64 characters of
// [A-Za-z0-9_.:-], others replaced by '_'; "unnamed" when empty.
std::string job_label(std::string_view name);

// "pid 1234 (trainer)" for error messages ("pid 1234" with no name).
std::string describe_process(pid_t pid, const std::string& process_name);

class Session {
 public:
  // Who the client said it is (its hello).
  struct Identity {
    SessionRole role = SessionRole::kAdmin;
    std::string process_name;
    std::string job;                            // Hello.jobName, else the process name
    std::shared_ptr<JobCounters> job_counters;  // rank sessions
  };
  // What a rank session shares with its client (none for an admin session).
  struct Channels {
    shm::Mapping pool;  // region 0
    // The pool offered to transports that send from it directly (RDMA): declared after it,
    // so withdrawn before it is unmapped.
    transports::SendableMemory::Announcement pool_announcement;
    std::optional<shm::RingMemory> rings;
    common::UniqueFd submission_eventfd;  // client -> daemon doorbell
    common::UniqueFd completion_eventfd;  // daemon -> client wakeup
  };

  // Made by the control thread once the hello is accepted, and immutable from then on but
  // for the engine's fields below: the control thread keeps only a const view of it, and
  // the engine gets it through its queue (Engine::add_session).
  Session(uint64_t id, PeerCredentials creds, Identity identity, Channels channels = {})
      : id_(id), creds_(creds), identity_(std::move(identity)), channels_(std::move(channels)) {}

  uint64_t id() const { return id_; }
  const PeerCredentials& creds() const { return creds_; }
  SessionRole role() const { return identity_.role; }
  const std::string& process_name() const { return identity_.process_name; }
  const std::string& job() const { return identity_.job; }
  const std::shared_ptr<JobCounters>& job_counters() const { return identity_.job_counters; }
  // Its job's class as applied now (bulk for a session of no job).
  transports::TrafficClass traffic_class() const {
    return job_counters() ? job_counters()->traffic_class.load(std::memory_order_relaxed)
                          : transports::TrafficClass::kBulk;
  }
  const shm::Mapping& pool() const { return channels_.pool; }
  const std::optional<shm::RingMemory>& rings() const { return channels_.rings; }
  int submission_eventfd() const { return channels_.submission_eventfd.get(); }
  int completion_eventfd() const { return channels_.completion_eventfd.get(); }

  // Engine thread only.
  std::optional<shm::DaemonRingEnd> ring_end;
  std::unordered_map<uint32_t, CommMembership> comms;  // handle -> membership
  uint32_t inflight = 0;        // consumed entries whose completion is not yet posted
  gpu::GpuRegions gpu_regions;  // regions 1.. (registered GPU allocations)
  // Host copies of GPU buffers of ops in flight, by the entry's user_data (a client that
  // reuses user_data while both are in flight only confuses its own results). Shared:
  // a send to another node holds its op's host copy until the link has written it.
  std::unordered_multimap<uint64_t, std::shared_ptr<gpu::StagedOp>> staged_ops;
  // Ops whose GPU input is still being copied in, in submission order, and the session's
  // ops after them: a rank's ops must reach its communicators in the order it called them.
  std::deque<Contribution> staging;
  // Ops whose result is being copied back to a GPU: their completion waits for it.
  struct CopyingBack {
    uint64_t user_data;
    std::shared_ptr<gpu::StagedOp> op;
  };
  std::vector<CopyingBack> copying_back;
  uint64_t staged_count = 0;  // StagedOp::order of the next
  // Host bytes its staged ops hold (Config::max_gpu_staging_bytes bounds it).
  std::shared_ptr<uint64_t> staging_bytes = std::make_shared<uint64_t>(0);
  // What its staged ops are charged to: its own total and its job's (JobCaps).
  gpu::StagingBudget staging_budget() const {
    return {staging_bytes, job_counters() ? job_counters()->staging_bytes : nullptr};
  }
  // Entries held until their GPU stream reaches them (StreamFlags::ready), in submission
  // order: the entries after one wait behind it, since a communicator's ops are matched in
  // the order they were called.
  std::deque<shm::SubmissionEntry> held_for_stream;
  // Stream-ordered ops in flight: user_data -> where to write `done` when they end.
  struct StreamRelease {
    uint64_t flags_offset;
    uint32_t ticket;
  };
  std::unordered_multimap<uint64_t, StreamRelease> stream_releases;
  // The session's validated ops in flight by user_data: how many share it, and the bytes
  // they hold against their job's in-flight cap (job_admission.h).
  struct OpsInFlight {
    uint32_t count = 0;
    uint64_t bytes = 0;
  };
  std::unordered_map<uint64_t, OpsInFlight> ops_in_flight;
  // Recvs from any source that took a message, by user_data: the rank it came from, for
  // their completion (CompletionEntry::source).
  std::unordered_map<uint64_t, int32_t> any_source_matches;
  uint64_t inflight_bytes() const {
    uint64_t total = 0;
    for (const auto& [user_data, ops] : ops_in_flight) total += ops.bytes;
    return total;
  }
  bool needs_publish = false;
  bool removed = false;

  // Written by the engine thread alone, read from any (statistics).
  std::atomic<uint64_t> ops_submitted{0};
  std::atomic<uint64_t> bad_entries{0};
  std::atomic<uint32_t> comm_count{0};  // comms.size()

  // Engine thread (GPU regions).
  uint64_t region_bytes(uint32_t region) const {
    return region == shm::kHostPoolRegion ? pool().size() : gpu_regions.bytes(region);
  }
  std::byte* region_base(uint32_t region) const {
    return region == shm::kHostPoolRegion ? pool().data() : nullptr;
  }

  // "pid 1234 (trainer)" for error messages.
  std::string describe() const;

 private:
  const uint64_t id_;
  const PeerCredentials creds_;
  const Identity identity_;
  const Channels channels_;
};

}  // namespace plexus::daemon
