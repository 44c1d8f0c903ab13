// The simulation's clock: timed events, earliest first, equal times in the order they were
// posted (so a run is deterministic). Owns its events; one simulation's thread.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

namespace plexus::sim {

struct Event {
  double time = 0;
  uint64_t seq = 0;
  uint32_t kind = 0;
  uint32_t id = 0;
  uint32_t version = 0;  // a flow's rate generation: older completions are stale
};

class EventQueue {
 public:
  void push(double time, uint32_t kind, uint32_t id, uint32_t version = 0) {
    heap_.push(Event{time, next_seq_++, kind, id, version});
  }
  bool empty() const { return heap_.empty(); }
  Event pop() {
    Event e = heap_.top();
    heap_.pop();
    return e;
  }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.time != b.time ? a.time > b.time : a.seq > b.seq;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace plexus::sim
