// Control messages to one peer daemon that survive the connection carrying them: each is
// numbered and kept until the peer acknowledges it, so that when that connection's NIC
// fails the messages go again on a new connection over another (as data frames do on the
// reliable channel), and the receiver drops what it already had. Pure bookkeeping, no I/O:
// ControlChannels writes the frames it returns, and tests drive it directly.
//
// Each side's messages form a stream with a random id, drawn when the side first talks to
// the peer (again after it gave the peer up as lost): a receiver that meets a new stream
// takes it up where it stands, so that one side forgetting the peer (while the other did
// not) cannot stall both.
//
// A frame is the common length prefix, then four 64-bit words in host byte order (as the
// prefix: plexusd peers share an architecture, common/frame_codec.h): this side's stream id,
// the message's number in it (0: an acknowledgement alone), the peer's stream id being
// acknowledged, and the highest number of it delivered in order; then the message's Cap'n
// Proto words. Number 0 is an acknowledgement alone; kByeSeq says the sender closes the
// connection because both ends are quiet (ControlChannels' idle close), and carries the
// acknowledgement too.
#pragma once

#include <capnp/message.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace plexus::daemon {

class ControlSequence {
 public:
  using Clock = std::chrono::steady_clock;

  // Numbers `message`, keeps it until acknowledged, and returns its frame.
  // `stream`: this side's stream id (random, non-zero).
  explicit ControlSequence(uint64_t stream) : stream_(stream) {}

  std::vector<std::byte> push(capnp::MessageBuilder& message, Clock::time_point now);
  // Every unacknowledged message's frame, oldest first: what a new connection carries
  // before anything else. Their wait for an acknowledgement starts again at `now`.
  std::vector<std::byte> resend(Clock::time_point now);

  // A frame's words as FrameDecoder gives them (the length prefix taken off). Returns the
  // message to deliver when it is the next in order (or the first of a stream this side has
  // not met: the peer's oldest unacknowledged, as every connection starts with); nothing for
  // an acknowledgement alone, a message already delivered, or one of a stream the peer
  // left. An acknowledgement of an earlier stream of this side is ignored. A malformed
  // frame, a gap in the numbers, or an acknowledgement of a message never sent is a failure
  // (the connection is then failed; the peer sends again on the next).
  using Delivery = std::optional<kj::Array<capnp::word>>;
  common::Result<Delivery> receive(kj::ArrayPtr<const capnp::word> words, Clock::time_point now);
  // Whether messages were delivered since the last frame this side wrote (which carries the
  // acknowledgement), and the frame that acknowledges them alone.
  // A message received again is acknowledged again: the acknowledgement sent before may
  // have gone with the connection that failed, and the peer waits for it.
  bool ack_due() const {
    return again_ || delivered_ != ack_sent_ || peer_stream_ != ack_sent_stream_;
  }
  std::vector<std::byte> ack_frame();
  // The frame that says this side closes the connection it goes on, everything it sent
  // acknowledged and nothing of the peer's unacknowledged: the peer closes its end without
  // taking it for a failure.
  std::vector<std::byte> bye_frame();
  // Whether the last frame received was the peer's bye.
  bool bye() const { return bye_; }
  static constexpr uint64_t kByeSeq = ~uint64_t{0};

  size_t unacknowledged() const { return unacked_.size(); }
  // Since when the oldest unacknowledged message has waited (sent, resent, or the last
  // acknowledgement that took others); nothing when none waits.
  std::optional<Clock::time_point> waiting_since() const;
  uint64_t delivered() const { return delivered_; }

  // Where the peer's stream stands on receipt: kept when this side gives the peer up, and
  // handed to the sequence it starts with the peer again, so that a message delivered but
  // not yet acknowledged when the record went is not delivered a second time if the peer
  // (which did not give up) sends it again.
  struct Received {
    uint64_t stream = 0;
    uint64_t delivered = 0;
  };
  Received received() const { return {peer_stream_, delivered_}; }
  void resume(Received at) {
    peer_stream_ = at.stream;
    delivered_ = at.delivered;
  }

 private:
  std::vector<std::byte> frame(uint64_t seq, const std::vector<std::byte>& body);

  struct Unacked {
    uint64_t seq = 0;
    std::vector<std::byte> body;  // the message's words
  };
  uint64_t stream_;
  uint64_t peer_stream_ = 0;              // the peer's stream being delivered (0: none met yet)
  std::deque<uint64_t> retired_streams_;  // the peer's earlier ones: their late frames dropped
  std::deque<Unacked> unacked_;
  uint64_t next_seq_ = 1;
  uint64_t delivered_ = 0;  // highest number received and delivered, in order
  uint64_t ack_sent_ = 0;   // the acknowledgement the last written frame carried
  uint64_t ack_sent_stream_ = 0;
  bool again_ = false;  // a message already delivered came again since the last frame
  bool bye_ = false;    // the last frame received was a bye
  Clock::time_point waiting_since_{};
};

}  // namespace plexus::daemon
