// The receiving half of a reliable channel (docs/architecture.md, sections 3 and 4): which
// channel sequence numbers have arrived, so that a frame re-sent after a path failed is
// dropped when its first copy got through, and the cumulative acknowledgement to send back.
// Sequence numbers start at 1; a window of kChannelWindowFrames above the cumulative point
// is tracked in a bitmap (the sender never has more than that many frames unacknowledged).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace plexus::transports {

inline constexpr uint64_t kChannelWindowFrames = 1u << 16;

class ChannelReceiver {
 public:
  enum class Verdict {
    kNew,         // not received yet: deliver it, then record()
    kDuplicate,   // already received: drop it
    kOutOfWindow  // beyond what the sender may have in flight: a protocol violation
  };

  ChannelReceiver();

  Verdict classify(uint64_t seq) const;
  // Marks `seq` received (it must be kNew). Returns whether the cumulative point moved.
  bool record(uint64_t seq);

  // Every frame up to and including this one has been received (0: none yet).
  uint64_t cumulative() const { return cumulative_; }
  // `seq` (recorded) is to be acknowledged on its own, not only once the cumulative point
  // passes it: a latency-class frame, whose sender must not wait for the bulk frames
  // numbered before it (they travel on other connections).
  void acknowledge_selectively(uint64_t seq) {
    if (seq <= cumulative_) return;
    selective_ = std::max(selective_, seq);
    selective_low_ = selective_low_ == 0 ? seq : std::min(selective_low_, seq);
  }
  // Whether cumulative() has moved, or a selective acknowledgement waits, since the last
  // take_ack().
  bool ack_due() const { return cumulative_ != acked_ || selective_ > cumulative_; }
  struct Range {
    uint64_t first = 0;  // 0: none
    uint64_t last = 0;
  };
  // The cumulative point, and the received run around the latest frame given to
  // acknowledge_selectively (above the cumulative point; kMaxSelectiveRun frames at most
  // each way), which the sender may release too. When the earliest such frame since the
  // last take lies outside that run, it stays due: the next take reports its run. Without
  // `selective`, what is due stays due.
  uint64_t take_ack(Range* selective = nullptr);
  static constexpr uint64_t kMaxSelectiveRun = 256;

 private:
  bool has(uint64_t seq) const;
  void set(uint64_t seq, bool value);

  uint64_t cumulative_ = 0;
  uint64_t acked_ = 0;
  uint64_t selective_ = 0;      // acknowledge_selectively's latest, until taken
  uint64_t selective_low_ = 0;  // and its earliest
  std::vector<uint64_t> bits_;  // seq % kChannelWindowFrames, for seqs above cumulative_
};

}  // namespace plexus::transports
