// The payload of a speed-agreement commit between daemons (the frame whose op_seq carries
// the speed flag and whose step is "commit": docs/architecture.md, "Wire formats"): the
// speeds every node takes from the same op on. Little-endian:
//   u64 first op | u64 reference bytes/s | u32 nodes | u16 speed per node | reason (UTF-8)
// a speed in 1/64ths of the reference (the daemon's SpeedAgreement::kSpeedSteps); padded
// with NULs to whole 8 bytes, as frames follow one another in a path's read buffer and a
// payload of odd length would leave the next frame's (read in place, reduced as whole
// elements) misaligned.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"

namespace plexus::transports::wire {

struct SpeedCommit {
  uint64_t first_op = 0;   // the first op that runs with these speeds
  uint64_t reference = 0;  // bytes/s of the node the speeds are fractions of
  std::vector<uint16_t> speeds;
  std::string reason;  // what the nodes' events say
};

inline constexpr size_t kSpeedCommitFixedBytes = 20;
inline constexpr size_t kMaxSpeedCommitBytes = 4096;

// The reason is cut to what fits kMaxSpeedCommitBytes.
std::vector<std::byte> encode_speed_commit(const SpeedCommit& commit);
// The commit, or why `payload` is not a commit of at most `max_nodes` speeds.
common::Result<SpeedCommit> decode_speed_commit(std::span<const std::byte> payload,
                                                size_t max_nodes);

}  // namespace plexus::transports::wire
