// The registry of memory a transport may send from directly (transports/path/
// sendable_memory.h): which region holds a payload, and ids that are never reused.
#include "transports/path/sendable_memory.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <vector>

namespace plexus::transports {
namespace {

TEST(SendableMemoryTest, APayloadIsFoundOnlyWhollyInsideAnAnnouncedRegion) {
  auto registry = std::make_shared<SendableMemory>();
  std::vector<std::byte> pool(4096), other(4096);
  auto announced = registry->announce(pool);
  ASSERT_NE(announced.id(), 0u);
  auto inside = registry->find(pool.data() + 100, 200);
  ASSERT_TRUE(inside);
  EXPECT_EQ(inside->id, announced.id());
  EXPECT_EQ(inside->base, pool.data());
  EXPECT_EQ(inside->bytes, pool.size());
  EXPECT_TRUE(registry->find(pool.data(), pool.size()));
  EXPECT_FALSE(registry->find(pool.data() + 1, pool.size())) << "runs past the region's end";
  EXPECT_FALSE(registry->find(other.data(), 16)) << "never announced";
  EXPECT_FALSE(registry->announce({}).id()) << "empty memory announces nothing";
}

TEST(SendableMemoryTest, AWithdrawnRegionIsGoneAndItsIdIsNeverReused) {
  auto registry = std::make_shared<SendableMemory>();
  std::vector<std::byte> pool(4096);
  auto first = registry->announce(pool);
  const uint64_t first_id = first.id();
  EXPECT_EQ(registry->withdrawals(), 0u);
  first.reset();
  EXPECT_EQ(registry->withdrawals(), 1u);
  EXPECT_FALSE(registry->holds(first_id));
  EXPECT_FALSE(registry->find(pool.data(), 16));
  // The same address mapped again: a new id, so a registration cached under the old one
  // is never taken for it.
  auto second = registry->announce(pool);
  EXPECT_NE(second.id(), first_id);
  EXPECT_TRUE(registry->holds(second.id()));
  EXPECT_EQ(registry->find(pool.data(), 16)->id, second.id());
  // Moved: withdrawn once, by its last holder.
  SendableMemory::Announcement moved = std::move(second);
  EXPECT_EQ(registry->regions(), 1u);
  moved = {};
  EXPECT_EQ(registry->regions(), 0u);
  EXPECT_EQ(registry->withdrawals(), 2u);
}

TEST(SendableMemoryTest, AnAnnouncementMayOutliveTheRegistry) {
  std::vector<std::byte> pool(64);
  SendableMemory::Announcement left;
  {
    auto registry = std::make_shared<SendableMemory>();
    left = registry->announce(pool);
  }
  left.reset();  // withdraws from nothing, without touching freed memory
  EXPECT_EQ(left.id(), 0u);
}

}  // namespace
}  // namespace plexus::transports
