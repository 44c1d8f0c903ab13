// The reliable channel over in-memory paths that lose, reorder, die, go silent and come
// back: every frame is delivered exactly once with its exact bytes, and every frame's memory
// is released exactly once, after the peer acknowledged it.
#include "transports/channel/reliable_channel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <vector>

namespace plexus::transports {
namespace {

using namespace std::chrono_literals;
using TimePoint = ReliableChannel::TimePoint;
namespace wire = transports::wire;

// One end of an in-memory path: what the channel queued and the network has not taken.
class SimPathEnd : public FramePath {
 public:
  struct Queued {
    wire::DataFrameHeader header;
    std::span<const std::byte> payload;
    uint64_t token;
  };
  void queue(const wire::DataFrameHeader& header, std::span<const std::byte> payload,
             uint64_t token) override {
    outbox.push_back({header, payload, token});
    backlog += wire::kDataFrameHeaderBytes + payload.size();
    if (header.type == wire::FrameType::kAck) ++acks;
  }
  uint64_t backlog_bytes() const override { return backlog; }
  void abandon_placement_of(uint64_t seq) override { abandoned.push_back(seq); }
  int64_t network_silence_ms() const override { return network_silence; }

  std::deque<Queued> outbox;
  uint64_t backlog = 0;
  std::vector<uint64_t> abandoned;
  int64_t network_silence = -1;  // what the "kernel" says; -1: unknown
  uint64_t acks = 0;             // acknowledgements queued here
};

// Two channels (ends 0 and 1) and the paths between them, stepped 1 ms at a time.
class SimNetwork {
 public:
  struct Link {
    SimPathEnd end[2];
    uint32_t id[2] = {0, 0};
    struct Arrival {
      wire::DataFrameHeader header;
      std::vector<std::byte> payload;
      int at_step;
    };
    std::deque<Arrival> in_flight[2];  // direction d: from end d to end 1 - d
    int64_t bytes_per_step = 64 << 10;
    int64_t budget[2] = {0, 0};
    int delay_steps = 1;
    bool dead = false;
    bool black_hole = false;
    int black_hole_since = 0;
    uint64_t carried[2] = {0, 0};  // payload bytes taken by the network, per direction
  };

  struct Endpoint {
    std::unique_ptr<ReliableChannel> channel;
    // Frames this end sends: expected contents, the live buffer (poisoned once released).
    std::vector<std::vector<std::byte>> expected;
    std::vector<std::vector<std::byte>> buffers;
    std::vector<int> released;  // per token
    // Frames this end received, by op_seq.
    std::map<uint64_t, int> deliveries;
    std::vector<uint64_t> delivery_order;  // op_seq
    std::vector<std::string> errors;
    std::vector<std::pair<uint32_t, ReliableChannel::PathState>> path_states;
    std::map<uint64_t, std::vector<std::byte>> placed_into;  // op_seq -> destination
  };

  explicit SimNetwork(ReliableChannel::Settings settings = {}, bool use_placement = true,
                      const FlowPolicies* policies = nullptr)
      : use_placement_(use_placement) {
    for (int e = 0; e < 2; ++e) {
      ReliableChannel::Handler h;
      h.on_frame = [this, e](const wire::DataFrameHeader& header, std::span<const std::byte> p) {
        return received(e, header, p);
      };
      if (use_placement_) {
        h.place = [this, e](const wire::DataFrameHeader& header) {
          auto& dest = ends_[e].placed_into[header.op_seq];
          dest.assign(header.length, std::byte{0});
          return Placement{dest, nullptr};
        };
        h.on_placed = [this, e](const wire::DataFrameHeader& header) {
          auto& dest = ends_[e].placed_into[header.op_seq];
          return received(e, header, dest);
        };
      }
      h.on_released = [this, e](uint64_t token, uint32_t) {
        auto& end = ends_[e];
        ++end.released.at(token);
        // Poison: a copy sent after release would carry these bytes and be caught.
        std::fill(end.buffers[token].begin(), end.buffers[token].end(), std::byte{0xEE});
      };
      h.on_path_state = [this, e](uint32_t path, ReliableChannel::PathState s, const std::string&) {
        ends_[e].path_states.emplace_back(path, s);
      };
      ends_[e].channel = std::make_unique<ReliableChannel>(settings, h, policies);
    }
  }

  Endpoint& end(int e) { return ends_[e]; }
  // A stalled end's daemon neither reads, writes nor ticks (its thread is held up); its
  // transport still acknowledges, so the peer's network view stays live.
  bool stalled[2] = {false, false};
  // Links report their network's view (kernel acknowledgements) to the channel.
  bool report_network_silence = false;
  void make_black_hole(size_t i) {
    links_[i]->black_hole = true;
    links_[i]->black_hole_since = step_;
  }
  ReliableChannel& channel(int e) { return *ends_[e].channel; }
  Link& link(size_t i) { return *links_[i]; }
  size_t links() const { return links_.size(); }
  TimePoint now() const { return start_ + std::chrono::milliseconds(step_); }
  int step_count() const { return step_; }

  size_t add_link(int64_t bytes_per_step = 64 << 10, bool probation = false, bool backup = false,
                  bool latency = false) {
    auto link = std::make_unique<Link>();
    link->bytes_per_step = bytes_per_step;
    for (int e = 0; e < 2; ++e) {
      link->id[e] = ends_[e].channel->add_path(&link->end[e], now(), probation, backup, latency);
    }
    links_.push_back(std::move(link));
    return links_.size() - 1;
  }

  // A socket error on both ends (e.g. a local NIC went down): both channels are told.
  void kill(size_t i) {
    Link& l = *links_[i];
    if (l.dead) return;
    l.dead = true;
    for (int e = 0; e < 2; ++e) {
      l.in_flight[e].clear();
      l.end[e].outbox.clear();
      l.end[e].backlog = 0;
      if (ends_[e].channel->state(l.id[e]) != ReliableChannel::PathState::kFailed) {
        ends_[e].channel->path_failed(l.id[e], "killed by the test");
      }
    }
  }

  // Queues `count` frames of random sizes (some empty) from end `e`; returns the first op_seq.
  uint64_t send_frames(int e, int count, uint32_t max_bytes, std::mt19937& rng, uint32_t flow = 0) {
    auto& end = ends_[e];
    const uint64_t first = end.expected.size();
    for (int i = 0; i < count; ++i) {
      const uint32_t bytes = rng() % 8 == 0 ? 0 : 1 + rng() % max_bytes;
      std::vector<std::byte> data(bytes);
      for (auto& b : data) b = static_cast<std::byte>(rng());
      send_one(e, wire::FrameType::kData, std::move(data), flow);
    }
    return first;
  }
  // Payload bytes of end e's frames from index `first` on.
  uint64_t bytes_from(int e, uint64_t first) const {
    uint64_t total = 0;
    for (uint64_t i = first; i < ends_[e].expected.size(); ++i)
      total += ends_[e].expected[i].size();
    return total;
  }

  uint64_t send_one(int e, wire::FrameType type, std::vector<std::byte> data, uint32_t flow = 0) {
    auto& end = ends_[e];
    const uint64_t index = end.expected.size();
    end.expected.push_back(data);
    end.buffers.push_back(std::move(data));
    end.released.push_back(0);
    wire::DataFrameHeader h;
    h.type = type;
    h.op_seq = index;
    h.length = static_cast<uint32_t>(end.buffers.back().size());
    end.channel->send(h, end.buffers.back(), index, flow);
    return index;
  }

  void step(std::mt19937& rng, int jitter_steps = 0) {
    ++step_;
    for (auto& link : links_) {
      Link& l = *link;
      if (l.dead) continue;
      for (int e = 0; e < 2 && report_network_silence; ++e) {
        l.end[e].network_silence = l.black_hole ? step_ - l.black_hole_since : 0;
      }
      for (int d = 0; d < 2; ++d) {
        if (stalled[d]) continue;
        l.budget[d] = std::min<int64_t>(l.budget[d] + l.bytes_per_step, l.bytes_per_step);
        SimPathEnd& from = l.end[d];
        while (!from.outbox.empty() && l.budget[d] > 0) {
          SimPathEnd::Queued q = from.outbox.front();
          from.outbox.pop_front();
          const uint64_t size = wire::kDataFrameHeaderBytes + q.payload.size();
          from.backlog -= size;
          l.budget[d] -= static_cast<int64_t>(size);
          l.carried[d] += q.payload.size();
          const int delay =
              l.delay_steps + (jitter_steps ? static_cast<int>(rng() % (jitter_steps + 1)) : 0);
          if (!l.black_hole) {
            // TCP keeps a path's order: a frame never overtakes one sent before it.
            const int at =
                std::max(step_ + delay, l.in_flight[d].empty() ? 0 : l.in_flight[d].back().at_step);
            l.in_flight[d].push_back({q.header, {q.payload.begin(), q.payload.end()}, at});
          }
          ends_[d].channel->on_path_sent(l.id[d], q.token, q.payload.size());
        }
      }
    }
    for (auto& link : links_) {
      Link& l = *link;
      for (int d = 0; d < 2 && !l.dead; ++d) {
        const int to = 1 - d;
        if (stalled[to]) continue;
        while (!l.dead && !l.in_flight[d].empty() && l.in_flight[d].front().at_step <= step_) {
          auto arrival = std::move(l.in_flight[d].front());
          l.in_flight[d].pop_front();
          deliver(l, to, arrival.header, arrival.payload);
        }
      }
    }
    for (int e = 0; e < 2; ++e) {
      if (stalled[e]) continue;
      for (const auto& silent : ends_[e].channel->tick(now())) {
        for (auto& link : links_) {
          if (link->id[e] == silent.path && !link->dead) {
            link->end[e].outbox.clear();
            link->end[e].backlog = 0;
          }
        }
      }
    }
  }

  // Steps until both ends have everything delivered and released, or `max_steps` pass.
  bool run_until_done(std::mt19937& rng, int max_steps, int jitter_steps = 0) {
    for (int i = 0; i < max_steps; ++i) {
      if (done()) return true;
      step(rng, jitter_steps);
    }
    return done();
  }

  bool done() const {
    for (int e = 0; e < 2; ++e) {
      for (int r : ends_[e].released) {
        if (r == 0) return false;
      }
      if (ends_[1 - e].deliveries.size() != ends_[e].expected.size()) return false;
    }
    return true;
  }

  // Every frame exactly once, exact bytes, released exactly once.
  void expect_exact() const {
    for (int e = 0; e < 2; ++e) {
      const Endpoint& from = ends_[e];
      const Endpoint& to = ends_[1 - e];
      for (uint64_t i = 0; i < from.expected.size(); ++i) {
        auto it = to.deliveries.find(i);
        ASSERT_NE(it, to.deliveries.end())
            << "frame " << i << " from end " << e << " never arrived";
        EXPECT_EQ(it->second, 1) << "frame " << i << " from end " << e << " delivered "
                                 << it->second << " times";
        EXPECT_EQ(from.released[i], 1)
            << "frame " << i << " of end " << e << " released " << from.released[i] << " times";
      }
      EXPECT_TRUE(to.errors.empty()) << to.errors.front();
    }
  }

 private:
  std::string received(int e, const wire::DataFrameHeader& header, std::span<const std::byte> p) {
    auto& to = ends_[e];
    const auto& from = ends_[1 - e];
    if (header.op_seq >= from.expected.size()) {
      to.errors.push_back("unknown frame " + std::to_string(header.op_seq));
      return {};
    }
    const auto& want = from.expected[header.op_seq];
    if (p.size() != want.size() || !std::equal(p.begin(), p.end(), want.begin())) {
      to.errors.push_back("frame " + std::to_string(header.op_seq) + " arrived with wrong bytes");
    }
    ++to.deliveries[header.op_seq];
    to.delivery_order.push_back(header.op_seq);
    return {};
  }

  void deliver(Link& l, int to, const wire::DataFrameHeader& h,
               const std::vector<std::byte>& payload) {
    ReliableChannel& ch = *ends_[to].channel;
    std::string error;
    if (use_placement_ && h.length >= 1024) {
      Placement where = ch.place(l.id[to], h, now());
      if (where.destination.data() != nullptr) {
        std::memcpy(where.destination.data(), payload.data(), payload.size());
        error = ch.placed(l.id[to], h, now());
      } else {
        error = ch.receive(l.id[to], h, payload, now());
      }
    } else {
      error = ch.receive(l.id[to], h, payload, now());
    }
    if (!error.empty()) ends_[to].errors.push_back(error);
  }

  bool use_placement_;
  Endpoint ends_[2];
  std::vector<std::unique_ptr<Link>> links_;
  TimePoint start_ = ReliableChannel::Clock::now();
  int step_ = 0;
};

// A handler that takes every frame (for tests that drive one channel by hand).
ReliableChannel::Handler accepting_handler() {
  ReliableChannel::Handler h;
  h.on_frame = [](const wire::DataFrameHeader&, std::span<const std::byte>) {
    return std::string();
  };
  return h;
}

TEST(ChannelReceiverTest, DropsDuplicatesAndMovesTheCumulativePointOverGaps) {
  ChannelReceiver r;
  EXPECT_EQ(r.classify(0), ChannelReceiver::Verdict::kOutOfWindow);
  EXPECT_EQ(r.classify(kChannelWindowFrames + 1), ChannelReceiver::Verdict::kOutOfWindow);
  EXPECT_FALSE(r.record(2));  // the cumulative point waits for 1
  EXPECT_EQ(r.cumulative(), 0u);
  EXPECT_EQ(r.classify(2), ChannelReceiver::Verdict::kDuplicate);
  EXPECT_TRUE(r.record(1));
  EXPECT_EQ(r.cumulative(), 2u);
  EXPECT_EQ(r.classify(1), ChannelReceiver::Verdict::kDuplicate);
  EXPECT_TRUE(r.ack_due());
  EXPECT_EQ(r.take_ack(), 2u);
  EXPECT_FALSE(r.ack_due());
  // Slots are reused as the window slides: a whole window's worth later, nothing is stale.
  for (uint64_t s = 3; s <= 2 * kChannelWindowFrames + 5; ++s) ASSERT_TRUE(r.record(s)) << s;
  EXPECT_EQ(r.cumulative(), 2 * kChannelWindowFrames + 5);
  EXPECT_EQ(r.classify(2 * kChannelWindowFrames + 6), ChannelReceiver::Verdict::kNew);
  EXPECT_EQ(r.classify(3 * kChannelWindowFrames + 6), ChannelReceiver::Verdict::kOutOfWindow);
}

TEST(ChannelReceiverTest, ASelectiveAcknowledgementNamesTheRunAroundTheLatestFrame) {
  ChannelReceiver r;
  for (uint64_t s : {1, 2, 5, 6, 7, 9}) r.record(s);
  EXPECT_EQ(r.cumulative(), 2u);
  EXPECT_EQ(r.take_ack(), 2u);
  EXPECT_FALSE(r.ack_due());
  r.acknowledge_selectively(6);  // 5..7 arrived; 3, 4 and 8 did not
  EXPECT_TRUE(r.ack_due()) << "a selective acknowledgement is due without the cumulative moving";
  ChannelReceiver::Range run;
  EXPECT_EQ(r.take_ack(&run), 2u);
  EXPECT_EQ(run.first, 5u);
  EXPECT_EQ(run.last, 7u);
  EXPECT_FALSE(r.ack_due());
  r.acknowledge_selectively(2);  // already covered by the cumulative point: nothing to say
  EXPECT_FALSE(r.ack_due());
  r.acknowledge_selectively(9);
  r.record(3);
  r.record(4);  // the cumulative point reaches 7
  EXPECT_EQ(r.take_ack(&run), 7u);
  EXPECT_EQ(run.first, 9u);
  EXPECT_EQ(run.last, 9u);
  // Two runs apart since the last take: the latest first, the earliest on the next take; a
  // take without a range (a heartbeat's) leaves them due.
  for (uint64_t s : {11, 12, 20}) r.record(s);
  r.acknowledge_selectively(11);
  r.acknowledge_selectively(20);
  EXPECT_EQ(r.take_ack(), 7u);
  EXPECT_TRUE(r.ack_due());
  EXPECT_EQ(r.take_ack(&run), 7u);
  EXPECT_EQ(run.first, 20u);
  EXPECT_TRUE(r.ack_due());
  EXPECT_EQ(r.take_ack(&run), 7u);
  EXPECT_EQ(run.first, 11u);
  EXPECT_EQ(run.last, 12u);
  EXPECT_FALSE(r.ack_due());
}

TEST(ChannelSenderTest, ASelectiveAcknowledgementReleasesOnceAndItsFramesAreNotSentAgain) {
  ChannelSender s;
  std::vector<std::byte> payload(100);
  for (uint64_t t = 0; t < 5; ++t) {
    s.add({}, payload, t);
    ChannelSender::Frame* f = s.next_waiting();
    ASSERT_NE(f, nullptr);
    s.assigned(*f, 0);
  }
  s.add({}, payload, 5);  // numbered, never sent
  std::vector<ChannelSender::Released> released;
  // A run reaching a frame never sent is refused whole: nothing is released.
  EXPECT_NE(s.acknowledge_selectively(4, 6, &released), "");
  EXPECT_TRUE(released.empty());
  EXPECT_NE(s.acknowledge_selectively(1, 1 + 2 * ChannelReceiver::kMaxSelectiveRun + 1, &released),
            "")
      << "longer than any run a receiver reports";
  EXPECT_NE(s.acknowledge_selectively(3, 2, &released), "");
  EXPECT_TRUE(released.empty());
  EXPECT_EQ(s.acknowledge_selectively(3, 4, &released), "");
  EXPECT_EQ(released, (std::vector<ChannelSender::Released>{{2, 0}, {3, 0}}));
  released.clear();
  EXPECT_EQ(s.path_failed(0), 300u) << "frames 1, 2 and 5 go again, not the two the peer has";
  std::vector<uint64_t> again;
  while (ChannelSender::Frame* f = s.next_waiting()) {
    again.push_back(f->header.channel_seq);
    s.assigned(*f, 1);
  }
  EXPECT_EQ(again, (std::vector<uint64_t>{1, 2, 5, 6}));
  EXPECT_EQ(s.acknowledge(6, &released), "");
  EXPECT_EQ(released, (std::vector<ChannelSender::Released>{{0, 1}, {1, 1}, {4, 1}, {5, 1}}))
      << "each frame released once";
}

TEST(ChannelSenderTest, RefusesAnAcknowledgementOfFramesNeverSentAndKeepsTheWindow) {
  ChannelSender s;
  std::vector<ChannelSender::Released> released;
  for (uint64_t i = 0; i < kChannelWindowFrames + 3; ++i) s.add({}, {}, i);
  EXPECT_NE(s.acknowledge(kChannelWindowFrames + 4, &released), "");
  EXPECT_TRUE(released.empty());
  uint64_t handed_out = 0;
  while (ChannelSender::Frame* f = s.next_waiting()) {
    s.assigned(*f, 0);
    ++handed_out;
  }
  EXPECT_EQ(handed_out, kChannelWindowFrames);  // the window is full
  EXPECT_EQ(s.acknowledge(2, &released), "");
  EXPECT_EQ(released, (std::vector<ChannelSender::Released>{{0, 0}, {1, 0}}));
  while (ChannelSender::Frame* f = s.next_waiting()) {
    s.assigned(*f, 1);
    ++handed_out;
  }
  EXPECT_EQ(handed_out, kChannelWindowFrames + 2);
  EXPECT_EQ(s.path_failed(0), 0u);  // no payload bytes, but they wait again
  EXPECT_EQ(s.waiting(), kChannelWindowFrames - 2 + 1);
}

TEST(ReliableChannelTest, StripedFramesArriveOnceExactAndAreReleasedAfterTheAck) {
  std::mt19937 rng(1);
  SimNetwork net;
  net.add_link();
  net.add_link();
  net.send_frames(0, 1500, 40000, rng);
  net.send_frames(1, 700, 40000, rng);
  ASSERT_TRUE(net.run_until_done(rng, 5000, 3));
  net.expect_exact();
  EXPECT_GT(net.link(0).carried[0], 0u);
  EXPECT_GT(net.link(1).carried[0], 0u);
  EXPECT_EQ(net.channel(0).counters().frames_resent, 0u);
  EXPECT_EQ(net.channel(0).unacknowledged(), 0u);
}

TEST(ReliableChannelTest, APathKilledMidStreamLosesNothingAndDoublesNothing) {
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937 rng(seed);
    SimNetwork net;
    net.add_link();
    net.add_link();
    net.add_link(16 << 10);
    net.send_frames(0, 1500, 60000, rng);
    net.send_frames(1, 500, 60000, rng);
    for (int i = 0; i < 5; ++i) net.step(rng, 4);
    net.kill(0);
    ASSERT_TRUE(net.run_until_done(rng, 10000, 4));
    net.expect_exact();
    EXPECT_GT(net.channel(0).counters().frames_resent, 0u);
    EXPECT_EQ(net.channel(0).state(net.link(0).id[0]), ReliableChannel::PathState::kFailed);
  }
}

TEST(ReliableChannelTest, ASilentBlackHoleIsDetectedByTimeoutAndItsFramesGoAgain) {
  std::mt19937 rng(7);
  ReliableChannel::Settings settings;
  settings.path_timeout = 200ms;
  SimNetwork net(settings);
  net.add_link();
  net.add_link();
  for (int i = 0; i < 10; ++i) net.step(rng);  // both paths live
  net.report_network_silence = true;
  net.make_black_hole(1);  // drops everything, reports nothing
  const int hole_at = net.step_count();
  net.send_frames(0, 800, 30000, rng);
  ASSERT_TRUE(net.run_until_done(rng, 5000));
  net.expect_exact();
  // Both ends failed the path on their own, within the timeout plus a heartbeat or two.
  for (int e = 0; e < 2; ++e) {
    EXPECT_EQ(net.channel(e).state(net.link(1).id[e]), ReliableChannel::PathState::kFailed);
  }
  EXPECT_GT(net.channel(0).counters().bytes_resent, 0u);
  EXPECT_LE(net.step_count() - hole_at, 200 + 2 * 50 + 200);
}

TEST(ReliableChannelTest, APeerDaemonHeldUpWhileItsTransportStillAnswersIsNotFailedOver) {
  std::mt19937 rng(19);
  SimNetwork net;
  net.report_network_silence = true;
  net.add_link();
  net.add_link();
  net.send_frames(0, 400, 30000, rng);
  for (int i = 0; i < 5; ++i) net.step(rng);
  net.stalled[1] = true;  // 400 ms, twice the path timeout
  for (int i = 0; i < 400; ++i) net.step(rng);
  net.stalled[1] = false;
  ASSERT_TRUE(net.run_until_done(rng, 5000));
  net.expect_exact();
  for (int e = 0; e < 2; ++e) {
    EXPECT_EQ(net.channel(e).counters().path_failures, 0u) << "end " << e;
  }
  EXPECT_GT(net.channel(0).counters().slow_peer_ticks, 0u);
  EXPECT_EQ(net.channel(0).counters().frames_resent, 0u);
}

TEST(ReliableChannelTest, TimeThisSideWasHeldUpIsNotCountedAsThePathsSilence) {
  ReliableChannel ch({}, accepting_handler());
  SimPathEnd a;
  auto now = ReliableChannel::Clock::now();
  const uint32_t pa = ch.add_path(&a, now);
  ch.tick(now);
  // This side's thread was held up for a second; the peer's frames wait in the socket.
  now += 1000ms;
  EXPECT_TRUE(ch.tick(now).empty());
  EXPECT_EQ(ch.state(pa), ReliableChannel::PathState::kActive);
  // Then real silence, ticking every 10 ms: the only path is failed once it passes the
  // grace period (2 s), not the path timeout (200 ms).
  int ticks = 0;
  while (ch.state(pa) != ReliableChannel::PathState::kFailed && ticks < 1000) {
    now += 10ms;
    ch.tick(now);
    ++ticks;
  }
  EXPECT_GE(ticks, 195);
  EXPECT_LE(ticks, 215);
  EXPECT_GT(ch.counters().last_path_silent_ticks, 150u);
}

TEST(ReliableChannelTest, AnIdleChannelHeartbeatsAtTheIdleIntervalAndAsksForTicksOnlyThen) {
  std::mt19937 rng(3);
  SimNetwork net;  // heartbeats every 50 ms, every 1000 ms once idle for 1000 ms
  net.add_link();
  net.add_link();
  net.send_frames(0, 20, 30000, rng);
  ASSERT_TRUE(net.run_until_done(rng, 2000));
  for (int i = 0; i < 1500; ++i) net.step(rng);  // idle since
  const uint64_t before = net.channel(0).counters().heartbeats_sent;
  for (int i = 0; i < 3000; ++i) net.step(rng);
  // Two paths, ticked every 1 ms, each heartbeating every 750 ms (a quarter early): 4 each
  // in 3 s, not 60.
  EXPECT_LE(net.channel(0).counters().heartbeats_sent - before, 2u * 4u);
  EXPECT_GE(net.channel(0).counters().heartbeats_sent - before, 2u * 3u);
  for (int e = 0; e < 2; ++e) {
    EXPECT_EQ(net.channel(e).counters().path_failures, 0u) << "end " << e;
    EXPECT_TRUE(net.channel(e).idle(net.link(0).id[e]));
    // The next tick it asks for is its earliest heartbeat or silence due, not the next one.
    EXPECT_GT(net.channel(e).next_tick(), net.now());
    EXPECT_LE(net.channel(e).next_tick(), net.now() + 1000ms);
  }
  net.send_frames(0, 1, 1000, rng);  // traffic: ticks at once
  EXPECT_LE(net.channel(0).next_tick(), net.now());
  ASSERT_TRUE(net.run_until_done(rng, 1000));
  EXPECT_FALSE(net.channel(0).idle(net.link(0).id[0]));
  EXPECT_FALSE(net.channel(1).idle(net.link(0).id[1])) << "the frame it received is traffic";
  net.expect_exact();
}

TEST(ReliableChannelTest, ADeadIdlePathIsFoundWithinThePromiseAndOnceItCarriesWithinTheTimeout) {
  for (const bool send_after : {false, true}) {
    std::mt19937 rng(5);
    SimNetwork net;
    net.report_network_silence = true;
    net.add_link();
    net.add_link();
    for (int i = 0; i < 1500; ++i) net.step(rng);  // idle, both sides told
    net.make_black_hole(1);
    const int hole_at = net.step_count();
    if (send_after) net.send_frames(0, 200, 30000, rng);
    while (net.channel(0).state(net.link(1).id[0]) != ReliableChannel::PathState::kFailed &&
           net.step_count() - hole_at < 5000) {
      net.step(rng);
    }
    const int found_after = net.step_count() - hole_at;
    if (send_after) {
      // Its frames go on the dead path: the peer owes an answer within the path timeout.
      EXPECT_LE(found_after, 200 + 2 * 50) << "sending after idle";
      ASSERT_TRUE(net.run_until_done(rng, 5000));
      net.expect_exact();
    } else {
      // Heard at most a promised interval before the hole: silence past the promise fails it.
      EXPECT_LE(found_after, 1000 + 200 - 50 + 1) << "idle";
    }
    EXPECT_EQ(net.channel(0).state(net.link(0).id[0]), ReliableChannel::PathState::kActive);
  }
}

TEST(ReliableChannelTest, OfTwoPathsASilentOneIsFailedAtThePathTimeout) {
  ReliableChannel ch({}, accepting_handler());
  SimPathEnd a, b;
  auto now = ReliableChannel::Clock::now();
  const uint32_t pa = ch.add_path(&a, now);
  const uint32_t pb = ch.add_path(&b, now);
  int ticks = 0;
  wire::DataFrameHeader heartbeat;
  heartbeat.type = wire::FrameType::kHeartbeat;
  while (ch.state(pa) != ReliableChannel::PathState::kFailed && ticks < 100) {
    now += 10ms;
    ch.receive(pb, heartbeat, {}, now);  // b stays live
    ch.tick(now);
    ++ticks;
  }
  EXPECT_GE(ticks, 19);
  EXPECT_LE(ticks, 22);
  EXPECT_EQ(ch.state(pb), ReliableChannel::PathState::kActive);
}

TEST(ReliableChannelTest, AFlappingPathIsTakenBackAfterProbationEveryTime) {
  std::mt19937 rng(11);
  ReliableChannel::Settings settings;
  settings.stable_after = 30ms;
  SimNetwork net(settings);
  net.add_link();
  size_t flapper = net.add_link();
  net.send_frames(0, 400, 30000, rng);
  for (int flap = 0; flap < 10; ++flap) {
    for (int i = 0; i < 5; ++i) net.step(rng, 2);
    net.kill(flapper);
    net.send_frames(0, 100, 30000, rng);
    net.send_frames(1, 30, 30000, rng);
    flapper = net.add_link(64 << 10, /*probation=*/true);
    EXPECT_EQ(net.channel(0).state(net.link(flapper).id[0]),
              ReliableChannel::PathState::kProbation);
    for (int i = 0; i < 40; ++i) net.step(rng, 2);
    EXPECT_EQ(net.channel(0).state(net.link(flapper).id[0]), ReliableChannel::PathState::kActive)
        << "flap " << flap;
  }
  ASSERT_TRUE(net.run_until_done(rng, 10000, 2));
  net.expect_exact();
  EXPECT_EQ(net.channel(0).counters().failbacks, 10u);
  EXPECT_EQ(net.channel(0).counters().path_failures, 10u);
}

TEST(ReliableChannelTest, ADrainedPathTakesNoNewFramesAndNothingIsResent) {
  std::mt19937 rng(3);
  SimNetwork net;
  net.add_link();
  net.add_link();
  net.send_frames(0, 600, 30000, rng);
  for (int i = 0; i < 3; ++i) net.step(rng, 2);
  net.channel(0).drain(net.link(0).id[0], true);
  const uint64_t carried_at_drain = net.link(0).carried[0];
  const uint64_t backlog_at_drain = net.link(0).end[0].backlog;
  net.send_frames(0, 600, 30000, rng);
  ASSERT_TRUE(net.run_until_done(rng, 5000, 2));
  net.expect_exact();
  EXPECT_EQ(net.channel(0).counters().frames_resent, 0u);
  // Only what was already queued on the drained path went on it afterwards.
  EXPECT_LE(net.link(0).carried[0], carried_at_drain + backlog_at_drain);
  // Heartbeats and acknowledgements still flow on it: it stays live.
  EXPECT_EQ(net.channel(0).state(net.link(0).id[0]), ReliableChannel::PathState::kDrained);
  EXPECT_EQ(net.channel(1).state(net.link(0).id[1]), ReliableChannel::PathState::kActive);
}

TEST(ReliableChannelTest, TheOnlyPathLeftCarriesFramesEvenWhenDrained) {
  std::mt19937 rng(4);
  SimNetwork net;
  net.add_link();
  net.channel(0).drain(net.link(0).id[0], true);
  net.send_frames(0, 200, 30000, rng);
  ASSERT_TRUE(net.run_until_done(rng, 5000));  // waiting for an undrained path would hang
  net.expect_exact();
  EXPECT_EQ(net.channel(0).state(net.link(0).id[0]), ReliableChannel::PathState::kDrained);
}

TEST(ReliableChannelTest, ABackupStandsByUntilNoActivePathIsLeftThenStandsByAgain) {
  using State = ReliableChannel::PathState;
  std::mt19937 rng(6);
  SimNetwork net;
  net.add_link();
  const size_t backup = net.add_link(64 << 10, false, /*backup=*/true);
  EXPECT_EQ(net.channel(0).state(net.link(backup).id[0]), State::kStandby);
  EXPECT_EQ(net.channel(0).usable_paths(), 1u);
  net.send_frames(0, 300, 30000, rng);
  net.send_frames(1, 300, 30000, rng);
  ASSERT_TRUE(net.run_until_done(rng, 5000));
  // Heartbeats only: no payload byte in either direction, and the acknowledgements go on
  // the active path.
  EXPECT_EQ(net.link(backup).carried[0], 0u);
  EXPECT_EQ(net.link(backup).carried[1], 0u);
  EXPECT_EQ(net.link(backup).end[0].acks + net.link(backup).end[1].acks, 0u);
  EXPECT_GT(net.link(0).end[0].acks + net.link(0).end[1].acks, 0u);

  net.send_frames(0, 300, 30000, rng);
  net.step(rng);
  net.kill(0);  // the rail-matched path goes: the backup carries everything
  net.send_frames(0, 300, 30000, rng);
  ASSERT_TRUE(net.run_until_done(rng, 5000));
  net.expect_exact();
  EXPECT_GT(net.link(backup).carried[0], 0u);
  EXPECT_EQ(net.channel(0).state(net.link(backup).id[0]), State::kStandby);

  // A rail-matched path returns: once past probation it carries, the backup stands by.
  const size_t back = net.add_link(64 << 10, /*probation=*/true);
  for (int i = 0; i < 600; ++i) net.step(rng);
  EXPECT_EQ(net.channel(0).state(net.link(back).id[0]), State::kActive);
  const uint64_t backup_carried = net.link(backup).carried[0];
  net.send_frames(0, 300, 30000, rng);
  ASSERT_TRUE(net.run_until_done(rng, 5000));
  net.expect_exact();
  EXPECT_EQ(net.link(backup).carried[0], backup_carried);
  EXPECT_GT(net.channel(0).counters().frames_resent, 0u);  // the killed path's frames
}

TEST(ReliableChannelTest, ABackupOnProbationSettlesOnStandbyAndUndrainsToStandby) {
  using State = ReliableChannel::PathState;
  std::mt19937 rng(7);
  SimNetwork net;
  net.add_link();
  const size_t backup = net.add_link(64 << 10, /*probation=*/true, /*backup=*/true);
  const uint32_t id = net.link(backup).id[0];
  EXPECT_EQ(net.channel(0).state(id), State::kProbation);
  for (int i = 0; i < 600; ++i) net.step(rng);
  EXPECT_EQ(net.channel(0).state(id), State::kStandby);
  net.channel(0).drain(id, true);
  EXPECT_EQ(net.channel(0).state(id), State::kDrained);
  net.channel(0).drain(id, false);
  EXPECT_EQ(net.channel(0).state(id), State::kStandby);
}

TEST(ReliableChannelTest, LatencyFramesTakeTheLatencyPathAloneAndFallBackWhenItIsGone) {
  std::mt19937 rng(17);
  FlowPolicies policies;
  policies.set(1, {TrafficClass::kLatency, 1});  // flow 0: bulk (the default)
  SimNetwork net({}, true, &policies);
  const size_t bulk_path = net.add_link();
  const size_t latency_path = net.add_link(64 << 10, false, false, /*latency=*/true);
  const uint64_t bulk_first = net.send_frames(0, 200, 30000, rng, 0);
  const uint64_t latency_first = net.send_frames(0, 50, 30000, rng, 1);
  const uint64_t latency_bytes = net.bytes_from(0, latency_first);
  const uint64_t bulk_bytes = net.bytes_from(0, bulk_first) - latency_bytes;
  ASSERT_TRUE(net.run_until_done(rng, 5000));
  net.expect_exact();
  // Each class on its own path, every byte of it: none of the other's.
  EXPECT_EQ(net.link(latency_path).carried[0], latency_bytes);
  EXPECT_EQ(net.link(bulk_path).carried[0], bulk_bytes);

  // The latency path goes: its class falls back to the other path, losing nothing.
  net.send_frames(0, 50, 30000, rng, 1);
  net.step(rng);
  net.kill(latency_path);
  const uint64_t before = net.link(bulk_path).carried[0];
  const uint64_t more = net.send_frames(0, 50, 30000, rng, 1);
  ASSERT_TRUE(net.run_until_done(rng, 5000));
  net.expect_exact();
  EXPECT_GE(net.link(bulk_path).carried[0] - before, net.bytes_from(0, more));

  // Only a latency path left: bulk frames take it rather than wait.
  const size_t latency_again = net.add_link(64 << 10, false, false, /*latency=*/true);
  net.kill(bulk_path);
  const uint64_t bulk_more = net.send_frames(0, 50, 30000, rng, 0);
  ASSERT_TRUE(net.run_until_done(rng, 5000));
  net.expect_exact();
  EXPECT_EQ(net.link(latency_again).carried[0], net.bytes_from(0, bulk_more));
}

TEST(ReliableChannelTest, ALatencyFrameIsReleasedWithoutWaitingForTheBulkFramesBeforeIt) {
  std::mt19937 rng(23);
  FlowPolicies policies;
  policies.set(1, {TrafficClass::kLatency, 1});
  SimNetwork net({}, true, &policies);
  const size_t bulk = net.add_link();
  net.add_link(64 << 10, false, false, /*latency=*/true);
  net.link(bulk).delay_steps = 40;  // the bulk connection's queue: 40 ms deep
  const uint64_t first_bulk = net.send_frames(0, 20, 30000, rng, 0);
  std::vector<std::byte> small(1000, std::byte{7});
  const uint64_t latency = net.send_one(0, wire::FrameType::kData, small, 1);
  for (int i = 0; i < 10; ++i) net.step(rng);
  EXPECT_EQ(net.end(0).released[latency], 1) << "released by a selective acknowledgement";
  for (uint64_t t = first_bulk; t < first_bulk + 20; ++t) {
    EXPECT_EQ(net.end(0).released[t], 0) << "bulk frame " << t << " cannot have arrived yet";
  }
  ASSERT_TRUE(net.run_until_done(rng, 5000));
  net.expect_exact();  // every frame released exactly once
}

TEST(ReliableChannelTest, StripesInProportionToEachPathsMeasuredRate) {
  std::mt19937 rng(5);
  SimNetwork net;
  net.add_link(96 << 10);
  net.add_link(32 << 10);
  // Keep both paths busy long enough for the rates to be measured.
  for (int round = 0; round < 40; ++round) {
    net.send_frames(0, 100, 32768, rng);
    for (int i = 0; i < 10; ++i) net.step(rng);
  }
  ASSERT_TRUE(net.run_until_done(rng, 10000));
  net.expect_exact();
  const double fast = static_cast<double>(net.link(0).carried[0]);
  const double slow = static_cast<double>(net.link(1).carried[0]);
  // 3:1 links: the fast one should carry about 75% (equal shares would be 50%).
  EXPECT_GT(fast / (fast + slow), 0.65);
  EXPECT_LT(fast / (fast + slow), 0.85);
  EXPECT_NEAR(net.channel(0).rate_estimate(net.link(0).id[0]) /
                  net.channel(0).rate_estimate(net.link(1).id[0]),
              3.0, 0.6);
}

TEST(ReliableChannelTest, APathMeasuredSlowIsMeasuredAgainOnceItRecovers) {
  std::mt19937 rng(11);
  SimNetwork net;
  net.add_link(96 << 10);
  net.add_link(8 << 10);  // slow at first: measured at a twelfth of the other
  for (int round = 0; round < 30; ++round) {
    net.send_frames(0, 100, 32768, rng);
    for (int i = 0; i < 10; ++i) net.step(rng);
  }
  ASSERT_TRUE(net.run_until_done(rng, 10000));
  ASSERT_GT(net.channel(0).rate_estimate(net.link(1).id[0]), 0);
  ASSERT_LT(net.channel(0).rate_estimate(net.link(1).id[0]),
            net.channel(0).rate_estimate(net.link(0).id[0]) / 4);
  // It recovers. A low estimate alone would keep it starved of the backlog it is measured
  // with; after a second without a sample the estimate is forgotten and it gets a share.
  net.link(1).bytes_per_step = 96 << 10;
  const uint64_t before[2] = {net.link(0).carried[0], net.link(1).carried[0]};
  for (int round = 0; round < 300; ++round) {
    net.send_frames(0, 20, 32768, rng);
    for (int i = 0; i < 10; ++i) net.step(rng);
  }
  ASSERT_TRUE(net.run_until_done(rng, 10000));
  net.expect_exact();
  const double fast = static_cast<double>(net.link(0).carried[0] - before[0]);
  const double recovered = static_cast<double>(net.link(1).carried[0] - before[1]);
  EXPECT_GT(recovered / (fast + recovered), 0.3) << "the recovered path stayed starved";
}

TEST(ReliableChannelTest, FramesWaitWhileNoPathIsLeftAndGoOnTheNextOne) {
  std::mt19937 rng(9);
  SimNetwork net;
  net.add_link();
  net.send_frames(0, 300, 30000, rng);
  net.step(rng);
  net.kill(0);
  net.send_frames(0, 100, 30000, rng);
  for (int i = 0; i < 50; ++i) net.step(rng);
  EXPECT_GT(net.channel(0).waiting(), 0u);
  EXPECT_EQ(net.channel(0).usable_paths(), 0u);
  net.add_link(64 << 10, /*probation=*/true);  // the only path: used at once
  ASSERT_TRUE(net.run_until_done(rng, 5000));
  net.expect_exact();
}

TEST(ReliableChannelTest, NoticesAreDeliveredAfterEveryFrameSentBeforeThem) {
  std::mt19937 rng(13);
  SimNetwork net;
  net.add_link(8 << 10);  // slow
  net.add_link(1 << 20);  // fast
  net.link(0).delay_steps = 30;
  net.send_frames(0, 200, 20000, rng);
  const uint64_t abort = net.send_one(0, wire::FrameType::kAbort, {std::byte{'x'}});
  net.send_one(0, wire::FrameType::kData, {});  // an end marker after it
  ASSERT_TRUE(net.run_until_done(rng, 20000));
  net.expect_exact();
  const auto& order = net.end(1).delivery_order;
  const auto at = std::find(order.begin(), order.end(), abort) - order.begin();
  EXPECT_EQ(static_cast<size_t>(at), abort) << "the abort overtook frames sent before it";
  EXPECT_EQ(order.back(), abort + 1);
}

TEST(ReliableChannelTest, AFrameArrivingOnTwoPathsIsPlacedOnceAndTheOtherCopyAbandoned) {
  int placed_calls = 0;
  std::vector<std::byte> dest(4096);
  ReliableChannel::Handler h = accepting_handler();
  h.place = [&](const wire::DataFrameHeader&) { return Placement{dest, nullptr}; };
  h.on_placed = [&](const wire::DataFrameHeader&) {
    ++placed_calls;
    return std::string();
  };
  ReliableChannel ch({}, h);
  SimPathEnd a, b;
  const auto now = ReliableChannel::Clock::now();
  const uint32_t pa = ch.add_path(&a, now);
  const uint32_t pb = ch.add_path(&b, now);
  wire::DataFrameHeader frame;
  frame.type = wire::FrameType::kData;
  frame.length = 4096;
  frame.channel_seq = 1;
  // The first copy's header is in on path a (being placed) when the re-sent copy completes
  // on path b: a's placement must stop writing, and a's late completion is a duplicate.
  ASSERT_NE(ch.place(pa, frame, now).destination.data(), nullptr);
  ASSERT_NE(ch.place(pb, frame, now).destination.data(), nullptr);
  EXPECT_EQ(ch.placed(pb, frame, now), "");
  EXPECT_EQ(a.abandoned, (std::vector<uint64_t>{1}));
  EXPECT_TRUE(b.abandoned.empty());
  EXPECT_EQ(ch.placed(pa, frame, now), "");
  EXPECT_EQ(placed_calls, 1);
  EXPECT_EQ(ch.counters().duplicates_dropped, 1u);
  // A third copy is not placed at all.
  EXPECT_EQ(ch.place(pa, frame, now).destination.data(), nullptr);
}

TEST(ReliableChannelTest, AnAcknowledgementOfFramesNeverSentIsRefused) {
  ReliableChannel ch({}, accepting_handler());
  SimPathEnd a;
  const auto now = ReliableChannel::Clock::now();
  const uint32_t pa = ch.add_path(&a, now);
  wire::DataFrameHeader ack;
  ack.type = wire::FrameType::kAck;
  ack.channel_seq = 5;
  EXPECT_NE(ch.receive(pa, ack, {}, now).find("only 0 were sent"), std::string::npos);
  wire::DataFrameHeader far;
  far.type = wire::FrameType::kData;
  far.channel_seq = kChannelWindowFrames + 1;
  EXPECT_NE(ch.receive(pa, far, {}, now).find("outside the channel window"), std::string::npos);
}

TEST(ReliableChannelTest, WithoutReliabilityFramesAreReleasedOnceWrittenAndCarryNoSequence) {
  std::mt19937 rng(17);
  ReliableChannel::Settings settings;
  settings.reliable = false;
  SimNetwork net(settings);
  net.add_link();
  net.send_frames(0, 300, 30000, rng);
  ASSERT_TRUE(net.run_until_done(rng, 5000));
  net.expect_exact();
  EXPECT_EQ(net.channel(1).counters().acks_sent, 0u);
  EXPECT_EQ(net.channel(0).unacknowledged(), 0u);
}

// A path whose transport reports what the channel asked of it (FramePath::limit_queue) and
// holds back as told.
class LimitedPath : public FramePath {
 public:
  void queue(const wire::DataFrameHeader&, std::span<const std::byte> payload,
             uint64_t token) override {
    queued.push_back({token, payload.size()});
  }
  uint64_t backlog_bytes() const override { return unsent; }
  uint64_t unsent_bytes() const override { return unsent; }
  uint64_t waiting_bytes() const override { return held; }
  bool held_by_queue_limit() const override { return held > 0; }
  void limit_queue(uint64_t bytes, double rate, bool in_flight_too) override {
    limits.push_back({bytes, rate, in_flight_too});
  }
  void abandon_placement_of(uint64_t) override {}

  struct Limit {
    uint64_t bytes;
    double rate;
    bool in_flight_too;
  };
  std::vector<std::pair<uint64_t, size_t>> queued;  // token, payload bytes
  std::vector<Limit> limits;
  uint64_t unsent = 1;  // always a backlog: the network sets the pace
  uint64_t held = 0;
};

TEST(ReliableChannelTest, TheInFlightHoldIsOnOnlyWhileFlowsMixAndFramesWaitWhileAPathIsHeld) {
  ReliableChannel::Settings settings;
  settings.reliable = false;  // frames go straight to the path: no acknowledgements needed
  ReliableChannel ch(settings, accepting_handler());
  LimitedPath path;
  const TimePoint start = ReliableChannel::Clock::now();
  const uint32_t id = ch.add_path(&path, start);
  std::vector<std::byte> payload(64 << 10);
  wire::DataFrameHeader header{};
  header.type = wire::FrameType::kData;
  // One flow alone, 4 MB/s measured: the limit is its unsent bytes only.
  TimePoint now = start;
  for (int i = 0; i < 5; ++i) {
    ch.send(header, payload, 100 + i, 1);
    ch.on_path_sent(id, 100 + i, 80000);
    now += 20ms;
    ch.tick(now);
  }
  ASSERT_GT(ch.rate_estimate(id), 0);
  ASSERT_FALSE(path.limits.empty());
  EXPECT_FALSE(path.limits.back().in_flight_too);
  EXPECT_EQ(path.limits.back().bytes, settings.min_path_queue_bytes);  // 4 KB in 1 ms: the floor
  // A frame of another flow leaves the scheduler: held in flight too, at once.
  ch.send(header, payload, 200, 2);
  EXPECT_TRUE(path.limits.back().in_flight_too);
  // While the path is held, frames wait in the scheduler; once it is not, they go.
  path.held = 1;
  const size_t queued = path.queued.size();
  ch.send(header, payload, 201, 1);
  ch.send(header, payload, 202, 2);
  EXPECT_EQ(path.queued.size(), queued);
  EXPECT_EQ(ch.waiting(), 2u);
  path.held = 0;
  EXPECT_TRUE(ch.pump());
  EXPECT_EQ(path.queued.size(), queued + 2);
  // No mixing for longer than hold_queue_after_mixing: the hold is lifted at the next sample.
  now = ReliableChannel::Clock::now() + settings.hold_queue_after_mixing + 50ms;
  ch.on_path_sent(id, 0, 80000);
  ch.tick(now);
  EXPECT_FALSE(path.limits.back().in_flight_too);
}

// Payload bytes of the frames queued on `path` whose payload is `size` bytes.
size_t queued_of_size(const LimitedPath& path, size_t size) {
  return static_cast<size_t>(std::count_if(path.queued.begin(), path.queued.end(),
                                           [size](const auto& q) { return q.second == size; }));
}

TEST(ReliableChannelTest, NeitherClassWaitsForRoomOnTheOthersPathsNewOrResent) {
  FlowPolicies policies;
  policies.set(1, {TrafficClass::kLatency, 1});  // flow 2: bulk (the default)
  ReliableChannel ch({}, accepting_handler(), &policies);
  LimitedPath bulk_a, bulk_b, latency;
  const TimePoint now = ReliableChannel::Clock::now();
  const uint32_t a = ch.add_path(&bulk_a, now);
  ch.add_path(&bulk_b, now);
  ch.add_path(&latency, now, false, false, /*latency=*/true);
  std::vector<std::byte> big(2000), small(1000);
  wire::DataFrameHeader header{};
  header.type = wire::FrameType::kData;

  // The bulk paths have no room: bulk frames wait, and latency frames sent after them go at
  // once on their own path, also once the bulk class is owed its floor (after about 20 of
  // them) and the scheduler's first choice, a bulk frame, cannot go.
  bulk_a.held = bulk_b.held = 1;
  for (uint64_t t = 0; t < 4; ++t) ch.send(header, big, t, 2);
  for (uint64_t t = 100; t < 140; ++t) ch.send(header, small, t, 1);
  EXPECT_EQ(queued_of_size(latency, small.size()), 40u);
  EXPECT_EQ(queued_of_size(bulk_a, big.size()) + queued_of_size(bulk_b, big.size()), 0u);
  EXPECT_EQ(queued_of_size(latency, big.size()), 0u) << "bulk frames kept off the latency path";

  // The reverse: the latency path has no room; bulk frames go on theirs.
  latency.held = 1;
  bulk_a.held = bulk_b.held = 0;
  for (uint64_t t = 200; t < 203; ++t) ch.send(header, small, t, 1);  // each send pumps
  EXPECT_EQ(queued_of_size(bulk_a, big.size()) + queued_of_size(bulk_b, big.size()), 4u);
  EXPECT_EQ(queued_of_size(latency, small.size()), 40u) << "latency frames wait for their path";
  latency.held = 0;
  EXPECT_TRUE(ch.pump());
  EXPECT_EQ(queued_of_size(latency, small.size()), 43u);

  // A bulk path fails: its frames wait to go again while the other bulk path has no room;
  // a latency frame does not wait behind them (nor do they take the latency path).
  const size_t on_a = queued_of_size(bulk_a, big.size());
  ASSERT_GT(on_a, 0u);
  bulk_b.held = 1;
  ch.path_failed(a, "test");
  EXPECT_GE(ch.waiting(), on_a);
  ch.send(header, small, 300, 1);
  EXPECT_EQ(queued_of_size(latency, small.size()), 44u);
  EXPECT_EQ(queued_of_size(latency, big.size()), 0u);
  bulk_b.held = 0;
  EXPECT_TRUE(ch.pump());
  EXPECT_EQ(ch.waiting(), 0u);
  EXPECT_EQ(ch.counters().frames_resent, on_a);
}

}  // namespace
}  // namespace plexus::transports
