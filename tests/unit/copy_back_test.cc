// A staged op's result copied back to the device: parts as they are written, the whole
// span unless they covered it, polled or waited, the first error kept; over a DeviceMemory
// made of host memory.
#include "daemon/gpu/copy_back.h"

#include <gtest/gtest.h>

#include "tests/unit/host_device_memory.h"

namespace plexus::daemon::gpu {
namespace {

TEST(CopyBackTest, PartsThatCoverTheResultLeaveNothingForTheEnd) {
  auto device = std::make_shared<test::HostDeviceMemory>();
  const shm::GpuExport exported = device->allocate(64);
  std::shared_ptr<DeviceMapping> mapping = device->open(exported).take();
  std::vector<std::byte> host(32, std::byte{7});
  CopyBack back;
  back.aim(mapping, 16, host.data(), host.size());
  device->polls_per_copy = 1;
  back.start_part(*device, 0, 16);
  back.start_part(*device, 16, 0);  // nothing
  back.start_part(*device, 16, 16);
  EXPECT_EQ(device->copies_to_device, 2);
  back.start(*device);
  EXPECT_EQ(device->copies_to_device, 2) << "the parts covered the span";
  EXPECT_FALSE(back.written());
  EXPECT_EQ(test::outcome(back.done()), "false") << "the copy engine is still at the last part";
  EXPECT_EQ(test::outcome(back.done()), "false") << "and then at the first";
  ASSERT_EQ(test::outcome(back.done()), "true");
  EXPECT_TRUE(back.written());
  const std::vector<std::byte>& gpu = device->block(exported);
  EXPECT_EQ(gpu[15], std::byte{0});
  for (size_t i = 16; i < 48; ++i) ASSERT_EQ(gpu[i], std::byte{7}) << i;
  EXPECT_EQ(gpu[48], std::byte{0});
}

TEST(CopyBackTest, AShortfallCopiesTheWholeSpanAndAFailureIsReported) {
  auto device = std::make_shared<test::HostDeviceMemory>();
  const shm::GpuExport exported = device->allocate(64);
  std::shared_ptr<DeviceMapping> mapping = device->open(exported).take();
  std::vector<std::byte> host(64, std::byte{3});
  CopyBack back;
  back.aim(mapping, 0, host.data(), host.size());
  back.start_part(*device, 0, 16);
  EXPECT_EQ(back.wait(*device), "");
  EXPECT_EQ(device->copies_to_device, 2) << "the part, then the whole span";
  EXPECT_TRUE(back.written());
  CopyBack failing;
  failing.aim(mapping, 0, host.data(), host.size());
  device->fail_copies = true;
  failing.start(*device);
  EXPECT_EQ(test::outcome(failing.done()), "copy failed (test)");
}

TEST(CopyBackTest, NeverAimedItCopiesNothingAndIsWrittenOnceAsked) {
  auto device = std::make_shared<test::HostDeviceMemory>();
  CopyBack back;
  back.start_part(*device, 0, 16);
  back.start(*device);
  EXPECT_FALSE(back.written());
  ASSERT_EQ(test::outcome(back.done()), "true");
  EXPECT_TRUE(back.written());
  EXPECT_EQ(device->copies_to_device, 0);
}

}  // namespace
}  // namespace plexus::daemon::gpu
