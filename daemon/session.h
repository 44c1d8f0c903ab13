// One connected client process (a rank process or plexusctl). Created by the control
// thread; the engine thread owns the ring end and the communicator table. Fields are
// grouped by which thread may touch them.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "daemon/job_metrics.h"
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
  shm::UniqueFd submission_eventfd;  // client -> daemon doorbell
  shm::UniqueFd completion_eventfd;  // daemon -> client wakeup

  // Engine thread only.
  std::optional<shm::DaemonRingEnd> ring_end;
  std::unordered_map<uint32_t, CommMembership> comms;  // handle -> membership
  uint32_t inflight = 0;  // consumed entries whose completion is not yet posted
  bool needs_publish = false;
  bool removed = false;

  // Any thread (statistics).
  std::atomic<uint64_t> ops_submitted{0};
  std::atomic<uint64_t> bad_entries{0};
  std::atomic<uint32_t> comm_count{0};

  // Control thread only: handle numbers for new memberships.
  uint32_t next_comm_handle = 1;

  uint64_t region_bytes(uint32_t region) const {
    return region == shm::kHostPoolRegion ? pool.size() : 0;
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
