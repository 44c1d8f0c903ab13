// The sending half of a reliable channel: numbers every frame, keeps it (header, payload
// span, the caller's token) until the peer's cumulative acknowledgement covers it, and
// knows which path each unacknowledged frame went on, so that when a path fails its frames
// can go again on the others. Frames wait (in sequence order) while no path can take them
// or while kChannelWindowFrames are unacknowledged. No I/O here: ReliableChannel decides
// where a frame goes and queues it.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "transports/wire/data_frame.h"

namespace plexus::transports {

inline constexpr uint32_t kNoPath = UINT32_MAX;

class ChannelSender {
 public:
  struct Frame {
    wire::DataFrameHeader header;  // channel_seq set
    std::span<const std::byte> payload;
    uint64_t token = 0;
    uint32_t path = kNoPath;  // where its latest copy was queued
    uint32_t sends = 0;       // how many times it was queued
    bool latency = false;     // of the latency class: goes on a latency path where one is up
    bool released = false;    // acknowledged selectively: the peer has it (kept until the
                              // cumulative point passes, never sent again)
  };

  // Numbers a new frame and makes it wait for a path; returns its sequence number.
  uint64_t add(wire::DataFrameHeader header, std::span<const std::byte> payload, uint64_t token,
               bool latency = false);

  // The next waiting frame that the window allows (nullptr when none): the oldest, or the
  // oldest of the latency class (or not) with `latency` set, so that one class's frames
  // waiting for room on their own paths do not hold up the other's. The caller queues it on
  // a path and calls assigned().
  Frame* next_waiting();
  Frame* next_waiting(bool latency);
  void assigned(Frame& frame, uint32_t path);

  struct Released {
    uint64_t token = 0;
    uint32_t path = kNoPath;  // where its latest copy went
    bool operator==(const Released&) const = default;
  };
  // The peer has every frame up to `cumulative`. Appends the frames now released, in
  // sequence order. Returns "" or why the acknowledgement is impossible (it covers frames
  // never sent).
  std::string acknowledge(uint64_t cumulative, std::vector<Released>* released);
  // The peer has frames first..last too (a selective acknowledgement): appends those not
  // released before. Returns "" or why it is impossible (frames never sent).
  std::string acknowledge_selectively(uint64_t first, uint64_t last,
                                      std::vector<Released>* released);

  // Every unacknowledged frame whose latest copy went on `path` waits again (for another
  // path). Returns how many bytes of payload that is.
  uint64_t path_failed(uint32_t path);

  uint64_t acknowledged() const { return acked_; }
  size_t unacknowledged() const { return frames_.size(); }
  size_t waiting() const { return waiting_[0].size() + waiting_[1].size(); }
  // Whether the window allows no new frame out (one numbered now would wait).
  bool window_full() const;

 private:
  Frame* at(uint64_t seq);

  uint64_t next_seq_ = 1;
  uint64_t acked_ = 0;
  std::deque<Frame> frames_;  // seqs acked_ + 1 .. next_seq_ - 1, in order
  // Seqs with no path, ascending: [1] the latency class's frames, [0] the others.
  std::array<std::deque<uint64_t>, 2> waiting_;
};

}  // namespace plexus::transports
