// The SQ/CQ ring pair of one session: creation (daemon), attachment (client), and
// the two roles' operations. Publication is store-release / load-acquire; wakeups use
// a need-wakeup flag plus an eventfd with a full fence between publishing and checking
// the flag on both sides, so a parked consumer is never missed.
#pragma once

#include <cstdint>
#include <string>

#include "shm/memfd.h"
#include "shm/ring_layout.h"

namespace plexus::shm {

// The memfd and mapping that back a ring pair, with the entry counts each side
// decided on. The daemon's copies of the sizes come from its own creation call, never
// from the (client-writable) header.
class RingMemory {
 public:
  // Daemon: a new sealed memfd laid out for the given power-of-two entry counts.
  static RingMemory create(uint32_t sq_entries, uint32_t cq_entries);
  // Client: maps a daemon-provided memfd and checks its header. Throws
  // std::runtime_error naming the mismatch.
  static RingMemory attach(common::UniqueFd fd);

  RingHeader* header() const { return reinterpret_cast<RingHeader*>(mapping_.data()); }
  SubmissionEntry* sq() const;
  CompletionEntry* cq() const;
  uint32_t sq_entries() const { return sq_entries_; }
  uint32_t cq_entries() const { return cq_entries_; }
  int fd() const { return fd_.get(); }

 private:
  common::UniqueFd fd_;
  Mapping mapping_;
  uint32_t sq_entries_ = 0;
  uint32_t cq_entries_ = 0;
  uint64_t sq_offset_ = 0;
  uint64_t cq_offset_ = 0;
};

// Wakes a consumer parked on `eventfd`. Best effort: EAGAIN (counter full) is fine.
void signal_eventfd(int eventfd);
// Clears an eventfd's counter without blocking.
void drain_eventfd(int eventfd);

// The daemon's side: consumes submissions, produces completions. Every index the
// client can write is checked; a violation makes the ring corrupt() for good.
class DaemonRingEnd {
 public:
  explicit DaemonRingEnd(const RingMemory& ring);

  // Copies out up to `max` new submissions (copy first, validate later: TOCTOU).
  // Returns how many; 0 when empty or corrupt.
  uint32_t consume(SubmissionEntry* out, uint32_t max);
  // Free completion slots as far as the client's CQ head says; 0 if corrupt.
  uint32_t completion_space();
  // Writes one completion into the next slot (caller checked completion_space()).
  void post(const CompletionEntry& entry);
  // Publishes posted completions; returns true when the client asked to be woken.
  bool publish();
  // Park protocol: set need-wakeup, then re-check. Returns true if work arrived
  // meanwhile (the flag is then cleared and the caller must not park).
  bool prepare_park();
  // Sets need-wakeup without the re-check: for a session held back by a full completion
  // queue, whose pending submissions are not work until its client frees slots.
  void announce_park();
  void finish_park();

  bool corrupt() const { return !corruption_.empty(); }
  const std::string& corruption() const { return corruption_; }

 private:
  RingHeader* header_;
  SubmissionEntry* sq_;
  CompletionEntry* cq_;
  uint32_t sq_mask_;
  uint32_t cq_mask_;
  uint32_t sq_entries_;
  uint32_t cq_entries_;
  uint32_t sq_head_ = 0;  // authoritative; only ever written out
  uint32_t cq_tail_ = 0;  // authoritative; only ever written out
  uint32_t cq_published_ = 0;
  std::string corruption_;
};

// The client's side: produces submissions, consumes completions. Not thread-safe;
// the client library serialises callers.
class ClientRingEnd {
 public:
  explicit ClientRingEnd(const RingMemory& ring);

  // Free SQ slots.
  uint32_t submission_space() const;
  // Writes one entry into the next slot (caller checked submission_space()).
  void stage(const SubmissionEntry& entry);
  // Publishes staged entries; returns true when the daemon asked to be woken.
  bool publish();
  // Takes one completion if any.
  bool poll_completion(CompletionEntry* out);
  bool prepare_park();  // as DaemonRingEnd::prepare_park, for the CQ
  void finish_park();
  // True when the daemon is parked while submissions of ours wait in the SQ: after
  // taking completions, the client must wake it (it may have been held back by a full CQ).
  bool daemon_parked_with_backlog() const;

 private:
  RingHeader* header_;
  SubmissionEntry* sq_;
  CompletionEntry* cq_;
  uint32_t sq_mask_;
  uint32_t cq_mask_;
  uint32_t sq_entries_;
  uint32_t sq_tail_ = 0;
  uint32_t sq_published_ = 0;
  uint32_t cq_head_ = 0;
};

}  // namespace plexus::shm
