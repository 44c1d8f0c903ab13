// Encoding and validation of the data frame header.
#include "transports/wire/data_frame.h"

#include <cstdio>

#include "transports/wire/little_endian.h"

namespace plexus::transports::wire {
namespace {

// Field offsets.
constexpr size_t kMagic = 0, kVersion = 2, kType = 3, kLength = 4, kCommId = 8, kOpSeq = 16,
                 kStep = 24, kChunk = 28, kOffset = 32, kChannelSeq = 40;

const char* type_name(FrameType type) {
  switch (type) {
    case FrameType::kData:
      return "data";
    case FrameType::kAck:
      return "ack";
    case FrameType::kHeartbeat:
      return "heartbeat";
    case FrameType::kAbort:
      return "abort";
    case FrameType::kDeparted:
      return "departed";
    case FrameType::kPathNotice:
      return "path notice";
    case FrameType::kNodeRate:
      return "node rate";
  }
  return "?";
}

}  // namespace

void encode_data_frame_header(const DataFrameHeader& h,
                              std::span<std::byte, kDataFrameHeaderBytes> out) {
  std::byte* p = out.data();
  put_le<uint16_t>(p + kMagic, kDataFrameMagic);
  put_le<uint8_t>(p + kVersion, kDataFrameVersion);
  put_le<uint8_t>(p + kType, static_cast<uint8_t>(h.type));
  put_le<uint32_t>(p + kLength, h.length);
  put_le<uint64_t>(p + kCommId, h.comm_id);
  put_le<uint64_t>(p + kOpSeq, h.op_seq);
  put_le<uint32_t>(p + kStep, h.step);
  put_le<uint32_t>(p + kChunk, h.chunk);
  put_le<uint64_t>(p + kOffset, h.offset);
  put_le<uint64_t>(p + kChannelSeq, h.channel_seq);
}

DecodedHeader decode_data_frame_header(std::span<const std::byte, kDataFrameHeaderBytes> in,
                                       const DataFrameLimits& limits) {
  const std::byte* p = in.data();
  DecodedHeader d;
  const auto magic = get_le<uint16_t>(p + kMagic);
  if (magic != kDataFrameMagic) {
    d.error = "data frame: bad magic 0x" + [&] {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "%04x", magic);
      return std::string(hex);
    }() + " (not a plexus data connection, or the stream lost its framing)";
    return d;
  }
  const auto version = get_le<uint8_t>(p + kVersion);
  if (version != kDataFrameVersion) {
    d.error = "data frame: version " + std::to_string(version) + ", this daemon speaks " +
              std::to_string(kDataFrameVersion);
    return d;
  }
  const auto type = get_le<uint8_t>(p + kType);
  if (type < 1 || type > static_cast<uint8_t>(FrameType::kNodeRate)) {
    d.error = "data frame: unknown type " + std::to_string(type);
    return d;
  }
  DataFrameHeader& h = d.header;
  h.type = static_cast<FrameType>(type);
  h.length = get_le<uint32_t>(p + kLength);
  h.comm_id = get_le<uint64_t>(p + kCommId);
  h.op_seq = get_le<uint64_t>(p + kOpSeq);
  h.step = get_le<uint32_t>(p + kStep);
  h.chunk = get_le<uint32_t>(p + kChunk);
  h.offset = get_le<uint64_t>(p + kOffset);
  h.channel_seq = get_le<uint64_t>(p + kChannelSeq);
  if (h.length > limits.max_payload_bytes) {
    d.error = "data frame: payload length " + std::to_string(h.length) + " exceeds the limit " +
              std::to_string(limits.max_payload_bytes);
  } else if ((h.type == FrameType::kAbort || h.type == FrameType::kDeparted) &&
             h.length > kMaxAbortReasonBytes) {
    d.error = std::string("data frame: a ") + type_name(h.type) + " frame carries " +
              std::to_string(h.length) + " bytes of reason (at most " +
              std::to_string(kMaxAbortReasonBytes) + ")";
  } else if (h.type != FrameType::kData && h.type != FrameType::kAbort &&
             h.type != FrameType::kDeparted && h.length != 0) {
    d.error = std::string("data frame: a ") + type_name(h.type) + " frame carries " +
              std::to_string(h.length) + " payload bytes (it must carry none)";
  } else if (h.offset > UINT64_MAX - h.length) {
    d.error = "data frame: offset " + std::to_string(h.offset) + " + length overflows";
  }
  return d;
}

std::string describe(const DataFrameHeader& h) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%s comm %016llx op %llu step %u chunk %u offset %llu length %u",
                type_name(h.type), static_cast<unsigned long long>(h.comm_id),
                static_cast<unsigned long long>(h.op_seq), h.step, h.chunk,
                static_cast<unsigned long long>(h.offset), h.length);
  return buf;
}

}  // namespace plexus::transports::wire
