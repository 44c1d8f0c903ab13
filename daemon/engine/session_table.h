// The sessions the engine serves, and the order its loop polls them in: the latency-class
// jobs' sessions first, in arrival order within a class, sorted again when a session comes
// or goes or a job's policy changes. Engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "daemon/engine/session.h"

namespace plexus::daemon {

class SessionTable {
 public:
  using List = std::vector<std::shared_ptr<Session>>;

  static bool is_latency(const Session& session) {
    return session.traffic_class() == transports::TrafficClass::kLatency;
  }

  Session& add(std::shared_ptr<Session> session);
  // Drops `session` from the table (the order keeps it until it is sorted again).
  void erase(const Session* session);
  Session* find(uint64_t id) const;
  // The table's owning pointer to `session`, or null when it is no longer served.
  std::shared_ptr<Session> shared(const Session* session) const;
  std::shared_ptr<Session> shared(uint64_t id) const;
  // Arrival order.
  const List& all() const { return sessions_; }
  // The polling order, sorted first when a session came or went or `jobs_version` (the
  // jobs' policies' version) moved since the last sort.
  const List& by_class(uint64_t jobs_version);
  // The polling order as last sorted (between slices of a cut op: no sort under the loop).
  const List& by_class() const { return by_class_; }
  // Whether a session waits on GPU work that rings no doorbell (entries held for a stream,
  // input being copied in, results going back).
  bool wait_on_gpu() const;

 private:
  List sessions_;
  List by_class_;
  uint64_t order_version_ = 0;
  bool order_dirty_ = false;
};

}  // namespace plexus::daemon
