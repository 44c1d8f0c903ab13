// The send scheduler on synthetic queues: weighted shares within a class, strict priority
// between classes, the floor of the lower classes, frames of mixed sizes, FIFO per flow,
// policies changed while frames wait.
#include "transports/channel/send_scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

namespace plexus::transports {
namespace {

using TC = TrafficClass;

class SendSchedulerTest : public ::testing::Test {
 protected:
  // Keeps `per_flow` frames waiting for each flow in `sizes` (flow -> payload bytes),
  // takes `pops` frames, and returns the bytes each flow got (payload plus header).
  std::map<uint32_t, uint64_t> run_backlogged(SendScheduler& s, std::map<uint32_t, size_t> sizes,
                                              int pops, int per_flow = 4) {
    std::map<uint32_t, int> waiting;
    std::map<uint32_t, uint64_t> got;
    auto top_up = [&] {
      for (auto& [flow, size] : sizes) {
        while (waiting[flow] < per_flow) {
          push(s, flow, size);
          ++waiting[flow];
        }
      }
    };
    for (int i = 0; i < pops; ++i) {
      top_up();
      SendScheduler::Frame f = s.pop();
      --waiting[f.flow];
      got[f.flow] += f.payload.size() + wire::kDataFrameHeaderBytes;
    }
    return got;
  }

  void push(SendScheduler& s, uint32_t flow, size_t size, uint64_t token = 0) {
    if (buffer_.size() < size) buffer_.resize(size);
    SendScheduler::Frame f;
    f.flow = flow;
    f.token = token;
    f.payload = std::span<const std::byte>(buffer_.data(), size);
    s.push(f);
  }

  static double share(const std::map<uint32_t, uint64_t>& got, uint32_t flow) {
    uint64_t total = 0;
    for (auto& [f, b] : got) total += b;
    auto it = got.find(flow);
    return it == got.end() ? 0 : static_cast<double>(it->second) / static_cast<double>(total);
  }

  FlowPolicies policies_;
  std::vector<std::byte> buffer_;
};

TEST_F(SendSchedulerTest, WeightsShareAClassByBytes) {
  policies_.set(1, {TC::kBulk, 3});
  policies_.set(2, {TC::kBulk, 1});
  SendScheduler s({}, &policies_);
  auto got = run_backlogged(s, {{1, 64 << 10}, {2, 64 << 10}}, 4000);
  EXPECT_NEAR(static_cast<double>(got[1]) / static_cast<double>(got[2]), 3.0, 0.03);
}

TEST_F(SendSchedulerTest, MixedFrameSizesShareByBytesNotFrames) {
  policies_.set(1, {TC::kBulk, 1});
  policies_.set(2, {TC::kBulk, 2});
  SendScheduler s({}, &policies_);
  // Flow 1 sends 512 KiB frames, flow 2 sends 4 KiB ones: bytes still go 1:2.
  auto got = run_backlogged(s, {{1, 512 << 10}, {2, 4 << 10}}, 40000, 8);
  EXPECT_NEAR(static_cast<double>(got[2]) / static_cast<double>(got[1]), 2.0, 0.05);
}

TEST_F(SendSchedulerTest, OneFlowAloneTakesEverything) {
  policies_.set(5, {TC::kBackground, 1});
  SendScheduler s({}, &policies_);
  auto got = run_backlogged(s, {{5, 1000}}, 100);
  EXPECT_EQ(got.size(), 1u);
  EXPECT_EQ(got[5], 100u * (1000 + wire::kDataFrameHeaderBytes));
  EXPECT_EQ(s.size(), 3u);  // topped up to 4 before each take
}

TEST_F(SendSchedulerTest, HigherClassGoesFirstEvenWhenQueuedLater) {
  policies_.set(1, {TC::kBulk, 100});
  policies_.set(2, {TC::kLatency, 1});
  SendScheduler s({}, &policies_);
  for (int i = 0; i < 10; ++i) push(s, 1, 512 << 10);
  ASSERT_EQ(s.pop().flow, 1u);  // nothing else waits yet
  push(s, 2, 64 << 10, 7);
  push(s, 2, 64 << 10, 8);
  const SendScheduler::Frame* next = s.peek();
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(next->flow, 2u);
  EXPECT_EQ(s.pop().token, 7u);
  EXPECT_EQ(s.pop().token, 8u);
  EXPECT_EQ(s.pop().flow, 1u);
}

TEST_F(SendSchedulerTest, LowerClassesGetTheirFloorUnderABusyHigherOne) {
  policies_.set(1, {TC::kLatency, 1});
  policies_.set(2, {TC::kBulk, 1});
  SendScheduler::Settings settings;
  settings.floor = {0, 0.10, 0.05};
  {
    SendScheduler s(settings, &policies_);
    auto got = run_backlogged(s, {{1, 64 << 10}, {2, 64 << 10}}, 5000);
    EXPECT_NEAR(share(got, 2), 0.10, 0.005);
  }
  policies_.set(1, {TC::kBulk, 1});
  policies_.set(3, {TC::kBackground, 1});
  {
    SendScheduler s(settings, &policies_);
    // Mixed sizes: the floor is of bytes.
    auto got = run_backlogged(s, {{1, 512 << 10}, {3, 16 << 10}}, 20000);
    EXPECT_NEAR(share(got, 3), 0.05, 0.005);
  }
}

TEST_F(SendSchedulerTest, NoFloorMeansStrictPriority) {
  policies_.set(1, {TC::kBulk, 1});
  policies_.set(2, {TC::kBackground, 1});
  SendScheduler::Settings settings;
  settings.floor = {0, 0, 0};
  SendScheduler s(settings, &policies_);
  auto got = run_backlogged(s, {{1, 4096}, {2, 4096}}, 1000);
  EXPECT_EQ(got.count(2), 0u);
}

TEST_F(SendSchedulerTest, CreditLapsesWhenTheClassIsServedByPriority) {
  policies_.set(1, {TC::kLatency, 1});
  policies_.set(2, {TC::kBulk, 1});
  SendScheduler s({}, &policies_);
  push(s, 2, 1 << 20);
  push(s, 1, 4096);
  EXPECT_EQ(s.pop().flow, 1u);
  EXPECT_GT(s.credit(TC::kBulk), 0);
  EXPECT_EQ(s.pop().flow, 2u);  // alone now
  EXPECT_EQ(s.credit(TC::kBulk), 0);
  // So a latency frame that comes next is not overtaken on old credit.
  push(s, 2, 4096);
  push(s, 1, 4096);
  EXPECT_EQ(s.pop().flow, 1u);
}

TEST_F(SendSchedulerTest, EachFlowKeepsItsOrder) {
  policies_.set(1, {TC::kBulk, 2});
  policies_.set(2, {TC::kBulk, 1});
  policies_.set(3, {TC::kLatency, 1});
  SendScheduler s({}, &policies_);
  uint64_t token = 0;
  for (int i = 0; i < 300; ++i) {
    const uint32_t flow = 1 + static_cast<uint32_t>(i % 3);
    push(s, flow, static_cast<size_t>((i * 7919) % (300 << 10)), flow * 1000 + ++token);
  }
  std::map<uint32_t, uint64_t> last;
  while (!s.empty()) {
    SendScheduler::Frame f = s.pop();
    EXPECT_GT(f.token, last[f.flow]) << "flow " << f.flow;
    last[f.flow] = f.token;
  }
  EXPECT_EQ(s.bytes(), 0u);
}

TEST_F(SendSchedulerTest, FramesWithoutPayloadCostTheirHeader) {
  policies_.set(1, {TC::kBulk, 1});
  policies_.set(2, {TC::kBulk, 1});
  SendScheduler s({}, &policies_);
  // Flow 1 sends only empty frames: by bytes (headers) it still gets half, not all.
  auto got = run_backlogged(s, {{1, 0}, {2, 4096 - wire::kDataFrameHeaderBytes}}, 20000);
  EXPECT_NEAR(share(got, 1), 0.5, 0.02);
}

TEST_F(SendSchedulerTest, PolicyChangesApplyToFramesAlreadyWaiting) {
  policies_.set(1, {TC::kBulk, 1});
  policies_.set(2, {TC::kBulk, 1});
  SendScheduler s({}, &policies_);
  auto even = run_backlogged(s, {{1, 64 << 10}, {2, 64 << 10}}, 2000);
  EXPECT_NEAR(share(even, 1), 0.5, 0.01);
  policies_.set(1, {TC::kBulk, 4});
  auto weighted = run_backlogged(s, {{1, 64 << 10}, {2, 64 << 10}}, 5000);
  EXPECT_NEAR(share(weighted, 1), 0.8, 0.01);
  policies_.set(2, {TC::kLatency, 1});  // flow 2 moves class with frames waiting
  EXPECT_EQ(s.peek()->flow, 2u);
  policies_.set(2, {TC::kBackground, 1});
  auto demoted = run_backlogged(s, {{1, 64 << 10}, {2, 64 << 10}}, 5000);
  EXPECT_NEAR(share(demoted, 2), 0.05, 0.01);
}

TEST(FlowPolicyTest, NamesAndWeights) {
  EXPECT_EQ(parse_traffic_class("latency"), TC::kLatency);
  EXPECT_EQ(parse_traffic_class("background"), TC::kBackground);
  EXPECT_EQ(parse_traffic_class("Bulk"), std::nullopt);
  EXPECT_EQ(check_weight(1), "");
  EXPECT_EQ(check_weight(1000), "");
  EXPECT_NE(check_weight(0).find("from 1 to 1000"), std::string::npos);
  EXPECT_NE(check_weight(-3), "");
  EXPECT_NE(check_weight(1001), "");
}

}  // namespace
}  // namespace plexus::transports
