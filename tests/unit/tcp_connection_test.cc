// TcpConnection over a socketpair: frames arrive whole and in order whatever the write and
// read sizes; payloads are not copied at queue time; garbage and a closed peer are errors
// that say what happened.
#include "transports/tcp/tcp_connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <numeric>

namespace plexus::transports {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

struct Received {
  wire::DataFrameHeader header;
  std::vector<std::byte> payload;
};

struct Pair {
  std::unique_ptr<TcpConnection> a;
  std::unique_ptr<TcpConnection> b;
  std::vector<Received> got;
  std::vector<uint64_t> sent;
  // b's placements, as a test sets them (none: every frame through on_frame).
  std::function<TcpConnection::Placement(const wire::DataFrameHeader&)> place;
  std::function<std::string(const wire::DataFrameHeader&)> on_placed;
  std::vector<wire::DataFrameHeader> discarded;  // b's on_discarded

  explicit Pair(wire::DataFrameLimits limits = {}) {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    a = std::make_unique<TcpConnection>(
        fds[0], limits,
        TcpConnection::Callbacks{[](const auto&, auto) { return std::string(); },
                                 [this](uint64_t token, size_t) { sent.push_back(token); }});
    b = std::make_unique<TcpConnection>(
        fds[1], limits,
        TcpConnection::Callbacks{
            [this](const wire::DataFrameHeader& h, std::span<const std::byte> payload) {
              got.push_back({h, {payload.begin(), payload.end()}});
              return std::string();
            },
            nullptr,
            [this](const wire::DataFrameHeader& h) {
              return place ? place(h) : TcpConnection::Placement{};
            },
            [this](const wire::DataFrameHeader& h) { return on_placed(h); },
            [this](const wire::DataFrameHeader& h) {
              discarded.push_back(h);
              return std::string();
            }});
  }

  // Alternates writing and reading until everything queued has arrived (bounded).
  bool pump(size_t frames) {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (got.size() < frames && Clock::now() < deadline) {
      if (!a->on_writable()) return false;
      if (!b->on_readable(64 << 10)) return false;
    }
    return got.size() == frames;
  }
};

TEST(TcpConnectionTest, ManyFramesOfMixedSizesArriveWholeAndInOrder) {
  Pair pair;
  std::vector<std::vector<std::byte>> payloads;
  const size_t sizes[] = {0, 1, 47, 48, 4096, 1 << 20, 3, (4 << 20) - 1};
  for (size_t i = 0; i < 40; ++i) {
    std::vector<std::byte> p(sizes[i % std::size(sizes)]);
    for (size_t j = 0; j < p.size(); ++j) p[j] = static_cast<std::byte>((i * 131 + j) & 0xFF);
    payloads.push_back(std::move(p));
  }
  for (size_t i = 0; i < payloads.size(); ++i) {
    wire::DataFrameHeader h;
    h.length = static_cast<uint32_t>(payloads[i].size());
    h.op_seq = i;
    pair.a->queue(h, payloads[i], 1000 + i);
  }
  ASSERT_TRUE(pair.pump(payloads.size())) << pair.a->error() << pair.b->error();
  for (size_t i = 0; i < payloads.size(); ++i) {
    EXPECT_EQ(pair.got[i].header.op_seq, i);
    EXPECT_EQ(pair.got[i].payload, payloads[i]) << "frame " << i;
  }
  std::vector<uint64_t> tokens(payloads.size());
  std::iota(tokens.begin(), tokens.end(), 1000);
  EXPECT_EQ(pair.sent, tokens);
  EXPECT_FALSE(pair.a->wants_write());
}

TEST(TcpConnectionTest, AnUrgentFrameOvertakesQueuedFramesButNotAHalfWrittenOne) {
  Pair pair;
  std::vector<std::byte> big(1 << 20, std::byte{7});
  for (uint64_t i = 0; i < 4; ++i) {
    wire::DataFrameHeader h;
    h.length = static_cast<uint32_t>(big.size());
    h.op_seq = i;
    pair.a->queue(h, big, i);
  }
  // The socket pair takes part of frame 0 now (it holds far less than 1 MiB); the rest waits.
  ASSERT_TRUE(pair.a->on_writable());
  // Frames 1-3 whole and the rest of frame 0 still queued: frame 0 is half written.
  const size_t frame = wire::kDataFrameHeaderBytes + big.size();
  ASSERT_GT(pair.a->queued_bytes(), 3 * frame);
  ASSERT_LT(pair.a->queued_bytes(), 4 * frame);
  wire::DataFrameHeader ack;
  ack.type = wire::FrameType::kAck;
  ack.channel_seq = 99;
  pair.a->queue_urgent(ack, {}, 42);
  ASSERT_TRUE(pair.pump(5));
  std::vector<uint64_t> order;
  for (const auto& r : pair.got) {
    order.push_back(r.header.type == wire::FrameType::kAck ? r.header.channel_seq
                                                           : r.header.op_seq);
  }
  // Frame 0 was half written: the ack goes right after it, ahead of 1, 2 and 3.
  EXPECT_EQ(order, (std::vector<uint64_t>{0, 99, 1, 2, 3}));
  EXPECT_EQ(pair.sent, (std::vector<uint64_t>{0, 42, 1, 2, 3}));
}

// Every other large frame is read straight into a buffer of its own; the rest, and every
// small one, through the connection's buffer. Both arrive whole and in order.
TEST(TcpConnectionTest, PlacedFramesArriveWholeInTheirDestinationInOrder) {
  Pair pair;
  auto keep = std::make_shared<int>(0);
  std::vector<std::vector<std::byte>> destinations;
  size_t offered = 0;
  pair.place = [&](const wire::DataFrameHeader& h) -> TcpConnection::Placement {
    if (offered++ % 2 == 1) return {};
    destinations.emplace_back(h.length);
    return {destinations.back(), keep};
  };
  pair.on_placed = [&](const wire::DataFrameHeader& h) {
    pair.got.push_back({h, destinations.back()});
    return std::string();
  };
  std::vector<std::vector<std::byte>> payloads;
  const size_t sizes[] = {1 << 20, 5, TcpConnection::kPlaceMinBytes, 70001, 0, (4 << 20) - 1};
  for (size_t i = 0; i < 36; ++i) {
    std::vector<std::byte> p(sizes[i % std::size(sizes)]);
    for (size_t j = 0; j < p.size(); ++j) p[j] = static_cast<std::byte>((i * 37 + j) & 0xFF);
    payloads.push_back(std::move(p));
  }
  for (size_t i = 0; i < payloads.size(); ++i) {
    wire::DataFrameHeader h;
    h.length = static_cast<uint32_t>(payloads[i].size());
    h.op_seq = i;
    pair.a->queue(h, payloads[i], i);
  }
  ASSERT_TRUE(pair.pump(payloads.size())) << pair.a->error() << pair.b->error();
  for (size_t i = 0; i < payloads.size(); ++i) {
    EXPECT_EQ(pair.got[i].header.op_seq, i);
    EXPECT_EQ(pair.got[i].payload, payloads[i]) << "frame " << i;
  }
  EXPECT_GE(destinations.size(), 6u);
  EXPECT_EQ(keep.use_count(), 1);  // released once each placed frame ended
}

// A placement abandoned mid-frame (its op failed, its client may reuse the memory): the
// rest of the payload goes nowhere near the destination, the frame ends in on_discarded
// (once, when its last byte is in) and not on_placed, the memory's owner is released at
// once, and the next frame is intact.
TEST(TcpConnectionTest, AbandonedPlacementStopsWritingItsDestination) {
  Pair pair;
  auto keep = std::make_shared<int>(0);
  std::vector<std::byte> destination(4 << 20, std::byte{0xEE});
  int placed_calls = 0;
  pair.place = [&](const wire::DataFrameHeader& h) -> TcpConnection::Placement {
    if (h.op_seq != 1) return {};
    return {std::span<std::byte>(destination.data(), h.length), keep};
  };
  pair.on_placed = [&](const wire::DataFrameHeader&) {
    ++placed_calls;
    return std::string();
  };
  std::vector<std::byte> big(destination.size(), std::byte{0x11});
  std::vector<std::byte> small(100, std::byte{0x22});
  wire::DataFrameHeader h;
  h.op_seq = 1;
  h.length = static_cast<uint32_t>(big.size());
  pair.a->queue(h, big, 1);
  h.op_seq = 2;
  h.length = static_cast<uint32_t>(small.size());
  pair.a->queue(h, small, 2);
  // Until part of the big payload is in its destination.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (destination[0] != std::byte{0x11} && Clock::now() < deadline) {
    ASSERT_TRUE(pair.a->on_writable());
    ASSERT_TRUE(pair.b->on_readable(64 << 10));
  }
  ASSERT_EQ(destination[0], std::byte{0x11});
  ASSERT_NE(destination.back(), std::byte{0x11}) << "the whole frame came in one read";
  EXPECT_FALSE(pair.b->abandon_placement(&placed_calls)) << "another owner's placement";
  EXPECT_TRUE(pair.b->abandon_placement(keep.get()));
  EXPECT_EQ(keep.use_count(), 1) << "the owner must be released when abandoned";
  const size_t written = static_cast<size_t>(
      std::find(destination.begin(), destination.end(), std::byte{0xEE}) - destination.begin());
  ASSERT_TRUE(pair.pump(1)) << pair.a->error() << pair.b->error();
  EXPECT_EQ(pair.got[0].header.op_seq, 2u);
  EXPECT_EQ(pair.got[0].payload, small);
  EXPECT_EQ(placed_calls, 0);
  ASSERT_EQ(pair.discarded.size(), 1u);
  EXPECT_EQ(pair.discarded[0].op_seq, 1u);
  EXPECT_TRUE(std::all_of(destination.begin() + static_cast<std::ptrdiff_t>(written),
                          destination.end(), [](std::byte b) { return b == std::byte{0xEE}; }))
      << "bytes after the abandon point reached the destination";
}

TEST(TcpConnectionTest, PayloadIsReadAtSendTimeNotQueueTime) {
  Pair pair;
  std::vector<std::byte> payload(64, std::byte{1});
  wire::DataFrameHeader h;
  h.length = 64;
  pair.a->queue(h, payload, 1);
  payload.assign(64, std::byte{2});  // the caller promised not to, but it shows no copy
  ASSERT_TRUE(pair.pump(1));
  EXPECT_EQ(pair.got[0].payload[0], std::byte{2});
}

TEST(TcpConnectionTest, GarbageFailsTheConnectionNamingTheField) {
  Pair pair;
  const char junk[64] = "GET / HTTP/1.1\r\nHost: plexus\r\n\r\n";
  ASSERT_EQ(::write(pair.a->fd(), junk, sizeof(junk)), static_cast<ssize_t>(sizeof(junk)));
  EXPECT_FALSE(pair.b->on_readable());
  EXPECT_THAT(pair.b->error(), HasSubstr("bad magic"));
  EXPECT_TRUE(pair.got.empty());
}

TEST(TcpConnectionTest, OversizedPayloadIsRefusedBeforeItIsRead) {
  Pair pair(wire::DataFrameLimits{1024});
  std::vector<std::byte> payload(4096);
  wire::DataFrameHeader h;
  h.length = 4096;
  pair.a->queue(h, payload, 1);
  EXPECT_FALSE(pair.pump(1));
  EXPECT_THAT(pair.b->error(), HasSubstr("exceeds the limit 1024"));
}

TEST(TcpConnectionTest, ClosedPeerIsAnErrorAfterWhatItSent) {
  Pair pair;
  std::vector<std::byte> payload(16);
  wire::DataFrameHeader h;
  h.length = 16;
  pair.a->queue(h, payload, 1);
  ASSERT_TRUE(pair.a->on_writable());
  EXPECT_TRUE(pair.b->on_readable());
  EXPECT_EQ(pair.got.size(), 1u);
  pair.a.reset();
  EXPECT_FALSE(pair.b->on_readable());
  EXPECT_THAT(pair.b->error(), HasSubstr("peer closed"));
}

TEST(TcpConnectionTest, AReceiverThatRefusesAFrameFailsTheConnectionWithItsReason) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  TcpConnection a(fds[0], {}, {[](const auto&, auto) { return std::string(); }, nullptr});
  TcpConnection b(
      fds[1], {},
      {[](const auto&, auto) { return std::string("frame for unknown comm 7"); }, nullptr});
  std::vector<std::byte> payload(8);
  wire::DataFrameHeader h;
  h.length = 8;
  a.queue(h, payload, 1);
  ASSERT_TRUE(a.on_writable());
  EXPECT_FALSE(b.on_readable());
  EXPECT_EQ(b.error(), "frame for unknown comm 7");
}

TEST(TcpConnectionTest, TheReceiveBufferGrowsAsFramesNeedItAndGoesOnceEmpty) {
  Pair pair;  // no placement: every frame is read whole into the buffer
  EXPECT_EQ(pair.b->buffer_bytes(), 0u) << "nothing held before anything arrives";
  wire::DataFrameHeader small;
  small.type = wire::FrameType::kHeartbeat;
  pair.a->queue(small, {}, 1);
  ASSERT_TRUE(pair.pump(1)) << pair.a->error() << pair.b->error();
  EXPECT_GT(pair.b->buffer_bytes(), 0u);
  EXPECT_LE(pair.b->buffer_bytes(), 4096u) << "a heartbeat needs no frame-sized buffer";

  std::vector<std::byte> big(300 << 10, std::byte{9});
  wire::DataFrameHeader h;
  h.length = static_cast<uint32_t>(big.size());
  h.op_seq = 7;
  pair.a->queue(h, big, 2);
  ASSERT_TRUE(pair.pump(2)) << pair.a->error() << pair.b->error();
  EXPECT_EQ(pair.got[1].payload, big);
  EXPECT_GE(pair.b->buffer_bytes(), wire::kDataFrameHeaderBytes + big.size());

  EXPECT_GE(pair.b->release_buffer(), wire::kDataFrameHeaderBytes + big.size());
  EXPECT_EQ(pair.b->buffer_bytes(), 0u);
  pair.a->queue(h, big, 3);  // made again for the next frame
  ASSERT_TRUE(pair.pump(3)) << pair.a->error() << pair.b->error();
  EXPECT_EQ(pair.got[2].payload, big);
}

TEST(TcpConnectionTest, AReceiveBufferHoldingPartOfAFrameIsKept) {
  Pair pair;
  std::vector<std::byte> big(1 << 20, std::byte{3});
  wire::DataFrameHeader h;
  h.length = static_cast<uint32_t>(big.size());
  pair.a->queue(h, big, 1);
  ASSERT_TRUE(pair.a->on_writable());  // the socket pair takes part of it
  ASSERT_TRUE(pair.b->on_readable(64 << 10));
  ASSERT_TRUE(pair.got.empty());
  EXPECT_EQ(pair.b->release_buffer(), 0u) << "the bytes of the frame read so far stay";
  ASSERT_TRUE(pair.pump(1)) << pair.a->error() << pair.b->error();
  EXPECT_EQ(pair.got[0].payload, big);
}

}  // namespace
}  // namespace plexus::transports
