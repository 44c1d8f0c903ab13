// libplexus's record of registered GPU allocations: reused only for the same allocation;
// one freed and replaced at its addresses is released, never reused.
#include <gtest/gtest.h>

#include "clientlib/src/gpu_registration_cache.h"

namespace plexus::client {
namespace {

TEST(GpuRegistrationCacheTest, AnAllocationIsFoundOnlyUnderItsOwnBufferId) {
  GpuRegistrationCache cache;
  const GpuAllocation a{11, 0x1000, 0x1000};
  EXPECT_EQ(cache.find(a), 0u);
  EXPECT_TRUE(cache.insert(a, 5).empty());
  EXPECT_EQ(cache.find(a), 5u);
  EXPECT_EQ(cache.find({12, 0x1000, 0x1000}), 0u) << "freed and reallocated at the same base";
  EXPECT_EQ(cache.find({11, 0x1000, 0x800}), 0u);
}

TEST(GpuRegistrationCacheTest, ANewAllocationOverlappingOldOnesReleasesThem) {
  GpuRegistrationCache cache;
  cache.insert({1, 0x1000, 0x1000}, 1);  // [0x1000, 0x2000)
  cache.insert({2, 0x2000, 0x1000}, 2);  // [0x2000, 0x3000)
  cache.insert({3, 0x4000, 0x1000}, 3);  // [0x4000, 0x5000)
  // Both first allocations were freed; one new allocation spans [0x1800, 0x2800).
  std::vector<uint32_t> stale = cache.insert({4, 0x1800, 0x1000}, 4);
  EXPECT_EQ(stale, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.find({3, 0x4000, 0x1000}), 3u);
  // The same base, a new buffer id: the old registration goes.
  EXPECT_EQ(cache.insert({5, 0x4000, 0x1000}, 5), std::vector<uint32_t>{3});
}

TEST(GpuRegistrationCacheTest, ForgettingByAnyPointerInside) {
  GpuRegistrationCache cache;
  cache.insert({1, 0x1000, 0x1000}, 7);
  EXPECT_EQ(cache.erase_containing(0x0fff), 0u);
  EXPECT_EQ(cache.erase_containing(0x2000), 0u);
  EXPECT_EQ(cache.erase_containing(0x1abc), 7u);
  EXPECT_EQ(cache.erase_containing(0x1abc), 0u);
  EXPECT_EQ(cache.size(), 0u);
}

}  // namespace
}  // namespace plexus::client
