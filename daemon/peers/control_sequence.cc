#include "daemon/peers/control_sequence.h"

#include <capnp/serialize.h>

#include <algorithm>
#include <cstring>

#include "common/frame_codec.h"

namespace plexus::daemon {

namespace {
// Stream, number, acknowledged stream, acknowledgement.
constexpr size_t kHeaderWords = 4;
constexpr size_t kRetiredStreams = 4;
}  // namespace

std::vector<std::byte> ControlSequence::frame(uint64_t seq, const std::vector<std::byte>& body) {
  const uint64_t header[kHeaderWords] = {stream_, seq, peer_stream_, delivered_};
  const auto length = static_cast<uint32_t>(sizeof header + body.size());
  std::vector<std::byte> out(common::kFrameLengthBytes + length);
  std::memcpy(out.data(), &length, common::kFrameLengthBytes);
  std::memcpy(out.data() + common::kFrameLengthBytes, header, sizeof header);
  if (!body.empty())
    std::memcpy(out.data() + common::kFrameLengthBytes + sizeof header, body.data(), body.size());
  ack_sent_ = delivered_;
  ack_sent_stream_ = peer_stream_;
  again_ = false;
  return out;
}

std::vector<std::byte> ControlSequence::push(capnp::MessageBuilder& message,
                                             Clock::time_point now) {
  kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  Unacked entry{next_seq_++, std::vector<std::byte>(bytes.size())};
  std::memcpy(entry.body.data(), bytes.begin(), bytes.size());
  if (unacked_.empty()) waiting_since_ = now;
  unacked_.push_back(std::move(entry));
  return frame(unacked_.back().seq, unacked_.back().body);
}

std::vector<std::byte> ControlSequence::resend(Clock::time_point now) {
  std::vector<std::byte> out;
  for (const Unacked& entry : unacked_) {
    std::vector<std::byte> one = frame(entry.seq, entry.body);
    out.insert(out.end(), one.begin(), one.end());
  }
  waiting_since_ = now;
  return out;
}

std::vector<std::byte> ControlSequence::ack_frame() { return frame(0, {}); }

std::vector<std::byte> ControlSequence::bye_frame() { return frame(kByeSeq, {}); }

std::optional<ControlSequence::Clock::time_point> ControlSequence::waiting_since() const {
  if (unacked_.empty()) return std::nullopt;
  return waiting_since_;
}

common::Result<ControlSequence::Delivery> ControlSequence::receive(
    kj::ArrayPtr<const capnp::word> words, Clock::time_point now) {
  bye_ = false;
  if (words.size() < kHeaderWords) {
    return common::fail("a control frame of " + std::to_string(words.size() * sizeof(capnp::word)) +
                        " bytes, shorter than its " + std::to_string(kHeaderWords * 8) +
                        "-byte header");
  }
  uint64_t header[kHeaderWords];
  std::memcpy(header, words.begin(), sizeof header);
  const uint64_t stream = header[0];
  const uint64_t seq = header[1];
  const uint64_t acked_stream = header[2];
  // An acknowledgement of another stream (one this side dropped) says nothing of this one.
  const uint64_t ack = acked_stream == stream_ ? header[3] : 0;
  if (stream == 0) return common::fail("a control frame with no stream id");
  if (ack >= next_seq_) {
    return common::fail("the peer acknowledged control message " + std::to_string(ack) +
                        ", but only " + std::to_string(next_seq_ - 1) + " were sent");
  }
  bool took = false;
  while (!unacked_.empty() && unacked_.front().seq <= ack) {
    unacked_.pop_front();
    took = true;
  }
  if (took) waiting_since_ = now;  // the peer is answering: the rest wait from here
  const size_t body_words = words.size() - kHeaderWords;
  if (seq == 0 || seq == kByeSeq) {
    if (body_words != 0) return common::fail("an acknowledgement that carries a message");
    bye_ = seq == kByeSeq;
    return Delivery{};
  }
  if (body_words == 0) {
    return common::fail("control message " + std::to_string(seq) + " is empty");
  }
  if (stream != peer_stream_) {
    if (std::find(retired_streams_.begin(), retired_streams_.end(), stream) !=
        retired_streams_.end()) {
      return Delivery{};  // late, from a stream the peer has left
    }
    // The peer's first stream, or a new one (it gave this side up and started over): taken
    // up where it stands, since a connection starts with the oldest unacknowledged message.
    if (peer_stream_ != 0) {
      retired_streams_.push_back(peer_stream_);
      if (retired_streams_.size() > kRetiredStreams) retired_streams_.pop_front();
    }
    peer_stream_ = stream;
    delivered_ = seq - 1;
  }
  if (seq <= delivered_) {  // sent again after a failover; had it
    again_ = true;
    return Delivery{};
  }
  if (seq != delivered_ + 1) {
    return common::fail("control message " + std::to_string(seq) + " arrived after " +
                        std::to_string(delivered_) + " (a gap)");
  }
  delivered_ = seq;
  auto message = kj::heapArray<capnp::word>(body_words);
  std::memcpy(message.begin(), words.begin() + kHeaderWords, body_words * sizeof(capnp::word));
  return Delivery(std::move(message));
}

}  // namespace plexus::daemon
