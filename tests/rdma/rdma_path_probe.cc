// Run inside two VM nodes by rdma_path_test.sh: an RDMA path (transports/rdma/rdma_path.h)
// over a plain TCP connection between them, frames of random sizes (up to the largest)
// checked byte for byte on arrival, and the throughput of large frames.
//   rdma_path_probe server PORT FRAMES
//   rdma_path_probe client ADDRESS PORT FRAMES MAX_PAYLOAD
// The server checks every frame (its sequence number, length and content, a function of
// both) and answers the last with one frame holding how many it took; both print what they
// saw and exit 0 only if every frame was exact. Bounded: PROBE_DEADLINE_S seconds (120) for the
// connection, and as long again from it for the exchange.
//
// PROBE_IN_PLACE=1 (client): the payloads lie in one mapping announced as sendable memory
// (transports/path/sendable_memory.h), so that large ones go without a copy. Half the frames
// go from it; then it is withdrawn, unmapped and mapped again at the same address holding the
// second half's bytes, announced anew, and the second half goes: a registration kept from the
// first mapping would send the old pages, which the server would see. The client fails unless
// every payload of at least zero_copy_min_bytes went in place.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "transports/path/sendable_memory.h"
#include "transports/rdma/rdma_path.h"

namespace {

using plexus::transports::DataPath;
namespace wire = plexus::transports::wire;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kHeartbeatSeq = ~uint64_t{0};  // not a frame the server counts
constexpr int64_t kPathTimeoutMs = 3000;
int64_t silent_for_ms = 0;  // set when run() gave the path up for silence

std::byte pattern(uint64_t seq, size_t i) {
  return static_cast<std::byte>((seq * 131 + i * 7) & 0xff);
}

int die(const std::string& why) {
  std::fprintf(stderr, "rdma_path_probe: %s\n", why.c_str());
  return 1;
}

// Runs the path's events until done() or the deadline; false if the path failed. Every
// 500 ms a heartbeat is queued ahead of the frames, as the reliable channel does.
template <typename Done>
bool run(DataPath& path, Done done, Clock::time_point deadline) {
  auto heartbeat = Clock::now();
  while (!done()) {
    if (Clock::now() > deadline) return false;
    pollfd p{path.poll_fd(), POLLIN, 0};
    if (::poll(&p, 1, 100) > 0 && !path.on_readable(1 << 20)) return false;
    if (Clock::now() - heartbeat > std::chrono::milliseconds(500)) {
      heartbeat = Clock::now();
      wire::DataFrameHeader h;
      h.type = wire::FrameType::kHeartbeat;
      h.channel_seq = kHeartbeatSeq;
      path.queue_urgent(h, kHeartbeatSeq);
      if (!path.error().empty()) return false;
      // The reliable channel's path timeout, as plexusd applies it: a path whose peer's
      // network has said nothing for this long while frames wait is failed.
      if (path.backlog_bytes() > 0 && path.network_silence_ms() > kPathTimeoutMs) {
        silent_for_ms = path.network_silence_ms();
        return false;
      }
    }
  }
  return true;
}

// Why run() gave the path up: its error, the path timeout, or the deadline.
std::string stop_reason(DataPath& path) {
  if (!path.error().empty()) return path.error();
  if (silent_for_ms > 0) {
    return "the peer silent for " + std::to_string(silent_for_ms) + " ms with " +
           std::to_string(path.backlog_bytes()) + " bytes waiting (the path timeout)";
  }
  return "the deadline passed";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return die("usage: server PORT FRAMES | client ADDRESS PORT FRAMES MAX_PAYLOAD");
  const bool server = std::string(argv[1]) == "server";
  if (!server && argc < 6) return die("client ADDRESS PORT FRAMES MAX_PAYLOAD");
  // Client: random sizes for all but the timed tail of largest frames. Made before the path
  // opens: filling 200 MB takes seconds under ASan, and a peer left waiting meanwhile goes
  // silent, so that its path timeout gives it up.
  std::mt19937_64 rng(42);
  const uint64_t frames = std::strtoull(argv[server ? 3 : 4], nullptr, 10);
  const size_t max_payload = server ? 0 : std::strtoull(argv[5], nullptr, 10);
  const bool in_place = !server && std::getenv("PROBE_IN_PLACE") != nullptr;
  plexus::transports::rdma::RdmaSettings settings;
  std::vector<size_t> sizes(server ? 0 : frames);
  std::vector<size_t> offsets(sizes.size());  // in place: in the mapping, per half
  uint64_t total = 0, expect_in_place = 0, half_bytes[2] = {0, 0};
  for (uint64_t seq = 0; seq < sizes.size(); ++seq) {
    sizes[seq] = seq >= frames / 2 ? max_payload : rng() % (max_payload + 1);
    uint64_t& half = half_bytes[seq >= frames / 2 ? 1 : 0];
    offsets[seq] = half;
    half += (sizes[seq] + 63) / 64 * 64;
    total += sizes[seq];
    if (sizes[seq] >= settings.zero_copy_min_bytes) expect_in_place += sizes[seq];
  }
  // Copied mode: a vector per frame. In place: one mapping, filled half by half.
  std::vector<std::vector<std::byte>> payloads(in_place ? 0 : sizes.size());
  for (uint64_t seq = 0; seq < payloads.size(); ++seq) {
    payloads[seq].resize(sizes[seq]);
    for (size_t i = 0; i < sizes[seq]; ++i) payloads[seq][i] = pattern(seq, i);
  }
  const size_t mapping_bytes =
      std::max<size_t>((std::max(half_bytes[0], half_bytes[1]) + 4095) / 4096 * 4096, 4096);
  std::byte* mapping = nullptr;
  auto sendable = std::make_shared<plexus::transports::SendableMemory>();
  plexus::transports::SendableMemory::Announcement announced;
  // Maps (at `at`, when given) and fills the mapping with half `half`'s payloads, announced.
  auto map_half = [&](int half, std::byte* at) -> std::string {
    void* p = ::mmap(at, mapping_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | (at != nullptr ? MAP_FIXED : 0), -1, 0);
    if (p == MAP_FAILED) return std::string("mmap: ") + std::strerror(errno);
    mapping = static_cast<std::byte*>(p);
    for (uint64_t seq = half == 0 ? 0 : frames / 2; seq < (half == 0 ? frames / 2 : frames); ++seq)
      for (size_t i = 0; i < sizes[seq]; ++i) mapping[offsets[seq] + i] = pattern(seq, i);
    announced = sendable->announce({mapping, mapping_bytes});
    return "";
  };
  if (in_place) {
    if (std::string why = map_half(0, nullptr); !why.empty()) return die(why);
  }
  // The deadline bounds the wait for the peer's connection, and then, counted afresh from
  // the connection, the exchange: a peer that spends seconds filling its payloads (software
  // emulation on a loaded host) must not use up this side's time for the exchange, or this
  // side gives up mid-setup and its close reaches the peer as a fault the test did not make.
  const char* limit = std::getenv("PROBE_DEADLINE_S");
  const auto allowed = std::chrono::seconds(limit != nullptr ? std::atoi(limit) : 120);
  auto deadline = Clock::now() + allowed;

  int fd = -1;
  if (server) {
    const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(std::atoi(argv[2])));
    if (::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(listener, 1) != 0)
      return die(std::string("listen: ") + std::strerror(errno));
    pollfd p{listener, POLLIN, 0};
    for (int n = 0; n <= 0; n = ::poll(&p, 1, 100)) {
      if (n < 0 && errno != EINTR) return die(std::string("poll: ") + std::strerror(errno));
      if (Clock::now() >= deadline) return die("no client connected before the deadline");
    }
    fd = ::accept(listener, nullptr, nullptr);
    ::close(listener);
  } else {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(std::atoi(argv[3])));
    inet_pton(AF_INET, argv[2], &address.sin_addr);
    while (fd < 0 && Clock::now() < deadline) {  // the server may not be listening yet
      fd = ::socket(AF_INET, SOCK_STREAM, 0);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
        const int refused = errno;  // what the message below names, not close's
        ::close(fd);
        errno = refused;
        fd = -1;
        ::usleep(100000);
      }
    }
  }
  if (fd < 0) return die(std::string("no connection: ") + std::strerror(errno));
  deadline = Clock::now() + allowed;

  wire::DataFrameLimits limits;
  uint64_t received = 0, bad = 0, sent = 0, answer = 0;
  bool answered = false;
  std::string first_bad;
  DataPath::Callbacks callbacks;
  callbacks.on_frame = [&](const wire::DataFrameHeader& h, std::span<const std::byte> payload) {
    if (h.channel_seq == kHeartbeatSeq) return std::string();
    if (!server) {  // the server's answer: how many it took
      answered = true;
      answer = h.op_seq;
      return std::string();
    }
    bool ok = h.channel_seq == received && payload.size() == h.length;
    for (size_t i = 0; ok && i < payload.size(); ++i) ok = payload[i] == pattern(h.channel_seq, i);
    if (!ok && bad++ == 0)
      first_bad = "frame " + std::to_string(received) + " (seq " + std::to_string(h.channel_seq) +
                  ") differs";
    ++received;
    return std::string();
  };
  // PROBE_READY_FILE: created once the first frame is through, so that a test pulls a cable
  // under a stream, not under the setup.
  const char* ready_file = std::getenv("PROBE_READY_FILE");
  callbacks.on_sent = [&](uint64_t token, size_t) {
    sent += token != kHeartbeatSeq ? 1 : 0;
    if (sent == 1 && ready_file != nullptr) std::fclose(std::fopen(ready_file, "w"));
  };
  auto path = plexus::transports::rdma::rdma_path_opener(
      fd, settings, in_place ? sendable : nullptr)(limits, callbacks);
  if (!path->error().empty()) return die(path->error());

  if (server) {
    if (!run(
            *path, [&] { return received == frames; }, deadline)) {
      return die("after " + std::to_string(received) + " frames: " + stop_reason(*path));
    }
    wire::DataFrameHeader h;
    h.type = wire::FrameType::kHeartbeat;
    h.op_seq = received - bad;
    path->queue(h, {}, 0);
    if (!run(
            *path, [&] { return sent == 1; }, deadline))
      return die("answering: " + stop_reason(*path));
    // Let the client read it before the socket closes.
    run(
        *path, [] { return false; }, Clock::now() + std::chrono::milliseconds(500));
    std::printf("server: %llu frames, %llu bad%s%s\n", static_cast<unsigned long long>(received),
                static_cast<unsigned long long>(bad), bad ? ": " : "", first_bad.c_str());
    return bad == 0 ? 0 : 1;
  }

  const auto start = Clock::now();
  auto queue_frames = [&](uint64_t from, uint64_t to) {
    for (uint64_t seq = from; seq < to; ++seq) {
      wire::DataFrameHeader h;
      h.type = wire::FrameType::kData;
      h.length = static_cast<uint32_t>(sizes[seq]);
      h.comm_id = 1;
      h.op_seq = seq;
      h.channel_seq = seq;
      path->queue(h,
                  in_place ? std::span<const std::byte>(mapping + offsets[seq], sizes[seq])
                           : std::span<const std::byte>(payloads[seq]),
                  seq);
    }
  };
  if (in_place) {
    // The first half, then the mapping replaced at the same address once it is written.
    queue_frames(0, frames / 2);
    if (!run(
            *path, [&] { return sent == frames / 2; }, deadline))
      return die("after " + std::to_string(sent) +
                 " frames of the first half: " + stop_reason(*path));
    announced.reset();
    std::byte* at = mapping;
    if (std::string why = map_half(1, at); !why.empty()) return die(why);
    if (mapping != at) return die("the mapping did not come back at the same address");
    queue_frames(frames / 2, frames);
  } else {
    queue_frames(0, frames);
  }
  if (!run(
          *path, [&] { return answered; }, deadline)) {
    const double after = std::chrono::duration<double>(Clock::now() - start).count();
    return die("after " + std::to_string(sent) + " frames sent, " + std::to_string(after) +
               " s: " + stop_reason(*path));
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (in_place) {
    const uint64_t went = path->payload_bytes_sent_in_place();
    std::printf("client: %llu of %llu payload bytes in place (%llu expected)\n",
                static_cast<unsigned long long>(went), static_cast<unsigned long long>(total),
                static_cast<unsigned long long>(expect_in_place));
    if (went != expect_in_place) return die("not every large payload went in place");
  }
  std::printf("client: %llu frames, %llu bytes in %.3f s (%.1f MB/s); the server took %llu exact\n",
              static_cast<unsigned long long>(frames), static_cast<unsigned long long>(total),
              seconds, static_cast<double>(total) / seconds / 1e6,
              static_cast<unsigned long long>(answer));
  return answer == frames ? 0 : 1;
}
