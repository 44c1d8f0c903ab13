// Matched direct ops moved by one copy: device to device, to or from a host pool, from a
// send's copy aside, and none at all onto the very bytes it reads; over a DeviceMemory
// made of host memory.
#include "daemon/gpu/direct_copy.h"

#include <gtest/gtest.h>

#include "daemon/gpu/gpu_regions.h"
#include "tests/unit/host_device_memory.h"

namespace plexus::daemon::gpu {
namespace {

shm::ValidatedEntry entry_with(shm::BufferSpan send, shm::BufferSpan recv) {
  shm::ValidatedEntry e;
  e.opcode = shm::Opcode::kSend;
  e.dtype = PLEXUS_UINT8;
  e.send = send;
  e.recv = recv;
  return e;
}

struct Gpus {
  std::shared_ptr<test::HostDeviceMemory> device = std::make_shared<test::HostDeviceMemory>();
  GpuRegions regions;
  shm::GpuExport a_export = device->allocate(64);
  shm::GpuExport b_export = device->allocate(64);
  uint32_t a = 0;
  uint32_t b = 0;
  Gpus() {
    a = *regions.add(*device, a_export);
    b = *regions.add(*device, b_export);
    std::vector<std::byte>& block = device->block(a_export);
    for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<std::byte>(i);
  }
  std::unique_ptr<StagedOp> op(shm::BufferSpan send, shm::BufferSpan recv) {
    auto made = StagedOp::direct(regions, entry_with(send, recv));
    EXPECT_TRUE(made.ok()) << made.error();
    return made.ok() ? made.take() : nullptr;
  }
};

TEST(DirectCopyTest, ASendAndReceiveOnGpusMoveDeviceToDeviceAndAreMatched) {
  Gpus g;
  auto send = g.op({g.a, 8, 16}, {});
  auto recv = g.op({}, {g.b, 32, 16});
  auto copy = copy_part(*g.device, send.get(), nullptr, 4, recv.get(), nullptr, 2, 8);
  ASSERT_EQ(test::outcome(copy->done()), "true");
  EXPECT_EQ(g.device->copies_device_to_device, 1);
  EXPECT_TRUE(send->matched());
  EXPECT_TRUE(recv->matched());
  const std::vector<std::byte>& b = g.device->block(g.b_export);
  EXPECT_EQ(b[33], std::byte{0});
  for (size_t i = 0; i < 8; ++i) ASSERT_EQ(b[34 + i], static_cast<std::byte>(12 + i));
  EXPECT_EQ(b[42], std::byte{0});
}

TEST(DirectCopyTest, HostPoolsOnEitherSideAndACopyOntoItselfIsNone) {
  Gpus g;
  std::vector<std::byte> pool(16, std::byte{0x5A});
  auto recv = g.op({}, {g.b, 0, 16});
  ASSERT_EQ(
      test::outcome(copy_between(*g.device, nullptr, pool.data(), recv.get(), nullptr, 16)->done()),
      "true");
  EXPECT_EQ(g.device->copies_to_device, 1);
  EXPECT_EQ(g.device->block(g.b_export)[15], std::byte{0x5A});
  auto send = g.op({g.a, 16, 16}, {});
  std::vector<std::byte> out(16);
  ASSERT_EQ(
      test::outcome(copy_between(*g.device, send.get(), nullptr, nullptr, out.data(), 16)->done()),
      "true");
  EXPECT_EQ(g.device->copies_to_host, 1);
  EXPECT_EQ(out[0], std::byte{16});
  // An in-place rank's own block: the same bytes of the same allocation.
  auto in_place = g.op({g.a, 0, 32}, {g.a, 0, 32});
  ASSERT_EQ(
      test::outcome(
          copy_part(*g.device, in_place.get(), nullptr, 8, in_place.get(), nullptr, 8, 8)->done()),
      "true");
  EXPECT_EQ(g.device->copies_device_to_device, 0);
  std::vector<std::byte> host(8, std::byte{1});
  ASSERT_EQ(
      test::outcome(copy_between(*g.device, nullptr, host.data(), nullptr, out.data(), 8)->done()),
      "true");
  EXPECT_EQ(out[0], std::byte{1}) << "host to host: a memcpy";
}

TEST(DirectCopyTest, ASnapshottedSendGoesFromItsCopyAsideOrFailsWithIt) {
  Gpus g;
  auto send = g.op({g.a, 0, 16}, {});
  ASSERT_EQ(send->snapshot_input(*g.device, {}), "");
  EXPECT_EQ(send->snapshot_needs(), 0u) << "taken once";
  ASSERT_TRUE(send->input_safe_to_overwrite()) << "the copy aside is in";
  g.device->block(g.a_export)[0] = std::byte{0xEE};  // a later op overwrites the input
  auto recv = g.op({}, {g.b, 0, 16});
  ASSERT_EQ(
      test::outcome(copy_between(*g.device, send.get(), nullptr, recv.get(), nullptr, 16)->done()),
      "true");
  EXPECT_EQ(g.device->copies_device_to_device, 0) << "from the host copy, not the device";
  EXPECT_EQ(g.device->block(g.b_export)[0], std::byte{0});
  EXPECT_EQ(g.device->block(g.b_export)[15], std::byte{15});
  auto failed = g.op({g.a, 0, 16}, {});
  g.device->fail_copies = true;
  ASSERT_EQ(failed->snapshot_input(*g.device, {}), "");
  EXPECT_EQ(test::outcome(
                copy_between(*g.device, failed.get(), nullptr, recv.get(), nullptr, 16)->done()),
            "copying its input to the host: copy failed (test)");
}

}  // namespace
}  // namespace plexus::daemon::gpu
