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
inline constexpr uint8_t kDataFrameVersion = 4;      // 2: kPathNotice; 3: kNodeRate; 4: kRetire*

// What each kind keeps in the header's fields: frame_views.h, one typed view per kind.
enum class FrameType : uint8_t {
  kData = 1,        // bytes of a collective's, a send's or the speed agreement's message
  kAck = 2,         // a reliable channel's acknowledgement (cumulative, and a selective run)
  kHeartbeat = 3,   // keeps an idle path's liveness known
  kAbort = 4,       // communicator comm_id failed on the sender; step: the code; payload: why
  kDeparted = 5,    // a rank of the sender left communicator comm_id; payload: how
  kPathNotice = 6,  // about one of the sender's connections, sent on another path
  kNodeRate = 7,    // the sender's bandwidth as its links measured it, every 100 ms
};

enum class PathNotice : uint32_t {
  kDown = 0,       // it failed on the sender's side (a NIC went down): fail it now
  kDrained = 1,    // the sender's NIC is drained: send nothing new on it
  kUndrained = 2,  // back in service
  // Closing an idle link (PeerLinks, "Idle links close"): about the link, not one path.
  kRetire = 3,         // the sender's side is quiet: may both close their paths?
  kRetireAgreed = 4,   // yes: this side is quiet too and sends nothing new until answered
  kRetireRefused = 5,  // no (or, after kRetireAgreed: the asker had traffic meanwhile)
};

inline constexpr uint32_t kMaxAbortReasonBytes = 1024;  // abort and departed payloads

struct DataFrameHeader {
  FrameType type = FrameType::kData;
  uint32_t length = 0;  // payload bytes after the header
  uint64_t comm_id = 0;
  uint64_t op_seq = 0;
  uint32_t step = 0;    // which message of the op (frame_views.h: per kind)
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
