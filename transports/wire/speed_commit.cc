#include "transports/wire/speed_commit.h"

#include <string_view>

#include "transports/wire/little_endian.h"

namespace plexus::transports::wire {

std::vector<std::byte> encode_speed_commit(const SpeedCommit& commit) {
  std::vector<std::byte> bytes(kSpeedCommitFixedBytes + 2 * commit.speeds.size());
  put_le<uint64_t>(bytes.data(), commit.first_op);
  put_le<uint64_t>(bytes.data() + 8, commit.reference);
  put_le<uint32_t>(bytes.data() + 16, static_cast<uint32_t>(commit.speeds.size()));
  for (size_t i = 0; i < commit.speeds.size(); ++i) {
    put_le<uint16_t>(bytes.data() + kSpeedCommitFixedBytes + 2 * i, commit.speeds[i]);
  }
  const size_t room =
      bytes.size() >= kMaxSpeedCommitBytes ? 0 : kMaxSpeedCommitBytes - bytes.size();
  for (char c : std::string_view(commit.reason).substr(0, room)) {
    bytes.push_back(static_cast<std::byte>(c));
  }
  while (bytes.size() % 8 != 0 && bytes.size() < kMaxSpeedCommitBytes)
    bytes.push_back(std::byte{0});
  return bytes;
}

common::Result<SpeedCommit> decode_speed_commit(std::span<const std::byte> payload,
                                                size_t max_nodes) {
  if (payload.size() < kSpeedCommitFixedBytes || payload.size() > kMaxSpeedCommitBytes) {
    return common::fail("a speed change of " + std::to_string(payload.size()) + " bytes, not " +
                        std::to_string(kSpeedCommitFixedBytes) + " to " +
                        std::to_string(kMaxSpeedCommitBytes));
  }
  const uint64_t count = get_le<uint32_t>(payload.data() + 16);
  if (count > max_nodes || payload.size() < kSpeedCommitFixedBytes + 2 * count) {
    return common::fail("a speed change whose " + std::to_string(count) +
                        " speeds do not fit it (" + std::to_string(max_nodes) + " nodes, " +
                        std::to_string(payload.size()) + " bytes)");
  }
  SpeedCommit commit;
  commit.first_op = get_le<uint64_t>(payload.data());
  commit.reference = get_le<uint64_t>(payload.data() + 8);
  for (uint64_t i = 0; i < count; ++i) {
    commit.speeds.push_back(get_le<uint16_t>(payload.data() + kSpeedCommitFixedBytes + 2 * i));
  }
  const size_t text = kSpeedCommitFixedBytes + 2 * count;
  commit.reason.assign(reinterpret_cast<const char*>(payload.data()) + text, payload.size() - text);
  while (!commit.reason.empty() && commit.reason.back() == '\0') commit.reason.pop_back();
  return commit;
}

}  // namespace plexus::transports::wire
