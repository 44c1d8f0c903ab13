// A staged op's input copied in by pieces, in order, polled: how much is in, the first
// error, and whether pieces still arrive; over a DeviceMemory made of host memory.
#include "daemon/gpu/staged_input.h"

#include <gtest/gtest.h>

#include "tests/unit/host_device_memory.h"

namespace plexus::daemon::gpu {
namespace {

struct Device {
  std::shared_ptr<test::HostDeviceMemory> memory = std::make_shared<test::HostDeviceMemory>();
  shm::GpuExport exported;
  std::shared_ptr<DeviceMapping> mapping;
  explicit Device(uint64_t bytes) {
    exported = memory->allocate(bytes);
    std::vector<std::byte>& block = memory->block(exported);
    for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<std::byte>(i % 251);
    mapping = memory->open(exported).take();
  }
};

TEST(StagedInputTest, PiecesComeInInOrderAndAPrefixIsUsableBeforeTheWhole) {
  constexpr uint64_t kPiece = StagedInput::kPieceBytes;
  Device device(3 * kPiece);
  std::vector<std::byte> host(2 * kPiece + 16);
  StagedInput input;
  EXPECT_FALSE(input.started());
  EXPECT_EQ(test::outcome(input.ready()), "false") << "not started";
  device.memory->to_host_allowed = 1;  // the copy engine is at the first piece only
  input.start(*device.memory, host.data(), device.mapping.get(), kPiece - 16, host.size());
  EXPECT_TRUE(input.started());
  EXPECT_EQ(device.memory->copies_to_host, 3) << "pieces of kPieceBytes, the last shorter";
  EXPECT_EQ(test::outcome(input.in_through(kPiece)), "true");
  EXPECT_EQ(test::outcome(input.in_through(kPiece + 1)), "false");
  EXPECT_EQ(test::outcome(input.ready()), "false");
  EXPECT_TRUE(input.arriving());
  EXPECT_EQ(host[0], static_cast<std::byte>((kPiece - 16) % 251));
  device.memory->to_host_allowed = 3;
  EXPECT_EQ(test::outcome(input.ready()), "true");
  EXPECT_FALSE(input.arriving());
  EXPECT_EQ(test::outcome(input.in_through(host.size())), "true");
  EXPECT_EQ(host.back(), static_cast<std::byte>((kPiece - 16 + host.size() - 1) % 251));
}

TEST(StagedInputTest, AFailedPieceIsAnErrorEachTimeItIsAsked) {
  Device device(64);
  std::vector<std::byte> host(64);
  StagedInput input;
  device.memory->fail_copies = true;
  input.start(*device.memory, host.data(), device.mapping.get(), 0, 64);
  EXPECT_EQ(test::outcome(input.in_through(1)), "copy failed (test)");
  EXPECT_EQ(test::outcome(input.ready()), "copy failed (test)");
}

TEST(StagedInputTest, NothingToCopyOrCopiedAlreadyIsInAtOnce) {
  auto device = std::make_shared<test::HostDeviceMemory>();
  StagedInput none;
  none.start(*device, nullptr, nullptr, 0, 0);
  EXPECT_EQ(test::outcome(none.ready()), "true");
  EXPECT_EQ(test::outcome(none.in_through(1 << 20)), "true");
  EXPECT_FALSE(none.arriving());
  StagedInput waited;
  waited.mark_in();
  EXPECT_TRUE(waited.started());
  EXPECT_EQ(test::outcome(waited.ready()), "true");
  EXPECT_EQ(device->copies_to_host, 0);
}

}  // namespace
}  // namespace plexus::daemon::gpu
