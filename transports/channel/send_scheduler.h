// The order in which a channel's new frames leave, when several flows (jobs) share it:
// strict priority between traffic classes, except that a lower class with frames waiting
// is owed a floor share (every byte a higher class sends earns it floor / (1 - floor) bytes
// of credit, spent first), and deficit round robin by weight between the flows of a class
// (each turn a flow may send quantum x weight bytes, carrying over what it did not use, so
// frames of any size share by bytes). A flow's own frames leave in the order queued.
// Work-conserving: whenever a frame waits, one is chosen. The channel takes a frame only
// when a path has room for it, so the choice is made as late as possible.
//
// Frames are counted by payload plus header, so frames without payload (markers, notices)
// cost something and cannot run ahead forever. Single-threaded.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "transports/channel/flow_policy.h"
#include "transports/wire/data_frame.h"

namespace plexus::transports {

class SendScheduler {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  struct Settings {
    // Bytes per unit of weight per turn. Smaller is fairer over short spans, larger takes
    // fewer turns; a frame larger than a turn waits for turns to add up.
    uint32_t quantum_bytes = 64 << 10;
    // By class: the share of the bytes sent that a class with frames waiting gets at least
    // while classes above it are busy (the top class needs none).
    std::array<double, kTrafficClasses> floor = {0, 0.10, 0.05};
  };

  struct Frame {
    wire::DataFrameHeader header;
    std::span<const std::byte> payload;
    uint64_t token = 0;
    uint32_t flow = 0;
    TimePoint queued_at{};
  };

  // A set of classes, bit c for class c: peek and pop may be held to some (a channel whose
  // classes travel on paths of their own lets one class go while another has no room).
  using ClassMask = uint8_t;
  static constexpr ClassMask kAllClasses = (1u << kTrafficClasses) - 1;
  static constexpr ClassMask mask_of(TrafficClass c) {
    return static_cast<ClassMask>(1u << static_cast<unsigned>(c));
  }

  // `policies` outlives the scheduler; it may change between calls.
  SendScheduler(Settings settings, const FlowPolicies* policies);

  void push(Frame frame);
  // The frame of a class in `classes` to send next (nullptr when none wait), chosen as if
  // only those classes had frames: stays the same until pop() or push().
  const Frame* peek(ClassMask classes = kAllClasses);
  // Removes and returns what peek(classes) returns; only when one waits.
  Frame pop(ClassMask classes = kAllClasses);

  bool empty() const { return frames_ == 0; }
  size_t size() const { return frames_; }
  uint64_t bytes() const { return bytes_; }
  // A class's credit toward its floor (tests).
  double credit(TrafficClass c) const { return classes_[static_cast<size_t>(c)].credit; }

 private:
  struct Flow {
    std::deque<Frame> frames;
    int64_t deficit = 0;
    bool credited = false;  // got this turn's quantum
  };
  struct Class {
    std::deque<uint32_t> round;  // flows with frames, the one whose turn it is first
    double credit = 0;           // bytes owed toward the floor
  };
  struct Choice {
    bool valid = false;
    ClassMask classes = kAllClasses;  // what it was chosen among
    size_t cls = 0;
    uint32_t flow = 0;
    bool by_credit = false;
  };

  static uint64_t cost(const Frame& frame) {
    return frame.payload.size() + wire::kDataFrameHeaderBytes;
  }
  // Moves flows whose class changed (the policies did) into their new class's round.
  void refile();
  // The flow of class `c` whose frame goes next by deficit round robin (turns given here).
  uint32_t turn_in(size_t c);
  Choice choose(ClassMask classes);
  // Makes choice_ the one for `classes` (nullptr-free: only when such a frame waits).
  bool ensure_choice(ClassMask classes);

  Settings settings_;
  const FlowPolicies* policies_;
  uint64_t policies_seen_ = 0;  // FlowPolicies::version() at the last refile
  std::vector<Flow> flows_;     // by flow id
  std::array<Class, kTrafficClasses> classes_{};
  Choice choice_;
  size_t frames_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace plexus::transports
