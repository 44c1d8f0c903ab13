// An op's host memory and its charge to the staging budgets, over a DeviceMemory made of
// host memory.
#include "daemon/gpu/host_copy.h"

#include <gtest/gtest.h>

#include "tests/unit/host_device_memory.h"

namespace plexus::daemon::gpu {
namespace {

TEST(HostCopyTest, ItsBytesCountAgainstTheBudgetWhileHeldAndMoveWithItsCharge) {
  auto device = std::make_shared<test::HostDeviceMemory>();
  StagingBudget process{std::make_shared<uint64_t>(100), std::make_shared<uint64_t>(1000)};
  StagingBudget other{std::make_shared<uint64_t>(0), nullptr};
  {
    HostCopy copy;
    EXPECT_EQ(copy.data(), nullptr);
    ASSERT_EQ(copy.allocate(*device, 64), "");
    EXPECT_NE(copy.data(), nullptr);
    EXPECT_EQ(copy.bytes(), 64u);
    EXPECT_EQ(*process.process, 100u) << "not charged until told";
    copy.charge_to(process);
    EXPECT_EQ(*process.process, 164u);
    EXPECT_EQ(*process.job, 1064u);
    copy.charge_to(other);
    EXPECT_EQ(*process.process, 100u);
    EXPECT_EQ(*process.job, 1000u);
    EXPECT_EQ(*other.process, 64u);
  }
  EXPECT_EQ(*other.process, 0u) << "given back when destroyed";
  EXPECT_EQ(device->host_buffers_freed, 1);
  HostCopy released;
  ASSERT_EQ(released.allocate(*device, 8), "");
  released.charge_to(process);
  released.release();
  EXPECT_EQ(released.data(), nullptr);
  EXPECT_EQ(released.bytes(), 0u);
  EXPECT_EQ(*process.process, 100u);
  EXPECT_EQ(device->host_buffers_freed, 2);
}

}  // namespace
}  // namespace plexus::daemon::gpu
