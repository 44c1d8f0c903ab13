// NodeLinks across NIC failures, over real loopback TCP between two NodeLinks: a NIC that
// goes down fails its paths and the peer is told over the other path (its own timeout is
// far off), no byte is lost; with no path left the peer is kept for the grace period, a
// path back within it carries what waited, and past it the error names the peer; a drain
// moves traffic off a NIC with nothing resent; a peer that starts a new channel is not
// mixed with the old one. Telemetry: the path and NIC windows count exactly what moved.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "daemon/links/node_links.h"
#include "monitor/window_summary.h"
#include "tests/unit/tcp_pair.h"
#include "transports/tcp/tcp_path.h"

namespace plexus::daemon {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
namespace wire = transports::wire;

using test::tcp_pair;

std::byte pattern(uint32_t message, uint64_t offset) {
  return static_cast<std::byte>((message * 131 + offset * 7 + offset / 4099) & 0xFF);
}

// One side: its NodeLinks, what arrived (message -> bytes), what it was told.
struct Side {
  explicit Side(transports::ReliableChannel::Settings settings,
                NodeLinks::Telemetry telemetry = {}) {
    NodeLinks::Handler handler;
    handler.on_frame = [this](uint64_t, const wire::DataFrameHeader& h,
                              std::span<const std::byte> payload) {
      auto& bytes = received[h.step];
      if (bytes.size() < h.offset + payload.size()) bytes.resize(h.offset + payload.size());
      std::copy(payload.begin(), payload.end(), bytes.begin() + static_cast<long>(h.offset));
      return std::string();
    };
    handler.on_lost = [this](uint64_t peer, const std::string& name, const std::string& why) {
      lost = std::to_string(peer) + " " + name + ": " + why;
      lost_at = Clock::now();
    };
    handler.on_path_lost = [this](uint64_t, const std::string& nic, const std::string&,
                                  const std::string&, bool, bool) { paths_lost.push_back(nic); };
    links = std::make_unique<NodeLinks>(handler, 64 * 1024, settings, telemetry);
  }
  std::unique_ptr<NodeLinks> links;
  std::map<uint32_t, std::vector<std::byte>> received;
  std::vector<std::string> paths_lost;
  std::string lost;
  Clock::time_point lost_at;
  // Second descriptors of path sockets: a path this side fails then sends no FIN, as when its
  // NIC is really down, so only a path notice can tell the peer.
  std::vector<int> held;
  ~Side() {
    links.reset();
    for (int fd : held) ::close(fd);
  }
};

transports::ReliableChannel::Settings slow_timeouts() {
  transports::ReliableChannel::Settings s;
  s.path_timeout = std::chrono::milliseconds(30000);  // silence alone would take 30 s
  s.last_path_grace = std::chrono::milliseconds(5000);
  return s;
}

// A path between a (peer id 2, "b") and b (peer id 1, "a") over NIC `nic` on both.
void connect(Side& a, Side& b, const std::string& nic) {
  auto [fa, fb] = tcp_pair();
  a.held.push_back(::dup(fa));
  b.held.push_back(::dup(fb));
  a.links->add(2, "b", transports::tcp_path_opener(fa), nic);
  b.links->add(1, "a", transports::tcp_path_opener(fb), nic);
}

template <typename Done>
bool pump_until(Side& a, Side& b, Done done, std::chrono::milliseconds most) {
  const auto deadline = Clock::now() + most;
  while (!done()) {
    if (Clock::now() > deadline) return false;
    a.links->poll(1);
    b.links->poll(1);
  }
  return true;
}

struct Message {
  std::vector<std::byte> data;
  bool done = false;
};

void send(Side& from, uint64_t peer, uint32_t step, Message& m, size_t bytes) {
  m.data.resize(bytes);
  for (size_t i = 0; i < bytes; ++i) m.data[i] = pattern(step, i);
  ASSERT_TRUE(from.links->send_message(peer, 1, 0, step, m.data, nullptr, [&m] { m.done = true; }));
}

bool exact(const Side& to, uint32_t step, const Message& m) {
  auto it = to.received.find(step);
  return it != to.received.end() && it->second == m.data;
}

// A path over rail0, and one message of `bytes` from a to b over it, acknowledged.
void one_message_on_one_path(Side& a, Side& b, size_t bytes) {
  connect(a, b, "rail0");
  Message m;
  send(a, 2, 0, m, bytes);
  ASSERT_TRUE(pump_until(
      a, b, [&] { return m.done; }, std::chrono::seconds(10)));
}

const NodeLinks::PeerInfo* peer_info(const std::vector<NodeLinks::PeerInfo>& peers) {
  return peers.empty() ? nullptr : &peers.front();
}

TEST(NodeLinksFailoverTest, ANicDownFailsItsPathsTellsThePeerAndLosesNoByte) {
  Side a(slow_timeouts());
  Side b(slow_timeouts());
  connect(a, b, "rail0");
  connect(a, b, "rail1");
  constexpr int kMessages = 24;
  std::vector<Message> messages(kMessages);
  for (uint32_t i = 0; i < kMessages / 2; ++i) send(a, 2, i, messages[i], 1 << 20);
  // Mid-transfer: frames are queued and unacknowledged on both paths.
  ASSERT_TRUE(pump_until(
      a, b, [&] { return b.received.size() >= 2; }, std::chrono::seconds(10)));
  EXPECT_EQ(a.links->nic_down("rail0", "went down (test)"), 1u);
  EXPECT_EQ(a.paths_lost, std::vector<std::string>{"rail0"});
  for (uint32_t i = kMessages / 2; i < kMessages; ++i) send(a, 2, i, messages[i], 1 << 20);
  auto all_done = [&] {
    for (auto& m : messages) {
      if (!m.done) return false;
    }
    return true;
  };
  ASSERT_TRUE(pump_until(a, b, all_done, std::chrono::seconds(20)));
  for (uint32_t i = 0; i < kMessages; ++i) EXPECT_TRUE(exact(b, i, messages[i])) << "message " << i;
  // b failed its end on a's notice, long before its 30 s timeout.
  ASSERT_TRUE(pump_until(
      a, b, [&] { return b.paths_lost.size() == 1; }, std::chrono::seconds(5)));
  EXPECT_EQ(b.paths_lost.front(), "rail0");
  EXPECT_TRUE(a.lost.empty()) << a.lost;
  EXPECT_TRUE(b.lost.empty()) << b.lost;
  pump_until(
      a, b, [] { return false; }, std::chrono::milliseconds(150));  // a snapshot
  const auto peers = a.links->snapshot();
  ASSERT_NE(peer_info(peers), nullptr);
  ASSERT_EQ(peers.front().paths.size(), 1u);
  EXPECT_EQ(peers.front().paths.front().nic, "rail1");
  EXPECT_EQ(peers.front().counters.path_failures, 1u);
}

TEST(NodeLinksFailoverTest, WithNoPathLeftThePeerIsKeptForTheGraceThenNamedInTheError) {
  auto settings = slow_timeouts();
  settings.last_path_grace = std::chrono::milliseconds(300);
  Side a(settings);
  Side b(slow_timeouts());
  connect(a, b, "rail0");
  Message m;
  send(a, 2, 0, m, 256 << 10);
  ASSERT_TRUE(pump_until(
      a, b, [&] { return m.done; }, std::chrono::seconds(10)));
  const auto down_at = Clock::now();
  a.links->nic_down("rail0", "went down (test)");
  EXPECT_TRUE(a.links->has(2));  // frames for it wait
  ASSERT_TRUE(pump_until(
      a, b, [&] { return !a.lost.empty(); }, std::chrono::seconds(10)));
  // The grace runs from when the peer was last heard: a frame or heartbeat at most one
  // heartbeat interval (50 ms) before the NIC went down.
  EXPECT_GE(a.lost_at - down_at, std::chrono::milliseconds(250));
  EXPECT_THAT(a.lost, HasSubstr("no path to node b for"));
  EXPECT_THAT(a.lost, HasSubstr("grace 300 ms"));
  EXPECT_THAT(a.lost, HasSubstr("NIC rail0 went down"));
  EXPECT_FALSE(a.links->has(2));
}

TEST(NodeLinksFailoverTest, APathBackWithinTheGraceCarriesWhatWaited) {
  Side a(slow_timeouts());
  Side b(slow_timeouts());
  connect(a, b, "rail0");
  Message first;
  send(a, 2, 0, first, 1 << 20);
  ASSERT_TRUE(pump_until(
      a, b, [&] { return b.received.count(0) != 0; }, std::chrono::seconds(10)));
  a.links->nic_down("rail0", "went down (test)");
  Message second;
  send(a, 2, 1, second, 3 << 20);  // waits: no path
  pump_until(
      a, b, [] { return false; }, std::chrono::milliseconds(100));
  EXPECT_FALSE(second.done);
  connect(a, b, "rail0");  // back (on probation, taken at once: the only path)
  ASSERT_TRUE(pump_until(
      a, b, [&] { return first.done && second.done; }, std::chrono::seconds(20)));
  EXPECT_TRUE(exact(b, 0, first));
  EXPECT_TRUE(exact(b, 1, second));
  EXPECT_TRUE(a.lost.empty()) << a.lost;
}

TEST(NodeLinksFailoverTest, ADrainMovesTrafficOffTheNicInBothDirectionsWithNothingResent) {
  Side a(slow_timeouts());
  Side b(slow_timeouts());
  connect(a, b, "rail0");
  connect(a, b, "rail1");
  EXPECT_EQ(a.links->drain_nic("rail1", true), 1u);
  pump_until(
      a, b, [] { return false; }, std::chrono::milliseconds(150));  // b hears of it
  std::vector<Message> to_b(8), to_a(8);
  for (uint32_t i = 0; i < 8; ++i) {
    send(a, 2, i, to_b[i], 1 << 20);
    send(b, 1, i, to_a[i], 1 << 20);
  }
  auto all_done = [&] {
    for (uint32_t i = 0; i < 8; ++i) {
      if (!to_b[i].done || !to_a[i].done) return false;
    }
    return true;
  };
  ASSERT_TRUE(pump_until(a, b, all_done, std::chrono::seconds(20)));
  for (uint32_t i = 0; i < 8; ++i) {
    EXPECT_TRUE(exact(b, i, to_b[i]));
    EXPECT_TRUE(exact(a, i, to_a[i]));
  }
  pump_until(
      a, b, [] { return false; }, std::chrono::milliseconds(150));
  for (Side* side : {&a, &b}) {
    const auto peers = side->links->snapshot();
    ASSERT_NE(peer_info(peers), nullptr);
    EXPECT_EQ(peers.front().counters.frames_resent, 0u);
    for (const auto& path : peers.front().paths) {
      if (path.nic != "rail1") continue;
      EXPECT_EQ(path.state, "drained");
      EXPECT_LT(path.bytes_sent, 64u << 10) << "data went over the drained NIC";
    }
  }
  EXPECT_EQ(a.links->drain_nic("rail1", false), 1u);
  pump_until(
      a, b, [] { return false; }, std::chrono::milliseconds(150));
  const auto after = b.links->snapshot();  // kept: a range-for over a temporary's member dangles
  ASSERT_NE(peer_info(after), nullptr);
  for (const auto& path : after.front().paths) EXPECT_EQ(path.state, "active");
}

// plexusctl nic fault over TCP: nothing to inject, said by name, and the path is untouched;
// the snapshot says what carries each path.
TEST(NodeLinksFailoverTest, AFaultIsNotInjectedIntoATcpPathAndTheRefusalSaysWhy) {
  Side a(slow_timeouts());
  Side b(slow_timeouts());
  connect(a, b, "rail0");
  auto refused = a.links->inject_fault("rail0");
  EXPECT_FALSE(refused.ok());
  EXPECT_THAT(refused.error(), HasSubstr("over rail0: a TCP path has no fault to inject"));
  auto none = a.links->inject_fault("rail7");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0u);
  EXPECT_EQ(none.error(), "");
  Message m;
  send(a, 2, 0, m, 1 << 20);
  ASSERT_TRUE(pump_until(
      a, b, [&] { return m.done; }, std::chrono::seconds(20)));
  EXPECT_TRUE(exact(b, 0, m));
  pump_until(
      a, b, [] { return false; }, std::chrono::milliseconds(150));
  const auto peers = a.links->snapshot();
  ASSERT_NE(peer_info(peers), nullptr);
  EXPECT_EQ(peers.front().counters.path_failures, 0u);
  ASSERT_EQ(peers.front().paths.size(), 1u);
  EXPECT_EQ(peers.front().paths.front().transport, "tcp");
}

TEST(NodeLinksFailoverTest, APeerThatStartsANewChannelIsLostNotMixedWithTheOld) {
  Side a(slow_timeouts());
  Side b(slow_timeouts());
  ASSERT_NO_FATAL_FAILURE(one_message_on_one_path(a, b, 64 << 10));
  // b gives its channel up (as after its grace) and opens a new one to a.
  Side b2(slow_timeouts());
  auto [fa, fb] = tcp_pair();
  a.links->add(2, "b", transports::tcp_path_opener(fa), "rail1");
  b2.links->add(1, "a", transports::tcp_path_opener(fb), "rail1");
  ASSERT_TRUE(pump_until(
      a, b2, [&] { return !a.lost.empty(); }, std::chrono::seconds(5)));
  EXPECT_THAT(a.lost, HasSubstr("gave up its channel to this node"));
}

// Every path's windows, summed (data bytes and chunks since the path was made; latency
// samples of the windows still kept).
struct Seen {
  monitor::TrafficCounts totals;
  uint64_t latency_samples = 0;
  size_t paths_used = 0;
};
Seen seen_on_paths(const Side& side) {
  Seen seen;
  const auto peers = side.links->snapshot();
  for (const auto& peer : peers) {
    for (const auto& path : peer.paths) {
      if (!path.windows) continue;
      const auto totals = path.windows->totals();
      seen.totals += totals;
      if (totals.busy()) ++seen.paths_used;
      const auto windows = path.windows->recent(Clock::now(), path.windows->capacity());
      seen.latency_samples += monitor::summarize(windows, path.windows->width()).latency.count;
    }
  }
  return seen;
}

TEST(NodeLinksTelemetryTest, PathAndNicWindowsCountExactlyWhatMovedAndEveryAcknowledgement) {
  const NodeLinks::Telemetry telemetry{std::chrono::milliseconds(1), 20000};
  Side a(slow_timeouts(), telemetry);
  Side b(slow_timeouts(), telemetry);
  connect(a, b, "rail0");
  connect(a, b, "rail1");
  constexpr int kMessages = 8;
  constexpr uint64_t kBytes = 1 << 20;
  std::vector<Message> messages(kMessages);
  for (uint32_t i = 0; i < kMessages; ++i) send(a, 2, i, messages[i], kBytes);
  ASSERT_TRUE(pump_until(
      a, b,
      [&] {
        return std::all_of(messages.begin(), messages.end(),
                           [](const Message& m) { return m.done; });
      },
      std::chrono::seconds(20)));
  pump_until(
      a, b, [] { return false; }, std::chrono::milliseconds(150));  // a snapshot is published
  const uint64_t chunks = kMessages * kBytes / (64 << 10);
  const Seen sent = seen_on_paths(a);
  EXPECT_EQ(sent.totals.bytes_out, kMessages * kBytes);
  EXPECT_EQ(sent.totals.chunks_out, chunks);
  EXPECT_EQ(sent.totals.resent_bytes, 0u);
  EXPECT_EQ(sent.paths_used, 2u) << "striped over both paths";
  EXPECT_EQ(sent.latency_samples, chunks) << "one latency per acknowledged chunk";
  const Seen received = seen_on_paths(b);
  EXPECT_EQ(received.totals.bytes_in, kMessages * kBytes);
  EXPECT_EQ(received.totals.chunks_in, chunks);
  EXPECT_EQ(received.totals.bytes_out, 0u);

  const auto nics = a.links->nic_windows();
  ASSERT_EQ(nics.size(), 2u);
  EXPECT_EQ(nics.at("rail0")->totals().bytes_out + nics.at("rail1")->totals().bytes_out,
            kMessages * kBytes);
  EXPECT_EQ(a.links->nic_down("rail0", "went down (test)"), 1u);
  EXPECT_EQ(nics.at("rail0")->totals().errors, 1u);
  EXPECT_EQ(nics.at("rail1")->totals().errors, 0u);
}

TEST(NodeLinksTelemetryTest, OffRecordsNothing) {
  Side a(slow_timeouts());
  Side b(slow_timeouts());
  ASSERT_NO_FATAL_FAILURE(one_message_on_one_path(a, b, 256 << 10));
  const auto peers = a.links->snapshot();
  ASSERT_EQ(peers.size(), 1u);
  for (const auto& path : peers.front().paths) EXPECT_EQ(path.windows, nullptr);
  EXPECT_TRUE(a.links->nic_windows().empty());
}

}  // namespace
}  // namespace plexus::daemon
