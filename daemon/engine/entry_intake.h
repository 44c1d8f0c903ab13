// Submissions: entries consumed from a session's ring, copied out and validated, and handed
// to their communicator (after their GPU input, where they have one) for CommMatcher; a
// stream-ordered entry is held until the client's GPU stream reaches it. Refusals go back
// as completions naming the op and rank. Owns nothing but its references and the rule for
// what an entry may start; the sessions' queues it fills are theirs. Engine thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "daemon/engine/comm_matcher.h"
#include "daemon/engine/completions.h"
#include "daemon/engine/gpu_staging.h"
#include "daemon/engine/op_watch.h"
#include "daemon/engine/session.h"
#include "shm/ring_layout.h"

namespace plexus::daemon {

class EntryIntake {
 public:
  static constexpr uint32_t kBatchEntries = 64;  // entries consumed from a ring at a time

  struct Hooks {
    // The session broke the ring protocol: the engine fails, drops and closes it.
    std::function<void(Session& session, const std::string& reason)> kill_session;
  };

  EntryIntake(OpWatch& watch, Completions& completions, CommMatcher& matcher, GpuStaging& gpu,
              Hooks hooks);

  // Consumes and handles the session's new entries, through `batch` (kBatchEntries long),
  // no more than its completion queue has room for. Returns whether it consumed any.
  bool poll(Session& session, std::vector<shm::SubmissionEntry>& batch);
  // The session's entries held for its stream that the stream has reached, handled in
  // order. Returns whether any was.
  bool release_held(Session& session);

 private:
  // Handled now, or held until its stream reaches it.
  void accept(Session& session, const shm::SubmissionEntry& raw);
  void handle(Session& session, const shm::SubmissionEntry& raw);

  OpWatch& watch_;
  Completions& completions_;
  CommMatcher& matcher_;
  GpuStaging& gpu_;
  Hooks hooks_;
};

}  // namespace plexus::daemon
