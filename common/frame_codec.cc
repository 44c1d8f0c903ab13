#include "common/frame_codec.h"

#include <cstring>

namespace plexus::common {

uint32_t frame_length(std::span<const std::byte, kFrameLengthBytes> prefix) {
  uint32_t length = 0;
  std::memcpy(&length, prefix.data(), sizeof(length));
  return length;
}

std::string check_frame_length(uint32_t length, size_t max_frame_bytes) {
  if (length > 0 && length % sizeof(capnp::word) == 0 && length <= max_frame_bytes) return {};
  return "frame length " + std::to_string(length) + " is not a positive multiple of 8 up to " +
         std::to_string(max_frame_bytes);
}

capnp::ReaderOptions untrusted_reader_options() {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = 1u << 17;
  options.nestingLimit = 16;
  return options;
}

std::vector<std::byte> encode_frame(capnp::MessageBuilder& message) {
  kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  auto length = static_cast<uint32_t>(bytes.size());
  std::vector<std::byte> frame(kFrameLengthBytes + bytes.size());
  std::memcpy(frame.data(), &length, kFrameLengthBytes);
  std::memcpy(frame.data() + kFrameLengthBytes, bytes.begin(), bytes.size());
  return frame;
}

void FrameDecoder::append(const std::byte* data, size_t n) {
  if (consumed_ > 0 && consumed_ == buffer_.size()) {
    buffer_.clear();
    consumed_ = 0;
  }
  buffer_.insert(buffer_.end(), data, data + n);
}

Result<std::optional<kj::Array<capnp::word>>> FrameDecoder::next() {
  if (buffered() < kFrameLengthBytes) return {std::nullopt};
  const uint32_t length = frame_length(
      std::span<const std::byte, kFrameLengthBytes>(buffer_.data() + consumed_, kFrameLengthBytes));
  if (std::string why = check_frame_length(length, max_frame_bytes_); !why.empty()) {
    return fail(std::move(why));
  }
  if (buffered() < kFrameLengthBytes + length) return {std::nullopt};
  // Copy into word-aligned storage: Cap'n Proto reads words in place.
  auto words = kj::heapArray<capnp::word>(length / sizeof(capnp::word));
  std::memcpy(words.begin(), buffer_.data() + consumed_ + kFrameLengthBytes, length);
  consumed_ += kFrameLengthBytes + length;
  if (consumed_ == buffer_.size()) {
    buffer_.clear();
    consumed_ = 0;
  } else if (consumed_ > 64 * 1024) {
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<ptrdiff_t>(consumed_));
    consumed_ = 0;
  }
  return std::optional(std::move(words));
}

}  // namespace plexus::common
