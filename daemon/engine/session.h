// One connected client process (a rank process or plexusctl). Created by the control
// thread; the engine thread owns the ring end and the communicator table. Fields are
// grouped by which thread may touch them.
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

class Session {
 public:
  Session(uint64_t id, PeerCredentials creds) : id_(id), creds_(creds) {}

  uint64_t id() const { return id_; }
  const PeerCredentials& creds() const { return creds_; }

  // Set once by the control thread before the engine learns of the session.
  SessionRole role = SessionRole::kAdmin;
  std::string process_name;
  std::string job;                            // Hello.jobName, else the process name
  std::shared_ptr<JobCounters> job_counters;  // rank sessions
  shm::Mapping pool;                          // region 0
  std::optional<shm::RingMemory> rings;
  common::UniqueFd submission_eventfd;  // client -> daemon doorbell
  common::UniqueFd completion_eventfd;  // daemon -> client wakeup

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
  // The session's validated ops in flight by user_data (how many share each).
  std::unordered_map<uint64_t, uint32_t> ops_in_flight;
  bool needs_publish = false;
  bool removed = false;

  // Any thread (statistics).
  std::atomic<uint64_t> ops_submitted{0};
  std::atomic<uint64_t> bad_entries{0};
  std::atomic<uint32_t> comm_count{0};

  // Control thread only: handle numbers for new memberships.
  uint32_t next_comm_handle = 1;

  // Engine thread (GPU regions).
  uint64_t region_bytes(uint32_t region) const {
    return region == shm::kHostPoolRegion ? pool.size() : gpu_regions.bytes(region);
  }
  std::byte* region_base(uint32_t region) const {
    return region == shm::kHostPoolRegion ? pool.data() : nullptr;
  }

  // "pid 1234 (trainer)" for error messages.
  std::string describe() const;

 private:
  uint64_t id_;
  PeerCredentials creds_;
};

}  // namespace plexus::daemon
