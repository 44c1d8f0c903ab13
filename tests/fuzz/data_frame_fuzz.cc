// Fuzz target: bytes a peer sends on a data connection, as TcpConnection parses them
// (header validation, payload bounds, frames split anywhere). Nothing may crash, read out
// of bounds or hand on a frame whose header failed validation.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tests/fuzz/fuzz_seeds.h"
#include "transports/tcp/tcp_connection.h"

namespace {

namespace wire = plexus::transports::wire;

void check_header(const uint8_t* data, size_t size) {
  if (size < wire::kDataFrameHeaderBytes) return;
  const std::span<const std::byte, wire::kDataFrameHeaderBytes> bytes(
      reinterpret_cast<const std::byte*>(data), wire::kDataFrameHeaderBytes);
  const wire::DecodedHeader d = wire::decode_data_frame_header(bytes, {64 * 1024});
  if (!d.ok()) return;
  // A valid header re-encodes to the same bytes.
  std::byte again[wire::kDataFrameHeaderBytes];
  wire::encode_data_frame_header(d.header, again);
  if (std::memcmp(again, data, wire::kDataFrameHeaderBytes) != 0) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check_header(data, size);
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return 0;
  const size_t bounded = std::min<size_t>(size, 128 * 1024);  // fits the socket buffer
  size_t written = 0;
  while (written < bounded) {
    const ssize_t n = ::write(fds[1], data + written, bounded - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  ::close(fds[1]);
  plexus::transports::TcpConnection::Callbacks callbacks;
  size_t frames = 0;
  callbacks.on_frame = [&](const wire::DataFrameHeader& h, std::span<const std::byte> payload) {
    if (payload.size() != h.length || h.length > 64 * 1024) std::abort();
    ++frames;
    return frames % 7 == 6 ? std::string("refused by the fuzz consumer") : std::string();
  };
  callbacks.on_sent = [](uint64_t, size_t) {};
  plexus::transports::TcpConnection conn(fds[0], {64 * 1024}, std::move(callbacks));
  for (int i = 0; i < 64 && conn.on_readable(4096); ++i) {
  }
  return 0;
}

std::vector<std::vector<uint8_t>> plexus_fuzz_seeds() {
  std::vector<std::vector<uint8_t>> seeds;
  std::vector<uint8_t> stream;
  for (uint32_t chunk = 0; chunk < 3; ++chunk) {
    wire::DataFrameHeader h;
    h.type = chunk == 2 ? wire::FrameType::kAbort : wire::FrameType::kData;
    h.comm_id = 0x1122334455667788ull;
    h.op_seq = 7;
    h.step = 1;
    h.chunk = chunk;
    h.offset = chunk * 100;
    h.length = 100;
    std::byte header[wire::kDataFrameHeaderBytes];
    wire::encode_data_frame_header(h, header);
    const auto* p = reinterpret_cast<const uint8_t*>(header);
    stream.insert(stream.end(), p, p + sizeof(header));
    stream.insert(stream.end(), 100, static_cast<uint8_t>('a' + chunk));
  }
  seeds.push_back(stream);
  seeds.emplace_back(stream.begin(), stream.begin() + 60);  // cut mid-payload
  return seeds;
}
