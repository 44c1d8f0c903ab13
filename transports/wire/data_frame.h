// The fixed 48-byte header in front of every frame between daemons on a data connection.
// Explicit little-endian encoding; decoding validates every field before anything else
// looks at the frame, and says which field is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace plexus::transports::wire {

inline constexpr size_t kDataFrameHeaderBytes = 48;
inline constexpr uint16_t kDataFrameMagic = 0x5850;  // "PX" on the wire
inline constexpr uint8_t kDataFrameVersion = 3;      // 2: kPathNotice; 3: kNodeRate

enum class FrameType : uint8_t {
  kData = 1,       // payload: bytes [offset, offset + length) of message `step` of an op
  kAck = 2,        // channel_seq: cumulative acknowledgement (reliable channel); op_seq..offset
                   // (op_seq not 0): a run received beyond it (a selective acknowledgement)
  kHeartbeat = 3,  // keeps an idle path's liveness known
  kAbort = 4,      // payload: why communicator comm_id failed on the sender (UTF-8, short)
  kDeparted = 5,   // step: a rank of the sender that left communicator comm_id; op_seq: how
                   // many collectives it had submitted; payload: how it left
  // About the sender's connection from IPv4 endpoint `offset` to `op_seq` (each address <<
  // 16 | port), sent on another path of the channel; `step` is a PathNotice.
  kPathNotice = 6,
  // offset: the sender's bandwidth in bytes/s as its links measured it (NodeLinks), sent on
  // one path of each channel every 100 ms; 0 while it has no measure.
  kNodeRate = 7,
};

enum class PathNotice : uint32_t {
  kDown = 0,       // it failed on the sender's side (a NIC went down): fail it now
  kDrained = 1,    // the sender's NIC is drained: send nothing new on it
  kUndrained = 2,  // back in service
};

inline constexpr uint32_t kMaxAbortReasonBytes = 1024;  // abort and departed payloads

struct DataFrameHeader {
  FrameType type = FrameType::kData;
  uint32_t length = 0;  // payload bytes after the header
  uint64_t comm_id = 0;
  uint64_t op_seq = 0;
  uint32_t step = 0;    // which message of the op: slice << 12 | message index between
                        // this pair of daemons within the slice (daemon/internode/op_slices.h)
  uint32_t chunk = 0;   // index of this piece within the message
  uint64_t offset = 0;  // of this piece within the message
  uint64_t channel_seq = 0;
};

struct DataFrameLimits {
  uint32_t max_payload_bytes = 4u << 20;
};

struct DecodedHeader {
  DataFrameHeader header;
  std::string error;  // empty when the header is valid
  bool ok() const { return error.empty(); }
};

void encode_data_frame_header(const DataFrameHeader& header,
                              std::span<std::byte, kDataFrameHeaderBytes> out);
DecodedHeader decode_data_frame_header(std::span<const std::byte, kDataFrameHeaderBytes> in,
                                       const DataFrameLimits& limits);

// "data comm 1a2b.. op 7 step 2 chunk 0 offset 0 length 524288" for logs.
std::string describe(const DataFrameHeader& header);

}  // namespace plexus::transports::wire
