// The pool windows one RDMA path registers for zero-copy sends (transports/rdma/
// pool_windows.h), without a device: which window holds a payload (too small, unannounced or
// straddling payloads are copied), one registration per window, the pins of posted frames
// held until their writes complete, copying for good after a registration fails, and a
// withdrawn pool's windows dropped once unpinned.
#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "transports/path/sendable_memory.h"
#include "transports/rdma/pool_windows.h"

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
  PoolWindows windows{sendable, device.calls(), /*min_bytes=*/1024, kWindow,
                      /*max_registrations=*/4};
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
}

}  // namespace
}  // namespace plexus::transports::rdma
