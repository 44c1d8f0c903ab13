// The pool windows RDMA paths register for zero-copy sends (transports/rdma/pool_windows.h,
// window_cache.h), without a device: which window holds a payload (too small, unannounced or
// straddling payloads are copied), one registration per window, shared by the paths over one
// device, the pins of posted frames held until their writes complete, copying for good after
// a registration fails, a withdrawn pool's windows dropped once unpinned, and windows within
// the node's pinned-memory bound (pinned_budget.h): one that does not fit is copied for now,
// not for good, and unused ones give their bytes back when dropped.
#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "transports/path/sendable_memory.h"
#include "transports/rdma/pinned_budget.h"
#include "transports/rdma/pool_windows.h"
#include "transports/rdma/window_cache.h"

namespace plexus::transports::rdma {
namespace {

constexpr uint64_t kWindow = 16384;  // windows start every 8 KiB

struct FakeDevice {
  std::set<void*> live;  // registered window bases
  std::vector<size_t> sizes;
  bool fail = false;
  MrCache::Calls calls() {
    return {[this](std::byte* base, size_t bytes) -> common::Result<MrCache::Registration> {
              if (fail) return common::fail("ibv_reg_mr of a pool window: Cannot allocate memory");
              MrCache::Registration registered{base, {}};
              registered.keys.lkey = static_cast<uint32_t>(live.size() + 1);
              live.insert(base);
              sizes.push_back(bytes);
              return registered;
            },
            [this](void* handle) { live.erase(handle); }};
  }
};

struct RdmaPoolWindowsTest : ::testing::Test {
  std::shared_ptr<SendableMemory> sendable = std::make_shared<SendableMemory>();
  std::vector<std::byte> pool = std::vector<std::byte>(64 * 1024);
  SendableMemory::Announcement announced = sendable->announce(pool);
  FakeDevice device;
  std::shared_ptr<PinnedBudget> budget = std::make_shared<PinnedBudget>(uint64_t{1} << 30);
  std::shared_ptr<WindowCache> cache =
      std::make_shared<WindowCache>(device.calls(), /*max_registrations=*/4, budget);
  PoolWindows windows{sendable, cache, /*min_bytes=*/1024, kWindow};
  std::span<const std::byte> at(size_t offset, size_t bytes) {
    return std::span<const std::byte>(pool.data() + offset, bytes);
  }
};

TEST_F(RdmaPoolWindowsTest, APayloadGoesFromTheWindowHoldingItOthersAreCopied) {
  EXPECT_FALSE(windows.pin(at(0, 512))) << "below the minimum: copied";
  std::vector<std::byte> elsewhere(4096);
  EXPECT_FALSE(windows.pin(elsewhere)) << "not in an announced pool: copied";
  MrCache::Pin first = windows.pin(at(100, 4096));
  ASSERT_TRUE(first);
  ASSERT_EQ(device.live.count(pool.data()), 1u);
  EXPECT_EQ(device.sizes.back(), kWindow);
  // 12 KiB in: the window starting at 8 KiB holds it, registered once for both.
  MrCache::Pin second = windows.pin(at(12 * 1024, 4096));
  MrCache::Pin third = windows.pin(at(12 * 1024 + 64, 1024));
  ASSERT_TRUE(second && third);
  EXPECT_EQ(device.live.count(pool.data() + 8192), 1u);
  EXPECT_EQ(device.live.size(), 2u);
  // Larger than half a window from an odd start: lies in no single window.
  EXPECT_FALSE(windows.pin(at(4096, 14 * 1024)));
  // The last window is cut at the pool's end.
  ASSERT_TRUE(windows.pin(at(60 * 1024, 4096)));
  EXPECT_EQ(device.sizes.back(), 8192u);
}

TEST_F(RdmaPoolWindowsTest, PostedFramesHoldTheirWindowUntilTheirWritesComplete) {
  windows.posted(windows.pin(at(0, 4096)));
  windows.posted(MrCache::Pin{});  // a copied frame between
  announced.reset();               // the pool's session goes
  windows.forget_withdrawn();
  EXPECT_EQ(device.live.size(), 1u) << "a posted write still reads the window";
  windows.write_completed();
  EXPECT_TRUE(device.live.empty()) << "deregistered with the last pin";
  windows.write_completed();
  windows.write_completed();  // more completions than frames: nothing to release
}

TEST_F(RdmaPoolWindowsTest, AFailedRegistrationMeansCopyingFromThenOn) {
  device.fail = true;
  EXPECT_FALSE(windows.pin(at(0, 4096)));
  device.fail = false;
  EXPECT_FALSE(windows.pin(at(0, 4096))) << "no retry of a pin per frame";
  EXPECT_TRUE(device.live.empty());
  PoolWindows other_path{sendable, cache, 1024, kWindow};
  EXPECT_FALSE(other_path.pin(at(0, 4096))) << "the device's refusal holds for all its paths";
  EXPECT_EQ(budget->held_by_windows(), 0u) << "a failed registration holds none of the bound";
}

TEST_F(RdmaPoolWindowsTest, PathsOverOneDeviceShareItsRegistrations) {
  PoolWindows other_path{sendable, cache, 1024, kWindow};
  MrCache::Pin mine = windows.pin(at(0, 4096));
  MrCache::Pin theirs = other_path.pin(at(100, 4096));
  ASSERT_TRUE(mine && theirs);
  EXPECT_EQ(device.sizes.size(), 1u) << "one registration for both paths";
  EXPECT_EQ(mine.keys().lkey, theirs.keys().lkey);
  EXPECT_EQ(budget->held_by_windows(), kWindow);
}

TEST_F(RdmaPoolWindowsTest, AWindowPastTheBoundIsCopiedForNowAndDroppedOnesGiveTheirBytesBack) {
  auto small = std::make_shared<PinnedBudget>(kWindow + kWindow / 2);  // room for one window
  auto bounded = std::make_shared<WindowCache>(device.calls(), 4, small);
  PoolWindows path{sendable, bounded, 1024, kWindow};
  MrCache::Pin first = path.pin(at(0, 4096));
  ASSERT_TRUE(first);
  EXPECT_EQ(small->held_by_windows(), kWindow);
  EXPECT_FALSE(path.pin(at(24 * 1024, 4096))) << "a second window does not fit: copied";
  EXPECT_FALSE(bounded->refused()) << "the bound is a failure of the moment";
  EXPECT_EQ(device.live.size(), 1u);
  EXPECT_EQ(bounded->drop_unpinned(), 0u) << "a posted frame's window is not dropped";
  first = MrCache::Pin{};
  MrCache::Pin second = path.pin(at(24 * 1024, 4096));
  EXPECT_TRUE(second) << "the window no write reads gave way";
  EXPECT_EQ(device.live.size(), 1u);
  EXPECT_EQ(device.live.count(pool.data() + 24 * 1024), 1u);
  EXPECT_EQ(small->held_by_windows(), kWindow);
  second = MrCache::Pin{};
  EXPECT_EQ(bounded->drop_unpinned(), kWindow);
  EXPECT_EQ(small->held_by_windows(), 0u) << "dropped: its bytes are back";
  EXPECT_TRUE(device.live.empty());
}

TEST(RdmaPinnedBudgetTest, HoldsCountUntilTheyGoAndPathsMayTakeWhatWindowsHold) {
  PinnedBudget budget(100);
  auto path = budget.take(60, PinnedBudget::Use::kPath);
  ASSERT_TRUE(path.ok());
  auto window = budget.take(30, PinnedBudget::Use::kWindow);
  ASSERT_TRUE(window.ok());
  auto no_window = budget.take(20, PinnedBudget::Use::kWindow);
  ASSERT_FALSE(no_window.ok()) << "a window fits beside everything held, or not at all";
  EXPECT_NE(no_window.error().find("--rdma-pinned-max-bytes 100"), std::string::npos)
      << no_window.error();
  EXPECT_NE(no_window.error().find("paths hold 60 bytes and registered pool windows 30"),
            std::string::npos)
      << no_window.error();
  EXPECT_FALSE(budget.over());
  auto second = budget.take(40, PinnedBudget::Use::kPath);
  ASSERT_TRUE(second.ok()) << "windows give way to a path's rings";
  EXPECT_TRUE(budget.over()) << "until they are dropped";
  auto third = budget.take(1, PinnedBudget::Use::kPath);
  ASSERT_FALSE(third.ok()) << "paths never pass the bound";
  EXPECT_NE(third.error().find("a path's rings need 1"), std::string::npos) << third.error();
  PinnedBudget::Hold moved = window.take();
  EXPECT_EQ(budget.held_by_windows(), 30u);
  moved = PinnedBudget::Hold{};
  EXPECT_EQ(budget.held_by_windows(), 0u);
  EXPECT_FALSE(budget.over());
  {
    PinnedBudget::Hold kept = second.take();
    EXPECT_EQ(budget.held_by_paths(), 100u);
  }
  EXPECT_EQ(budget.held_by_paths(), 60u) << "a hold is released when it goes";
  EXPECT_TRUE(budget.take(40, PinnedBudget::Use::kPath).ok());
  EXPECT_EQ(budget.held_by_paths(), 60u) << "a hold not kept is released at once";
}

TEST(RdmaPinnedBudgetTest, RingsShareTheBoundAmongThePathsDownToOneLargestFrame) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  constexpr uint64_t kFrame = 48 + 512 * 1024;
  constexpr uint64_t kExtra = 288 * 64 + 4096;  // receive slots and the credit buffer
  auto rings = [&](uint64_t max, uint64_t paths) {
    return ring_bytes_within(max * kMiB, paths, kExtra, kFrame, 16 * kMiB);
  };
  EXPECT_EQ(rings(4096, 64), 16 * kMiB) << "the defaults, one NIC";
  EXPECT_EQ(rings(8192, 64), 16 * kMiB) << "never above";
  EXPECT_EQ(rings(2048, 64), 8 * kMiB) << "32 MiB a path, less its slots: 8 MiB rings";
  EXPECT_EQ(rings(4096, 64 * 8), 2 * kMiB) << "8 NICs";
  EXPECT_EQ(rings(100, 4), 8 * kMiB) << "a power of two";
  EXPECT_EQ(rings(64, 1000), kMiB) << "one largest frame at least: the bound then holds fewer";
  EXPECT_EQ(ring_bytes_within(0, 0, kExtra, kFrame, 16 * kMiB), kMiB);
  // Where the floor does not bind, the paths asked for fit, slots and all.
  for (uint64_t max : {512u, 1000u, 2048u, 4096u}) {
    for (uint64_t paths : {1u, 3u, 64u, 128u}) {
      const uint64_t ring = rings(max, paths);
      if (ring == kMiB) continue;
      EXPECT_LE(paths * (2 * ring + kExtra), max * kMiB) << max << " MiB, " << paths << " paths";
    }
  }
}

}  // namespace
}  // namespace plexus::transports::rdma
