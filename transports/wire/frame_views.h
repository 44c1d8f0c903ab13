// One typed view per frame kind: what each kind keeps in the generic fields of
// DataFrameHeader (data_frame.h). Every place that builds or reads a frame's meaning goes
// through these, so a field's meaning is written once: op_seq's family bits, the halves of
// a step, the channel incarnation in a heartbeat's comm_id, a path notice's endpoints.
// Plain functions over the header, any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "transports/wire/data_frame.h"

namespace plexus::transports::wire {

// ---- kData: four families, told apart by op_seq's top two bits (data_family, the one
// place that tests them).
enum class DataFamily : uint8_t {
  kCollective,    // op_seq: the collective's number in its communicator; step: CollectiveStep
  kPointToPoint,  // op_seq: kPointToPointBit | the message's number for its rank pair
  kSpeed,         // op_seq: kSpeedBit | the speed change's generation; step: the message kind
  kWeights,       // op_seq: both bits | a model's version; comm_id: the model's relay id
};
inline constexpr uint64_t kPointToPointBit = uint64_t{1} << 63;
inline constexpr uint64_t kSpeedBit = uint64_t{1} << 62;
inline constexpr uint64_t kWeightsBits = kPointToPointBit | kSpeedBit;

inline DataFamily data_family(uint64_t op_seq) {
  if ((op_seq & kWeightsBits) == kWeightsBits) return DataFamily::kWeights;
  if ((op_seq & kPointToPointBit) != 0) return DataFamily::kPointToPoint;
  if ((op_seq & kSpeedBit) != 0) return DataFamily::kSpeed;
  return DataFamily::kCollective;
}

// A data frame's header for message `step` of op `op_seq` of communicator `comm_id` (op_seq
// and step as its family has them); the sender sets chunk, offset and length per piece.
inline DataFrameHeader make_data(uint64_t comm_id, uint64_t op_seq, uint32_t step) {
  DataFrameHeader h;
  h.type = FrameType::kData;
  h.comm_id = comm_id;
  h.op_seq = op_seq;
  h.step = step;
  return h;
}

// A collective's frame: step is slice << kSliceMessageBits | message, where message counts
// the messages between this pair of daemons within the slice (daemon/internode/op_slices.h).
inline constexpr uint32_t kSliceMessageBits = 12;
inline constexpr uint32_t kMaxMessagesPerSlice = 1u << kSliceMessageBits;  // per peer
inline constexpr uint64_t kMaxSlices = uint64_t{1} << (32 - kSliceMessageBits);

struct CollectiveStep {
  uint64_t slice = 0;
  uint32_t message = 0;
};
inline uint32_t encode_collective_step(CollectiveStep s) {
  return static_cast<uint32_t>(s.slice << kSliceMessageBits) | s.message;
}
inline CollectiveStep decode_collective_step(uint32_t step) {
  return {step >> kSliceMessageBits, step & (kMaxMessagesPerSlice - 1)};
}

// A point-to-point message's frames: step is source << 16 | destination (ranks below
// 65,536); the message ends with a frame of chunk kPointToPointEndChunk whose offset is the
// message's size and whose payload is its tag (4 bytes, little-endian): the receiver matches
// by tag only once the message is whole.
inline constexpr uint32_t kPointToPointEndChunk = 0xffffffffu;
inline constexpr size_t kPointToPointEndBytes = 4;
inline std::array<std::byte, kPointToPointEndBytes> encode_point_to_point_end(int32_t tag) {
  const auto v = static_cast<uint32_t>(tag);
  return {std::byte(v & 0xff), std::byte(v >> 8 & 0xff), std::byte(v >> 16 & 0xff),
          std::byte(v >> 24)};
}
inline int32_t decode_point_to_point_end(std::span<const std::byte, kPointToPointEndBytes> in) {
  uint32_t v = 0;
  for (size_t i = 0; i < kPointToPointEndBytes; ++i)
    v |= std::to_integer<uint32_t>(in[i]) << (8 * i);
  return static_cast<int32_t>(v);
}

struct PointToPointTag {
  uint64_t message = 0;  // its number among the messages from source to destination
  uint32_t source = 0;
  uint32_t destination = 0;
};
inline uint64_t point_to_point_op_seq(uint64_t message) { return kPointToPointBit | message; }
inline uint32_t point_to_point_step(uint32_t source, uint32_t destination) {
  return source << 16 | destination;
}
inline PointToPointTag read_point_to_point(const DataFrameHeader& h) {
  return {h.op_seq & ~kPointToPointBit, h.step >> 16, h.step & 0xffff};
}

// A speed change's message (the nodes' speed agreement): a frame with no payload whose
// offset is a number (proposal, answer), or the one frame of a commit (speed_commit.h).
inline uint64_t speed_op_seq(uint64_t generation) { return kSpeedBit | generation; }
inline uint64_t speed_generation(uint64_t op_seq) { return op_seq & ~kSpeedBit; }

// A weight relay's messages for one version of a model (daemon/engine/weight_relay.h): the
// header (step kWeightsHeaderStep; its end a marker of chunk kWeightsEndChunk whose offset is
// the header's size), then each shard in ranges of kWeightsRangeBytes, one message a range
// (step: shard << kWeightsRangeBits | range; offsets within the range).
inline constexpr uint32_t kWeightsHeaderStep = 0xffffffffu;
inline constexpr uint32_t kWeightsEndChunk = 0xffffffffu;
// A node that will not keep a version (its store has no room, no model here subscribes to it)
// answers the node that sent the header with a message of this step, its payload the reason
// (at most kWeightsMaxReasonBytes): the sender passes it over, on to the node after it. A
// reason of exactly kWeightsWholeHere says the node has the version whole already (it was sent
// again: a chain repaired past a lost node): the chain after it is its own, and the sender
// stops there.
inline constexpr uint32_t kWeightsRefusedStep = 0xfffffffeu;
inline constexpr size_t kWeightsMaxReasonBytes = 512;
inline constexpr std::string_view kWeightsWholeHere = "this node has the version whole already";
// A node passes a range on once it has it whole: each hop adds about a range's time on the
// wire (20 ms at 200 Mbit/s), against a frame's bookkeeping per range.
inline constexpr uint64_t kWeightsRangeBytes = 512u << 10;
inline constexpr uint32_t kWeightsRangeBits = 20;  // 512 GiB a shard
inline constexpr uint32_t kWeightsMaxShards =
    (0xffffffffu >> kWeightsRangeBits);  // below the header's step
inline uint64_t weights_op_seq(uint64_t version) { return kWeightsBits | version; }
inline uint64_t weights_version(uint64_t op_seq) { return op_seq & ~kWeightsBits; }
inline uint32_t weights_range_step(uint32_t shard, uint32_t range) {
  return shard << kWeightsRangeBits | range;
}
struct WeightsRange {
  uint32_t shard = 0;
  uint32_t range = 0;
};
inline WeightsRange read_weights_range(uint32_t step) {
  return {step >> kWeightsRangeBits, step & ((1u << kWeightsRangeBits) - 1)};
}

// ---- kHeartbeat and kAck: a reliable channel's own frames. comm_id is the sending
// channel's incarnation (a random number per channel: a new one means the peer gave up the
// old); channel_seq the cumulative acknowledgement; on an acknowledgement, op_seq..offset
// (op_seq not 0) a run of frames the sender holds beyond it; on a heartbeat, step the
// sender's promise: its next frame on the path comes within this many ms (0: no promise, as
// from a sender that predates it).
struct ChannelControl {
  uint64_t incarnation = 0;
  uint64_t acknowledged = 0;  // cumulative
  uint64_t run_first = 0;     // 0: no selective run
  uint64_t run_last = 0;
  uint32_t promise_ms = 0;
};
inline DataFrameHeader make_channel_control(FrameType type, const ChannelControl& c) {
  DataFrameHeader h;
  h.type = type;
  h.comm_id = c.incarnation;
  h.channel_seq = c.acknowledged;
  h.op_seq = c.run_first;
  h.offset = c.run_last;
  h.step = c.promise_ms;
  return h;
}
inline bool is_channel_control(const DataFrameHeader& h) {
  return h.type == FrameType::kHeartbeat || h.type == FrameType::kAck;
}
inline ChannelControl read_channel_control(const DataFrameHeader& h) {
  return {h.comm_id, h.channel_seq, h.op_seq, h.offset, h.step};
}

// ---- kDeparted: a rank of the sender left communicator comm_id; step: the rank; op_seq:
// how many collectives it had submitted; payload: how it left. kAbort: comm_id failed on
// the sender; step: the plexus_result_t its ranks fail with (0 from a sender before it:
// PEER_LOST); payload: why.
struct Departed {
  uint64_t comm_id = 0;
  uint32_t rank = 0;
  uint64_t collectives = 0;
};
inline DataFrameHeader make_departed(const Departed& d) {
  DataFrameHeader h;
  h.type = FrameType::kDeparted;
  h.comm_id = d.comm_id;
  h.step = d.rank;
  h.op_seq = d.collectives;
  return h;
}
inline Departed read_departed(const DataFrameHeader& h) { return {h.comm_id, h.step, h.op_seq}; }
inline DataFrameHeader make_abort(uint64_t comm_id, uint32_t code) {
  DataFrameHeader h;
  h.type = FrameType::kAbort;
  h.comm_id = comm_id;
  h.step = code;
  return h;
}

// ---- kPathNotice: about the sender's connection from IPv4 endpoint `from` to `to` (each
// address << 16 | port), sent on another path of the channel. Read on the receiver, that is
// its own connection from `to` to `from`.
struct PathNoticeFrame {
  PathNotice what = PathNotice::kDown;
  uint64_t from = 0;
  uint64_t to = 0;
};
inline DataFrameHeader make_path_notice(const PathNoticeFrame& n) {
  DataFrameHeader h;
  h.type = FrameType::kPathNotice;
  h.step = static_cast<uint32_t>(n.what);
  h.offset = n.from;
  h.op_seq = n.to;
  return h;
}
// `what` as sent: a value outside PathNotice is the reader's to refuse.
inline PathNoticeFrame read_path_notice(const DataFrameHeader& h) {
  return {static_cast<PathNotice>(h.step), h.offset, h.op_seq};
}

// ---- kNodeRate: the sender's bandwidth in bytes/s as its links measured it (0: none yet).
inline DataFrameHeader make_node_rate(uint64_t bytes_per_s) {
  DataFrameHeader h;
  h.type = FrameType::kNodeRate;
  h.offset = bytes_per_s;
  return h;
}
inline uint64_t read_node_rate(const DataFrameHeader& h) { return h.offset; }

}  // namespace plexus::transports::wire
