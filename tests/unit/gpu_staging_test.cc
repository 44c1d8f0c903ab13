// The daemon's GPU path without a GPU: region tables (ids, bounds, release, what in-flight
// ops keep mapped) and staging an op's GPU spans through host memory, over a DeviceMemory
// made of host memory. The CUDA implementation is covered by the gpu-labelled tests.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

#include "daemon/gpu/gpu_regions.h"
#include "daemon/gpu/staged_op.h"
#include "tests/unit/host_device_memory.h"

namespace plexus::daemon::gpu {
namespace {

using test::HostDeviceMemory;
using ::testing::HasSubstr;

// A region that must be added: its id (0 when it was refused, which fails the test).
uint32_t add_ok(GpuRegions& regions, DeviceMemory& device, const shm::GpuExport& exported) {
  common::Result<uint32_t> added = regions.add(device, exported);
  EXPECT_TRUE(added.ok()) << added.error();
  return added.ok() ? *added : 0;
}

// An op that must be staged (null when it was refused, which fails the test).
std::unique_ptr<StagedOp> stage_ok(DeviceMemory& device, const GpuRegions& regions,
                                   const shm::ValidatedEntry& entry, const std::byte** send,
                                   std::byte** recv) {
  common::Result<std::unique_ptr<StagedOp>> made =
      StagedOp::stage(device, regions, entry, send, recv);
  EXPECT_TRUE(made.ok()) << made.error();
  return made.ok() ? made.take() : nullptr;
}

TEST(GpuRegionsTest, IdsStartAtOneAreNeverReusedAndBoundWhatEntriesMayName) {
  auto device = std::make_shared<HostDeviceMemory>();
  GpuRegions regions;
  const uint32_t a = add_ok(regions, *device, device->allocate(4096));
  const uint32_t b = add_ok(regions, *device, device->allocate(100));
  EXPECT_EQ(a, 1u);
  EXPECT_EQ(b, 2u);
  EXPECT_EQ(regions.bytes(a), 4096u);
  EXPECT_EQ(regions.bytes(b), 100u);
  EXPECT_EQ(regions.bytes(0), 0u) << "region 0 is the host pool, never a GPU region";
  EXPECT_EQ(regions.bytes(7), 0u);
  EXPECT_TRUE(regions.release(a));
  EXPECT_FALSE(regions.release(a));
  EXPECT_EQ(regions.bytes(a), 0u);
  EXPECT_EQ(device->closed, 1);
  const uint32_t c = add_ok(regions, *device, device->allocate(64));
  EXPECT_EQ(c, 3u) << "a released id is not handed out again";
}

TEST(GpuRegionsTest, RefusedHandlesAndLyingSizesAreErrorsNotRegions) {
  auto device = std::make_shared<HostDeviceMemory>();
  GpuRegions regions;
  shm::GpuExport unknown;
  unknown.bytes = 64;
  unknown.ipc_handle[0] = std::byte{0x7f};
  EXPECT_THAT(regions.add(*device, unknown).error(), HasSubstr("no such allocation"));
  shm::GpuExport lying = device->allocate(64);
  lying.bytes = 1 << 20;
  EXPECT_THAT(regions.add(*device, lying).error(), HasSubstr("maps 64 bytes"));
  shm::GpuExport empty = device->allocate(64);
  empty.bytes = 0;
  EXPECT_THAT(regions.add(*device, empty).error(), HasSubstr("0 bytes"));
  EXPECT_EQ(regions.size(), 0u);
}

shm::ValidatedEntry entry_with(shm::BufferSpan send, shm::BufferSpan recv) {
  shm::ValidatedEntry e;
  e.opcode = shm::Opcode::kAllReduce;
  e.dtype = PLEXUS_UINT8;
  e.send = send;
  e.recv = recv;
  return e;
}

TEST(StagedOpTest, InputComesFromTheDeviceAndTheResultGoesBackOnlyToTheReceiveSpan) {
  auto device = std::make_shared<HostDeviceMemory>();
  GpuRegions regions;
  const shm::GpuExport exported = device->allocate(256);
  std::vector<std::byte>& gpu = device->block(exported);
  for (size_t i = 0; i < gpu.size(); ++i) gpu[i] = static_cast<std::byte>(i);
  const uint32_t region = add_ok(regions, *device, exported);
  // Send [0, 64), receive [128, 192) of the same allocation.
  const shm::ValidatedEntry e = entry_with({region, 0, 64}, {region, 128, 64});
  const std::byte* send = nullptr;
  std::byte* recv = nullptr;
  device->polls_per_copy = 2;
  auto staged = stage_ok(*device, regions, e, &send, &recv);
  ASSERT_NE(staged, nullptr);
  EXPECT_EQ(staged->staged_bytes(), 128u);
  EXPECT_EQ(test::outcome(staged->input_ready()), "false") << "not started";
  staged->start_input(*device);
  EXPECT_EQ(test::outcome(staged->input_ready()), "false") << "the copy engine is still at it";
  EXPECT_EQ(test::outcome(staged->input_ready()), "false");
  ASSERT_EQ(test::outcome(staged->input_ready()), "true");
  for (size_t i = 0; i < 64; ++i) ASSERT_EQ(send[i], static_cast<std::byte>(i));
  for (size_t i = 0; i < 64; ++i) recv[i] = std::byte{0xAB};
  EXPECT_EQ(gpu[128], static_cast<std::byte>(128)) << "nothing reaches the device before";
  staged->copy_back().start(*device);
  EXPECT_EQ(test::outcome(staged->copy_back().done()), "false");
  EXPECT_EQ(test::outcome(staged->copy_back().done()), "false");
  EXPECT_EQ(gpu[128], static_cast<std::byte>(128)) << "nor while the copy runs";
  ASSERT_EQ(test::outcome(staged->copy_back().done()), "true");
  for (size_t i = 128; i < 192; ++i) ASSERT_EQ(gpu[i], std::byte{0xAB}) << i;
  EXPECT_EQ(gpu[127], static_cast<std::byte>(127));
  EXPECT_EQ(gpu[192], static_cast<std::byte>(192));
  EXPECT_EQ(gpu[0], std::byte{0}) << "the send span is not written back";
}

TEST(StagedOpTest, OverlappingSpansShareOneHostCopyWithTheDevicesLayout) {
  auto device = std::make_shared<HostDeviceMemory>();
  GpuRegions regions;
  const shm::GpuExport exported = device->allocate(4096);
  std::vector<std::byte>& gpu = device->block(exported);
  for (size_t i = 0; i < gpu.size(); ++i) gpu[i] = static_cast<std::byte>(i * 7);
  const uint32_t region = add_ok(regions, *device, exported);
  // An in-place allgather of rank 1 of 4: send is recv + 1 * 256.
  const shm::ValidatedEntry e = entry_with({region, 1024 + 256, 256}, {region, 1024, 1024});
  const std::byte* send = nullptr;
  std::byte* recv = nullptr;
  auto staged = stage_ok(*device, regions, e, &send, &recv);
  ASSERT_NE(staged, nullptr);
  EXPECT_EQ(staged->staged_bytes(), 1024u);
  EXPECT_EQ(send, recv + 256) << "in place on the host as on the device";
  EXPECT_EQ(device->host_buffers, 1);
  staged->start_input(*device);
  ASSERT_EQ(test::outcome(staged->input_ready()), "true");
  EXPECT_EQ(device->copies_to_host, 1) << "one copy of the union";
  EXPECT_EQ(recv[0], static_cast<std::byte>(1024 * 7));
  for (size_t i = 0; i < 1024; ++i) recv[i] = std::byte{0x11};
  EXPECT_EQ(staged->copy_back().wait(*device), "");
  for (size_t i = 1024; i < 2048; ++i) ASSERT_EQ(gpu[i], std::byte{0x11});
  EXPECT_EQ(gpu[1023], static_cast<std::byte>(1023 * 7));
}

TEST(StagedOpTest, AHostPoolSpanIsLeftAloneAndAFailedCopyIsAnError) {
  auto device = std::make_shared<HostDeviceMemory>();
  GpuRegions regions;
  const uint32_t region = add_ok(regions, *device, device->allocate(64));
  std::byte pool_send[64];
  const std::byte* send = pool_send;
  std::byte* recv = nullptr;
  const shm::ValidatedEntry e = entry_with({shm::kHostPoolRegion, 0, 64}, {region, 0, 64});
  auto staged = stage_ok(*device, regions, e, &send, &recv);
  ASSERT_NE(staged, nullptr);
  EXPECT_EQ(send, pool_send);
  EXPECT_EQ(staged->staged_bytes(), 64u);
  staged->start_input(*device);
  EXPECT_EQ(test::outcome(staged->input_ready()), "true");
  EXPECT_EQ(device->copies_to_host, 0) << "a receive-only GPU span reads nothing from the device";
  device->fail_copies = true;
  EXPECT_THAT(staged->copy_back().wait(*device), HasSubstr("copy failed"));
  const shm::ValidatedEntry both = entry_with({region, 0, 32}, {region, 32, 32});
  auto failing = stage_ok(*device, regions, both, &send, &recv);
  ASSERT_NE(failing, nullptr);
  failing->start_input(*device);
  EXPECT_THAT(test::outcome(failing->input_ready()), HasSubstr("copy failed"));
  EXPECT_THAT(test::outcome(failing->input_ready()), HasSubstr("copy failed"))
      << "asked again, it still says so";
}

// As on one CUDA stream: an op that reads where an earlier op writes its result must read
// that result, so its input waits until the result is back; disjoint spans need not wait.
TEST(StagedOpTest, AnOpReadingWhereAnEarlierOpWritesWaitsForThatResult) {
  auto device = std::make_shared<HostDeviceMemory>();
  GpuRegions regions;
  const uint32_t a = add_ok(regions, *device, device->allocate(1024));
  const uint32_t b = add_ok(regions, *device, device->allocate(1024));
  const std::byte* send = nullptr;
  std::byte* recv = nullptr;
  auto first = stage_ok(*device, regions, entry_with({a, 0, 256}, {a, 256, 256}), &send, &recv);
  ASSERT_NE(first, nullptr);
  auto reads_its_result =
      stage_ok(*device, regions, entry_with({a, 384, 128}, {a, 768, 128}), &send, &recv);
  auto reads_its_input =
      stage_ok(*device, regions, entry_with({a, 0, 128}, {a, 512, 128}), &send, &recv);
  auto other_allocation =
      stage_ok(*device, regions, entry_with({b, 256, 256}, {b, 0, 64}), &send, &recv);
  EXPECT_TRUE(reads_its_result->reads_result_of(*first));
  EXPECT_FALSE(reads_its_input->reads_result_of(*first)) << "both only read [0, 128)";
  EXPECT_FALSE(other_allocation->reads_result_of(*first));
  EXPECT_FALSE(first->reads_result_of(*reads_its_result)) << "what it reads is not written";
  first->start_input(*device);
  ASSERT_EQ(test::outcome(first->input_ready()), "true");
  first->copy_back().start(*device);
  ASSERT_EQ(test::outcome(first->copy_back().done()), "true");
  EXPECT_FALSE(reads_its_result->reads_result_of(*first)) << "the result is back: go";
}

TEST(StagedOpTest, AnOpInFlightKeepsItsAllocationMappedAfterTheRegionIsReleased) {
  auto device = std::make_shared<HostDeviceMemory>();
  GpuRegions regions;
  const uint32_t region = add_ok(regions, *device, device->allocate(64));
  const shm::ValidatedEntry e = entry_with({region, 0, 64}, {region, 0, 64});
  const std::byte* send = nullptr;
  std::byte* recv = nullptr;
  auto staged = stage_ok(*device, regions, e, &send, &recv);
  ASSERT_NE(staged, nullptr);
  staged->start_input(*device);
  EXPECT_TRUE(regions.release(region));  // the client forgot it, or died
  EXPECT_EQ(device->closed, 0);
  EXPECT_EQ(staged->copy_back().wait(*device), "");
  staged.reset();
  EXPECT_EQ(device->closed, 1);
  EXPECT_EQ(device->host_buffers_freed, 1);
}

}  // namespace
}  // namespace plexus::daemon::gpu
