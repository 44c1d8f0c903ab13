// The cluster secret: bytes every daemon of a cluster holds (from a file only root may
// read), used to prove membership in the peer handshake with HMAC-SHA256.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace plexus::transports {

using Mac = std::array<uint8_t, 32>;

class ClusterSecret {
 public:
  // Reads `path`. Throws std::runtime_error naming the file when it cannot be read, is
  // readable or writable by group or others, or holds fewer than 16 bytes (one trailing
  // newline is not part of the secret).
  static ClusterSecret load(const std::string& path);
  static ClusterSecret from_bytes(std::vector<uint8_t> bytes);  // tests

  Mac mac(std::span<const std::byte> data) const;

 private:
  std::vector<uint8_t> key_;
};

// Constant-time comparison (a MAC check must not leak how many bytes matched).
bool macs_equal(std::span<const uint8_t> a, std::span<const uint8_t> b);

}  // namespace plexus::transports
