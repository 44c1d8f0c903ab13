// A direct send's input copied aside: charged while held, polled or waited, its failure
// kept, a refusal logged once; over a DeviceMemory made of host memory.
#include "daemon/gpu/input_snapshot.h"

#include <gtest/gtest.h>

#include "tests/unit/host_device_memory.h"

namespace plexus::daemon::gpu {
namespace {

TEST(InputSnapshotTest, TheCopyAsideHoldsTheInputAsItWasAndIsChargedWhileHeld) {
  auto device = std::make_shared<test::HostDeviceMemory>();
  const shm::GpuExport exported = device->allocate(64);
  std::vector<std::byte>& gpu = device->block(exported);
  for (size_t i = 0; i < gpu.size(); ++i) gpu[i] = static_cast<std::byte>(i);
  std::shared_ptr<DeviceMapping> mapping = device->open(exported).take();
  StagingBudget budget{std::make_shared<uint64_t>(0), nullptr};
  InputSnapshot snapshot;
  EXPECT_FALSE(snapshot.taken());
  EXPECT_EQ(snapshot.bytes(), 0u);
  EXPECT_EQ(snapshot.wait(), "") << "nothing taken, nothing to wait for";
  device->polls_per_copy = 1;
  ASSERT_EQ(snapshot.take(*device, *mapping, 8, 32, budget), "");
  EXPECT_TRUE(snapshot.taken());
  EXPECT_EQ(snapshot.bytes(), 32u);
  EXPECT_EQ(*budget.process, 32u);
  EXPECT_FALSE(snapshot.in()) << "the copy engine is still at it";
  EXPECT_TRUE(snapshot.in());
  EXPECT_EQ(snapshot.error(), "");
  gpu[8] = std::byte{0xEE};  // a later op overwrites the device bytes
  EXPECT_EQ(snapshot.host()[0], std::byte{8});
  snapshot.release();
  EXPECT_FALSE(snapshot.taken());
  EXPECT_EQ(*budget.process, 0u);
}

TEST(InputSnapshotTest, AFailedCopyIsKeptAndARefusalIsLoggedOnce) {
  auto device = std::make_shared<test::HostDeviceMemory>();
  const shm::GpuExport exported = device->allocate(64);
  std::shared_ptr<DeviceMapping> mapping = device->open(exported).take();
  InputSnapshot snapshot;
  device->fail_copies = true;
  ASSERT_EQ(snapshot.take(*device, *mapping, 0, 64, {}), "");
  EXPECT_EQ(snapshot.wait(), "copy failed (test)");
  EXPECT_EQ(snapshot.wait(), "copy failed (test)") << "asked again, it still says so";
  EXPECT_EQ(snapshot.error(), "copy failed (test)");
  EXPECT_TRUE(snapshot.first_refusal());
  EXPECT_FALSE(snapshot.first_refusal());
}

}  // namespace
}  // namespace plexus::daemon::gpu
