// The receiving side of a reliable channel (ReliableChannel; docs/architecture.md, section
// 4): delivers every numbered frame once (ChannelReceiver drops the copies sent again after
// a path failed, and refuses a frame outside the window), holds the fenced ones (notices,
// zero-length frames) until every frame numbered before them is in, as on one TCP stream,
// and keeps what the acknowledgement sent back says (the cumulative point, and a selective
// run for frames that came on a latency path).
// Owns the receiver and the held frames. Called on the channel's thread (its owner's, as it
// reads its paths), through ReliableChannel.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "transports/channel/channel_counters.h"
#include "transports/channel/channel_receiver.h"
#include "transports/channel/frame_path.h"
#include "transports/wire/data_frame.h"

namespace plexus::transports {

class ChannelDelivery {
 public:
  struct Hooks {
    // As ReliableChannel::Handler's of the same names: on_frame takes a frame delivered once;
    // place (optional) and on_placed a large one read straight into place.
    std::function<std::string(const wire::DataFrameHeader&, std::span<const std::byte>)> on_frame;
    std::function<Placement(const wire::DataFrameHeader&)> place;
    std::function<std::string(const wire::DataFrameHeader&)> on_placed;
    // Frame `seq` is in: a copy of it still being placed on another path than `except_path`
    // writes no more (ChannelPaths::abandon_other_copies).
    std::function<void(uint64_t seq, uint32_t except_path)> abandon_other_copies;
  };

  // `counters` (the channel's) outlives this; duplicates dropped are added to it.
  ChannelDelivery(Hooks hooks, ChannelCounters& counters);

  // A frame (not an acknowledgement or heartbeat) from a path; `latency_path`: the latency
  // class's, whose frames are acknowledged on their own. Returns "" or why it is
  // unacceptable.
  std::string receive(const wire::DataFrameHeader& header, std::span<const std::byte> payload,
                      bool latency_path);
  // Where a large frame may be read to ({} for a duplicate or a fenced frame, which go
  // through receive()).
  Placement place(const wire::DataFrameHeader& header);
  // A placed frame was read in full on `path`.
  std::string placed(const wire::DataFrameHeader& header, uint32_t path, bool latency_path);
  // A placed frame its owner abandoned came in whole on `path`: received, delivered nowhere.
  std::string discarded(const wire::DataFrameHeader& header, uint32_t path, bool latency_path);

  // As ChannelReceiver's: whether an acknowledgement is due, and what it says.
  bool ack_due() const { return receiver_.ack_due(); }
  uint64_t take_ack(ChannelReceiver::Range* selective) { return receiver_.take_ack(selective); }

 private:
  // Delivered only after every frame numbered before them (of any flow).
  static bool fenced(const wire::DataFrameHeader& header);
  std::string deliver(const wire::DataFrameHeader& header, std::span<const std::byte> payload);
  // Frame `seq` came in whole on `path` (placed or discarded): counted, its other copies
  // abandoned, and the fenced frames it held back delivered.
  std::string received_in_place(uint64_t seq, uint32_t path, bool latency_path);
  // Fenced frames whose predecessors have all arrived now.
  std::string deliver_fenced();

  Hooks hooks_;
  ChannelCounters& counters_;
  ChannelReceiver receiver_;
  struct HeldFrame {
    wire::DataFrameHeader header;
    std::vector<std::byte> payload;
  };
  std::map<uint64_t, HeldFrame> fenced_;  // by channel_seq: waiting for earlier frames
};

}  // namespace plexus::transports
