// Duplicate detection and the cumulative point over a bitmap window.
#include "transports/channel/channel_receiver.h"

namespace plexus::transports {

ChannelReceiver::ChannelReceiver() : bits_(kChannelWindowFrames / 64, 0) {}

bool ChannelReceiver::has(uint64_t seq) const {
  const uint64_t slot = seq % kChannelWindowFrames;
  return (bits_[slot / 64] >> (slot % 64)) & 1u;
}

void ChannelReceiver::set(uint64_t seq, bool value) {
  const uint64_t slot = seq % kChannelWindowFrames;
  const uint64_t mask = uint64_t{1} << (slot % 64);
  if (value) {
    bits_[slot / 64] |= mask;
  } else {
    bits_[slot / 64] &= ~mask;
  }
}

ChannelReceiver::Verdict ChannelReceiver::classify(uint64_t seq) const {
  if (seq == 0 || seq > cumulative_ + kChannelWindowFrames) return Verdict::kOutOfWindow;
  if (seq <= cumulative_ || has(seq)) return Verdict::kDuplicate;
  return Verdict::kNew;
}

uint64_t ChannelReceiver::take_ack(Range* selective) {
  acked_ = cumulative_;
  if (selective == nullptr) return acked_;  // what is due stays due
  *selective = {};
  if (selective_ > cumulative_ && has(selective_)) {
    Range run{selective_, selective_};
    while (run.first - 1 > cumulative_ && selective_ - run.first < kMaxSelectiveRun &&
           has(run.first - 1)) {
      --run.first;
    }
    while (run.last - selective_ < kMaxSelectiveRun && has(run.last + 1)) ++run.last;
    *selective = run;
    if (selective_low_ > cumulative_ && selective_low_ < run.first && has(selective_low_)) {
      selective_ = selective_low_;  // one more run, on the next acknowledgement
      return acked_;
    }
  }
  selective_ = 0;
  selective_low_ = 0;
  return acked_;
}

bool ChannelReceiver::record(uint64_t seq) {
  if (classify(seq) != Verdict::kNew) return false;
  set(seq, true);
  const uint64_t before = cumulative_;
  // Slide: the bits below the new cumulative point are cleared for reuse by later seqs.
  while (has(cumulative_ + 1)) {
    ++cumulative_;
    set(cumulative_, false);
  }
  return cumulative_ != before;
}

}  // namespace plexus::transports
