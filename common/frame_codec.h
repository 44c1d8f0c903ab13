// Length-framed Cap'n Proto messages, as the control socket and the daemons' peer
// connections carry them: a 4-byte length in host order (both ends run on one machine, or
// are plexusd peers of the same architecture) and then the message's words. This is the
// one place that framing is decoded: incrementally and bounded, so a frame longer than its
// limit, or a message that fails Cap'n Proto's traversal or nesting limits, is an error the
// caller turns into closing the connection.
#pragma once

#include <capnp/message.h>
#include <capnp/serialize.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"

namespace plexus::common {

inline constexpr size_t kFrameLengthBytes = 4;

// Reader limits for untrusted messages.
capnp::ReaderOptions untrusted_reader_options();

std::vector<std::byte> encode_frame(capnp::MessageBuilder& message);

// The body length a frame's prefix announces, not yet checked.
uint32_t frame_length(std::span<const std::byte, kFrameLengthBytes> prefix);
// "" when `length` is a positive multiple of 8 up to `max_frame_bytes`, else why not.
[[nodiscard]] std::string check_frame_length(uint32_t length, size_t max_frame_bytes);

class FrameDecoder {
 public:
  explicit FrameDecoder(size_t max_frame_bytes) : max_frame_bytes_(max_frame_bytes) {}

  void append(const std::byte* data, size_t n);
  // The next complete frame's message words, std::nullopt when incomplete; a failure
  // saying why on a malformed length (every later call fails the same way).
  Result<std::optional<kj::Array<capnp::word>>> next();
  size_t buffered() const { return buffer_.size() - consumed_; }

 private:
  size_t max_frame_bytes_;
  std::vector<std::byte> buffer_;
  size_t consumed_ = 0;
};

}  // namespace plexus::common
