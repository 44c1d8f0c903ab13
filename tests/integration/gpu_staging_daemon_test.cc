// The daemon's GPU path without a GPU: plexusd in this process over a DeviceMemory of host
// memory whose copies finish only after the engine has polled them a while, as copy
// engines finish after the call that started them. Raw clients register "allocations" and
// submit entries naming them. Shows that an op runs only once its input is in, that its
// completion waits for its result to be back, that a failed copy fails the communicator
// naming the rank, and that a client killed while its copy runs costs the others nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "daemon/daemon.h"
#include "plexus/plexus.h"
#include "tests/integration/host_gpu_daemon.h"
#include "tests/integration/raw_client.h"
#include "tests/unit/host_device_memory.h"

namespace plexus::test {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kCount = 64;  // floats per buffer
constexpr uint64_t kBytes = kCount * sizeof(float);

class GpuStagingDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_ = std::make_unique<HostGpuDaemon>([this](daemon::Config& c) { configure(c); },
                                            [this](HostDeviceMemory& device) {
                                              for (auto& e : exports_)
                                                e = device.allocate(2 * kBytes);
                                            });
    device_ = host_->device();
    daemon_ = host_->daemon();
  }
  virtual void configure(daemon::Config&) {}
  void TearDown() override {
    clients_.clear();
    host_.reset();
  }

  // `n` rank sessions (of `job`, else "raw-client") joined in one communicator; returns
  // their handles.
  std::vector<uint32_t> join(int n, const std::string& job = "", size_t pool_bytes = 1 << 20) {
    uint8_t token[16];
    for (int i = 0; i < 16; ++i) token[i] = static_cast<uint8_t>(0x30 + i + 16 * tokens_);
    ++tokens_;
    std::vector<RawClient*> joining;
    for (int r = 0; r < n; ++r) {
      clients_.push_back(std::make_unique<RawClient>(daemon_->socket_path()));
      if (!job.empty()) clients_.back()->set_job(job);
      clients_.back()->hello_with_pool(pool_bytes);
      joining.push_back(clients_.back().get());
    }
    std::vector<uint32_t> handles(static_cast<size_t>(n));
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        handles[static_cast<size_t>(r)] = joining[static_cast<size_t>(r)]->comm_init(
            token, static_cast<uint32_t>(n), static_cast<uint32_t>(r), 5000);
      });
    }
    for (auto& t : threads) t.join();
    return handles;
  }

  // Registers exports_[which] for `client`: its region id.
  uint32_t register_allocation(RawClient& client, size_t which) {
    return client.register_export(exports_[which]);
  }

  float* floats(size_t which) {
    return reinterpret_cast<float*>(device_->block(exports_[which]).data());
  }

  // `ranks` rank sessions joined in one communicator, rank r's allocation r registered as
  // regions_[r]; their handles.
  std::vector<uint32_t> join_on_gpus(size_t ranks) {
    const std::vector<uint32_t> comms = join(static_cast<int>(ranks));
    for (size_t r = 0; r < ranks; ++r) {
      regions_[r] = register_allocation(*clients_[r], r);
      EXPECT_NE(regions_[r], 0u);
    }
    return comms;
  }
  // Rank r's input: 1000 (r + 1) + i at [0, kBytes) of its allocation, -1 where results go.
  void fill(size_t ranks) {
    for (size_t r = 0; r < ranks; ++r) {
      for (uint64_t i = 0; i < kCount; ++i) {
        floats(r)[i] = input(r, i);
        floats(r)[kCount + i] = -1.0f;
      }
    }
  }
  static float input(size_t rank, uint64_t i) { return static_cast<float>(1000 * (rank + 1) + i); }
  // Rank `which`'s process alone in a new one-rank communicator (token bytes from
  // `token_base`) submits a host-pool allreduce `user_data`; the communicator's handle.
  uint32_t submit_alone(size_t which, uint8_t token_base, uint64_t user_data) {
    uint8_t token[16];
    for (int i = 0; i < 16; ++i) token[i] = static_cast<uint8_t>(token_base + i);
    const uint32_t alone = clients_[which]->comm_init(token, 1, 0, 5000);
    clients_[which]->submit(allreduce(user_data, alone, shm::kHostPoolRegion, 4096, 8192));
    return alone;
  }
  // `ops` completions for rank `rank`, each a success.
  void expect_done_on(size_t rank, int ops, const char* what) {
    for (int k = 0; k < ops; ++k) {
      auto c = clients_[rank]->next_completion(5000);
      ASSERT_TRUE(c.has_value()) << what << ": rank " << rank << " op " << k << " never ended";
      EXPECT_EQ(c->status, PLEXUS_SUCCESS) << what << ": " << text(*c);
    }
  }
  // The same for ranks 0 .. ranks - 1.
  void expect_done(size_t ranks, int ops, const char* what) {
    for (size_t r = 0; r < ranks; ++r) expect_done_on(r, ops, what);
  }

  static shm::SubmissionEntry allreduce(uint64_t user_data, uint32_t comm, uint32_t region,
                                        uint64_t send_offset, uint64_t recv_offset) {
    shm::SubmissionEntry e{};
    e.user_data = user_data;
    e.opcode = static_cast<uint8_t>(shm::Opcode::kAllReduce);
    e.dtype = PLEXUS_FLOAT32;
    e.redop = PLEXUS_SUM;
    e.comm = comm;
    e.count = kCount;
    e.send_region = region;
    e.recv_region = region;
    e.send_offset = send_offset;
    e.recv_offset = recv_offset;
    return e;
  }

  // A send to or a receive from `peer` of kCount floats at `offset` of `region`.
  static shm::SubmissionEntry p2p(uint64_t user_data, bool send, uint32_t comm, int peer,
                                  uint32_t region, uint64_t offset) {
    shm::SubmissionEntry e{};
    e.user_data = user_data;
    e.opcode = static_cast<uint8_t>(send ? shm::Opcode::kSend : shm::Opcode::kRecv);
    e.dtype = PLEXUS_FLOAT32;
    e.comm = comm;
    e.count = kCount;
    e.peer = peer;
    (send ? e.send_region : e.recv_region) = region;
    (send ? e.send_offset : e.recv_offset) = offset;
    return e;
  }

  static std::string text(const shm::CompletionEntry& c) {
    return std::string(c.message, c.message_len);
  }

  std::unique_ptr<HostGpuDaemon> host_;
  HostDeviceMemory* device_ = nullptr;
  std::array<shm::GpuExport, 3> exports_;
  std::array<uint32_t, 3> regions_{};
  daemon::Daemon* daemon_ = nullptr;
  std::vector<std::unique_ptr<RawClient>> clients_;
  int tokens_ = 0;
};

TEST_F(GpuStagingDaemonTest, OpsRunOnlyOnceTheirInputIsInAndCompleteOnceTheResultIsBack) {
  device_->polls_per_copy = 200;
  const std::vector<uint32_t> comms = join(2);
  std::array<uint32_t, 2> regions{};
  for (size_t r = 0; r < 2; ++r) {
    regions[r] = register_allocation(*clients_[r], r);
    ASSERT_NE(regions[r], 0u);
    for (uint64_t i = 0; i < kCount; ++i) {
      floats(r)[i] = static_cast<float>(i + 1000 * r);
      floats(r)[kCount + i] = -1.0f;
    }
  }
  for (size_t r = 0; r < 2; ++r) {
    // Out of place, then in place on the result, then a host-pool op queued behind both.
    clients_[r]->submit(allreduce(1, comms[r], regions[r], 0, kBytes));
    clients_[r]->submit(allreduce(2, comms[r], regions[r], kBytes, kBytes));
    shm::SubmissionEntry host = allreduce(3, comms[r], shm::kHostPoolRegion, 4096, 8192);
    clients_[r]->submit(host);
  }
  for (size_t r = 0; r < 2; ++r) {
    std::vector<uint64_t> done;
    for (int k = 0; k < 3; ++k) {
      auto c = clients_[r]->next_completion(5000);
      ASSERT_TRUE(c.has_value()) << "rank " << r << " has " << done.size() << " of 3";
      EXPECT_EQ(c->status, PLEXUS_SUCCESS) << text(*c);
      done.push_back(c->user_data);
    }
    EXPECT_THAT(done, ::testing::UnorderedElementsAre(1u, 2u, 3u));
  }
  // (i) + (i + 1000) summed, then that summed over both ranks again: exact in float.
  for (size_t r = 0; r < 2; ++r) {
    for (uint64_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(floats(r)[kCount + i], 2.0f * static_cast<float>(2 * i + 1000)) << r << " " << i;
      ASSERT_EQ(floats(r)[i], static_cast<float>(i + 1000 * r)) << "the send span is untouched";
    }
  }
  EXPECT_EQ(device_->copies_running.load(), 0);
  EXPECT_EQ(device_->copies_to_host.load(), 4);
  EXPECT_EQ(device_->copies_to_device.load(), 4);
}

TEST_F(GpuStagingDaemonTest, AFailedInputCopyFailsTheCommunicatorNamingTheRankAndOthersGoOn) {
  const std::vector<uint32_t> comms = join(2);
  const uint32_t region = register_allocation(*clients_[0], 0);
  ASSERT_NE(region, 0u);
  device_->fail_copies = true;
  clients_[0]->submit(allreduce(7, comms[0], region, 0, kBytes));
  clients_[1]->submit(allreduce(8, comms[1], shm::kHostPoolRegion, 4096, 8192));
  for (size_t r = 0; r < 2; ++r) {
    auto c = clients_[r]->next_completion(5000);
    ASSERT_TRUE(c.has_value()) << "rank " << r << " was left waiting";
    EXPECT_EQ(c->status, PLEXUS_ERR_SYSTEM);
    EXPECT_THAT(text(*c), HasSubstr("on rank 0"));
    EXPECT_THAT(text(*c), HasSubstr("copying its GPU input to the host: copy failed"));
  }
  device_->fail_copies = false;
  // The daemon goes on: a new communicator of the same clients works.
  uint8_t token[16];
  for (int i = 0; i < 16; ++i) token[i] = static_cast<uint8_t>(0xe0 + i);
  std::vector<uint32_t> again(2);
  std::thread second([&] { again[1] = clients_[1]->comm_init(token, 2, 1, 5000); });
  again[0] = clients_[0]->comm_init(token, 2, 0, 5000);
  second.join();
  for (size_t r = 0; r < 2; ++r) {
    clients_[r]->submit(allreduce(9, again[r], r == 0 ? region : shm::kHostPoolRegion,
                                  r == 0 ? 0 : 4096, r == 0 ? kBytes : 8192));
  }
  for (size_t r = 0; r < 2; ++r) {
    auto c = clients_[r]->next_completion(5000);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->status, PLEXUS_SUCCESS) << text(*c);
  }
}

TEST_F(GpuStagingDaemonTest, AClientKilledWhileItsCopyRunsCostsTheOthersNothing) {
  device_->polls_per_copy = 1 << 30;  // never ends by polling: only when waited for
  const std::vector<uint32_t> comms = join(2);
  const uint32_t region = register_allocation(*clients_[0], 0);
  ASSERT_NE(region, 0u);
  clients_[0]->submit(allreduce(1, comms[0], region, 0, kBytes));
  for (int i = 0; i < 500 && device_->copies_running.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_EQ(device_->copies_running.load(), 1);
  EXPECT_FALSE(clients_[0]->next_completion(100).has_value()) << "ran before its input was in";
  clients_[0].reset();  // the client dies with its copy in flight
  clients_[1]->submit(allreduce(2, comms[1], shm::kHostPoolRegion, 4096, 8192));
  auto c = clients_[1]->next_completion(5000);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->status, PLEXUS_ERR_PEER_LOST);
  EXPECT_THAT(text(*c), HasSubstr("rank 0"));
  EXPECT_EQ(device_->copies_running.load(), 0) << "its copy was waited for, not abandoned";
  EXPECT_EQ(device_->closed.load(), 1) << "its allocation was unmapped";
  EXPECT_EQ(device_->host_buffers_freed.load(), device_->host_buffers.load());
  // The survivor goes on, alone.
  submit_alone(1, 0xf0, 3);
  c = clients_[1]->next_completion(5000);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->status, PLEXUS_SUCCESS) << text(*c);
}

// A send and receive within the node take one copy from where the data is to where it
// goes: GPU to GPU, GPU to a host pool, a host pool to GPU; no host copy of their own.
TEST_F(GpuStagingDaemonTest, SendsAndReceivesWithinTheNodeMoveByOneCopyWithNoHostStaging) {
  device_->polls_per_copy = 50;
  const std::vector<uint32_t> comms = join_on_gpus(2);
  fill(2);
  const auto& regions = regions_;
  // GPU to GPU, then rank 1's GPU to rank 0's host pool and back into rank 0's GPU.
  clients_[0]->submit(p2p(1, true, comms[0], 1, regions[0], 0));
  clients_[1]->submit(p2p(1, false, comms[1], 0, regions[1], kBytes));
  clients_[1]->submit(p2p(2, true, comms[1], 0, regions[1], 0));
  clients_[0]->submit(p2p(2, false, comms[0], 1, shm::kHostPoolRegion, 4096));
  for (size_t r = 0; r < 2; ++r) {
    for (int k = 0; k < 2; ++k) {
      auto c = clients_[r]->next_completion(5000);
      ASSERT_TRUE(c.has_value()) << "rank " << r << " op " << k;
      EXPECT_EQ(c->status, PLEXUS_SUCCESS) << text(*c);
    }
  }
  // Once rank 0 has it in its pool (a buffer is the caller's again at its completion).
  clients_[0]->submit(p2p(3, true, comms[0], 0, shm::kHostPoolRegion, 4096));  // to itself
  clients_[0]->submit(p2p(4, false, comms[0], 0, regions[0], kBytes));
  for (int k = 0; k < 2; ++k) {
    auto c = clients_[0]->next_completion(5000);
    ASSERT_TRUE(c.has_value()) << "the send to itself, op " << k;
    EXPECT_EQ(c->status, PLEXUS_SUCCESS) << text(*c);
  }
  for (uint64_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(floats(1)[kCount + i], static_cast<float>(i + 1000)) << "GPU to GPU, " << i;
    ASSERT_EQ(floats(0)[kCount + i], static_cast<float>(i + 2000)) << "through the pool, " << i;
  }
  EXPECT_EQ(device_->copies_device_to_device.load(), 1);
  EXPECT_EQ(device_->copies_to_host.load(), 1);
  EXPECT_EQ(device_->copies_to_device.load(), 1);
  EXPECT_EQ(device_->host_buffers.load(), 0) << "a send or receive within the node was staged";
}

// A direct receive's result is read by the op after it only once the copy has written it.
// An op that writes where an unmatched direct send reads goes on once the send's input is
// copied aside (never waiting for the peer), and the send carries the bytes as they were.
TEST_F(GpuStagingDaemonTest, OpsAroundADirectSendOrReceiveSeeTheOrderTheyWereCalledIn) {
  device_->polls_per_copy = 200;
  const std::vector<uint32_t> comms = join_on_gpus(2);
  fill(2);
  const auto& regions = regions_;
  // Rank 0 sends its [0, kBytes) and then reduces in place there; rank 1 reduces (its
  // [0, kBytes) into its pool) and receives only after rank 0's allreduce has ended.
  clients_[0]->submit(p2p(1, true, comms[0], 1, regions[0], 0));
  clients_[0]->submit(allreduce(2, comms[0], regions[0], 0, 0));
  shm::SubmissionEntry reduce = allreduce(2, comms[1], regions[1], 0, 8192);
  reduce.recv_region = shm::kHostPoolRegion;
  clients_[1]->submit(reduce);
  for (size_t r = 0; r < 2; ++r) {
    auto c = clients_[r]->next_completion(5000);
    ASSERT_TRUE(c.has_value()) << "rank " << r << "'s allreduce waited for the send's peer";
    EXPECT_EQ(c->user_data, 2u);
    EXPECT_EQ(c->status, PLEXUS_SUCCESS) << text(*c);
  }
  // Rank 1 receives, then reduces in place on what it received.
  clients_[1]->submit(p2p(1, false, comms[1], 0, regions[1], kBytes));
  clients_[1]->submit(allreduce(3, comms[1], regions[1], kBytes, kBytes));
  clients_[0]->submit(allreduce(3, comms[0], shm::kHostPoolRegion, 4096, 8192));
  for (size_t r = 0; r < 2; ++r) {
    for (int k = 0; k < 2; ++k) {
      auto c = clients_[r]->next_completion(5000);
      ASSERT_TRUE(c.has_value()) << "rank " << r << " op " << k;
      EXPECT_EQ(c->status, PLEXUS_SUCCESS) << text(*c);
    }
  }
  for (uint64_t i = 0; i < kCount; ++i) {
    // Rank 0's allreduce: its input plus rank 1's.
    ASSERT_EQ(floats(0)[i], static_cast<float>(2 * i + 3000)) << i;
    // Rank 1 received rank 0's input as it was before that allreduce, then added zeros.
    ASSERT_EQ(floats(1)[kCount + i], static_cast<float>(i + 1000)) << i;
  }
}

// A send to itself then a receive into the same bytes, and two ranks exchanging in place
// (each sends a buffer, then receives into it): none waits forever, both exact. And a
// receive after an allreduce into the same bytes leaves the receive's data (the later op).
TEST_F(GpuStagingDaemonTest, InPlaceExchangesEndAndTheLaterWriteIsTheOneLeft) {
  device_->polls_per_copy = 200;
  const std::vector<uint32_t> comms = join_on_gpus(2);
  fill(2);
  const auto& regions = regions_;
  clients_[0]->submit(p2p(1, true, comms[0], 0, regions[0], 0));
  clients_[0]->submit(p2p(2, false, comms[0], 0, regions[0], 0));
  expect_done_on(0, 2, "a send to itself, then a receive into the same bytes");
  for (size_t r = 0; r < 2; ++r) {
    const int peer = 1 - static_cast<int>(r);
    clients_[r]->submit(p2p(3, true, comms[r], peer, regions[r], 0));
    clients_[r]->submit(p2p(4, false, comms[r], peer, regions[r], 0));
  }
  expect_done_on(0, 2, "an in-place exchange");
  expect_done_on(1, 2, "an in-place exchange");
  for (uint64_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(floats(0)[i], static_cast<float>(i + 2000)) << i;
    ASSERT_EQ(floats(1)[i], static_cast<float>(i + 1000)) << i;
  }
  // Rank 1: an allreduce into [kBytes, 2 kBytes), then a receive into the same bytes; rank
  // 0 sends at once and joins the allreduce only later.
  clients_[1]->submit(allreduce(5, comms[1], regions[1], kBytes, kBytes));
  clients_[1]->submit(p2p(6, false, comms[1], 0, regions[1], kBytes));
  clients_[0]->submit(p2p(6, true, comms[0], 1, regions[0], 0));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  clients_[0]->submit(allreduce(5, comms[0], shm::kHostPoolRegion, 4096, 8192));
  expect_done_on(0, 2, "send and allreduce");
  expect_done_on(1, 2, "allreduce and receive");
  for (uint64_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(floats(1)[kCount + i], static_cast<float>(i + 2000)) << "the receive's data, " << i;
  }
}

// A relay, called at once: a receive into [0, kBytes), a send of [kBytes / 2, 3 kBytes / 2)
// (half of it what the receive brings), and a receive into [kBytes, 2 kBytes), which
// overwrites the rest of what the send reads but nothing the first receive writes. The
// send carries what the first receive brought: no copy aside of its input is taken
// before its own input is in (the first receive has landed).
TEST_F(GpuStagingDaemonTest, ARelayedBufferIsSentAsReceivedNotAsItWasBefore) {
  // Copies move their bytes the first time they are looked at (as a copy engine would at
  // once), so that a copy aside taken too early holds the old bytes.
  device_->polls_per_copy = 0;
  const std::vector<uint32_t> comms = join_on_gpus(3);
  fill(3);
  const auto& regions = regions_;
  clients_[0]->submit(p2p(1, false, comms[0], 1, regions[0], 0));
  clients_[0]->submit(p2p(2, true, comms[0], 2, regions[0], kBytes / 2));
  clients_[0]->submit(p2p(3, false, comms[0], 2, regions[0], kBytes));
  clients_[2]->submit(p2p(1, false, comms[2], 0, regions[2], kBytes));
  clients_[2]->submit(p2p(2, true, comms[2], 0, regions[2], 0));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(clients_[0]->next_completion(0).has_value()) << "ended before rank 1 sent";
  clients_[1]->submit(p2p(1, true, comms[1], 0, regions[1], 0));
  for (const auto& [rank, ops] : {std::pair<size_t, int>{0, 3}, {1, 1}, {2, 2}}) {
    for (int k = 0; k < ops; ++k) {
      auto c = clients_[rank]->next_completion(5000);
      ASSERT_TRUE(c.has_value()) << "rank " << rank << " op " << k << " never ended";
      EXPECT_EQ(c->status, PLEXUS_SUCCESS) << text(*c);
    }
  }
  for (uint64_t i = 0; i < kCount / 2; ++i) {
    ASSERT_EQ(floats(2)[kCount + i], static_cast<float>(kCount / 2 + i + 2000))
        << "relayed: what the first receive brought, " << i;
    ASSERT_EQ(floats(2)[kCount + kCount / 2 + i], -1.0f) << "relayed: the bytes after it, " << i;
  }
  for (uint64_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(floats(0)[i], static_cast<float>(i + 2000)) << "the first receive's data, " << i;
    ASSERT_EQ(floats(0)[kCount + i], static_cast<float>(i + 3000)) << "the second's, " << i;
  }
}

// Broadcasts, allgathers and alltoalls within the node: each block moved by one copy on
// the copy engines from where the input lies to where the result goes (GPU to GPU, or to
// or from a rank's host pool), with no host staging; a copy's failure fails the op on
// every rank, naming it.
class GpuCopyCollectiveTest : public GpuStagingDaemonTest {
 protected:
  static constexpr uint64_t kBlock = kCount / 4;  // floats per block
  static constexpr uint64_t kBlockBytes = kBlock * sizeof(float);

  static shm::SubmissionEntry copy_op(uint64_t user_data, shm::Opcode opcode, uint32_t comm,
                                      uint64_t count, uint32_t send_region, uint64_t send_offset,
                                      uint32_t recv_region, uint64_t recv_offset, int root = 0) {
    shm::SubmissionEntry e{};
    e.user_data = user_data;
    e.opcode = static_cast<uint8_t>(opcode);
    e.dtype = PLEXUS_FLOAT32;
    e.comm = comm;
    e.count = count;
    e.peer = root;
    e.send_region = send_region;
    e.send_offset = send_offset;
    e.recv_region = recv_region;
    e.recv_offset = recv_offset;
    return e;
  }
  struct Counts {
    int d2d, to_host, to_device;
  };
  Counts counts() const {
    return {device_->copies_device_to_device.load(), device_->copies_to_host.load(),
            device_->copies_to_device.load()};
  }
};

TEST_F(GpuCopyCollectiveTest, BlocksMoveOnTheCopyEnginesWithNoHostStaging) {
  device_->polls_per_copy = 50;  // results land only when the engine has polled a while
  const std::vector<uint32_t> comms = join_on_gpus(3);
  fill(3);
  // Broadcast from rank 1, out of place: one copy to every rank, the root's own included.
  for (size_t r = 0; r < 3; ++r) {
    clients_[r]->submit(copy_op(1, shm::Opcode::kBroadcast, comms[r], kCount, regions_[r], 0,
                                regions_[r], kBytes, 1));
  }
  expect_done(3, 1, "broadcast");
  for (size_t r = 0; r < 3; ++r) {
    for (uint64_t i = 0; i < kCount; ++i) ASSERT_EQ(floats(r)[kCount + i], input(1, i)) << r;
  }
  Counts c = counts();
  EXPECT_EQ(c.d2d, 3);
  // Allgather: rank s's first block to block s of every rank's result.
  fill(3);
  for (size_t r = 0; r < 3; ++r) {
    clients_[r]->submit(
        copy_op(2, shm::Opcode::kAllGather, comms[r], kBlock, regions_[r], 0, regions_[r], kBytes));
  }
  expect_done(3, 1, "allgather");
  for (size_t r = 0; r < 3; ++r) {
    for (size_t s = 0; s < 3; ++s) {
      for (uint64_t i = 0; i < kBlock; ++i) {
        ASSERT_EQ(floats(r)[kCount + s * kBlock + i], input(s, i)) << r << " " << s << " " << i;
      }
    }
    ASSERT_EQ(floats(r)[kCount + 3 * kBlock], -1.0f) << "written past the result";
  }
  EXPECT_EQ(counts().d2d, c.d2d + 9);
  // Alltoall, out of place: block d of rank s's input to block s of rank d's result.
  fill(3);
  c = counts();
  for (size_t r = 0; r < 3; ++r) {
    clients_[r]->submit(
        copy_op(3, shm::Opcode::kAllToAll, comms[r], kBlock, regions_[r], 0, regions_[r], kBytes));
  }
  expect_done(3, 1, "alltoall");
  for (size_t d = 0; d < 3; ++d) {
    for (size_t s = 0; s < 3; ++s) {
      for (uint64_t i = 0; i < kBlock; ++i) {
        ASSERT_EQ(floats(d)[kCount + s * kBlock + i], input(s, d * kBlock + i))
            << d << " " << s << " " << i;
      }
    }
  }
  EXPECT_EQ(counts().d2d, c.d2d + 9);
  EXPECT_EQ(counts().to_host, 0);
  EXPECT_EQ(counts().to_device, 0);
  EXPECT_EQ(device_->host_buffers.load(), 0) << "a copy collective within the node was staged";
  EXPECT_EQ(device_->copies_running.load(), 0);
}

TEST_F(GpuCopyCollectiveTest, ARankInItsHostPoolIsCopiedToAndFromDirectly) {
  device_->polls_per_copy = 20;
  const std::vector<uint32_t> comms = join_on_gpus(2);
  fill(2);
  // Rank 1's allgather buffers are in its host pool.
  auto* pool = static_cast<float*>(clients_[1]->pool().allocate(4 * kBlockBytes));
  ASSERT_NE(pool, nullptr);
  for (uint64_t i = 0; i < kBlock; ++i) pool[i] = input(1, i);
  for (uint64_t i = kBlock; i < 4 * kBlock; ++i) pool[i] = -1.0f;
  const uint64_t at = clients_[1]->pool().offset_of(pool);
  clients_[0]->submit(
      copy_op(1, shm::Opcode::kAllGather, comms[0], kBlock, regions_[0], 0, regions_[0], kBytes));
  clients_[1]->submit(copy_op(1, shm::Opcode::kAllGather, comms[1], kBlock, shm::kHostPoolRegion,
                              at, shm::kHostPoolRegion, at + 2 * kBlockBytes));
  expect_done(2, 1, "allgather, one rank in its host pool");
  for (size_t s = 0; s < 2; ++s) {
    for (uint64_t i = 0; i < kBlock; ++i) {
      ASSERT_EQ(floats(0)[kCount + s * kBlock + i], input(s, i)) << "rank 0, block " << s;
      ASSERT_EQ(pool[2 * kBlock + s * kBlock + i], input(s, i)) << "rank 1, block " << s;
    }
  }
  // GPU to GPU for rank 0's own block; rank 1's block to the GPU; rank 0's to the pool.
  EXPECT_EQ(counts().d2d, 1);
  EXPECT_EQ(counts().to_device, 1);
  EXPECT_EQ(counts().to_host, 1);
  EXPECT_EQ(device_->host_buffers.load(), 0);
}

// In place: an allgather whose input is its own block and a broadcast whose root's input is
// its result move no block onto itself; an alltoall in place is staged through host memory
// (its blocks are overwritten while others read them). All exact.
TEST_F(GpuCopyCollectiveTest, InPlaceFormsAreExact) {
  device_->polls_per_copy = 20;
  const std::vector<uint32_t> comms = join_on_gpus(3);
  fill(3);
  for (size_t r = 0; r < 3; ++r) {
    // Rank r's input is block r of its result, at [kBytes + r kBlockBytes).
    for (uint64_t i = 0; i < kBlock; ++i) floats(r)[kCount + r * kBlock + i] = input(r, i);
    clients_[r]->submit(copy_op(1, shm::Opcode::kAllGather, comms[r], kBlock, regions_[r],
                                kBytes + r * kBlockBytes, regions_[r], kBytes));
  }
  expect_done(3, 1, "allgather in place");
  for (size_t r = 0; r < 3; ++r) {
    for (size_t s = 0; s < 3; ++s) {
      for (uint64_t i = 0; i < kBlock; ++i) {
        ASSERT_EQ(floats(r)[kCount + s * kBlock + i], input(s, i)) << r << " " << s << " " << i;
      }
    }
  }
  EXPECT_EQ(counts().d2d, 6) << "a rank's own block was copied onto itself";
  for (size_t r = 0; r < 3; ++r) {
    clients_[r]->submit(
        copy_op(2, shm::Opcode::kBroadcast, comms[r], kCount, regions_[r], 0, regions_[r], 0, 2));
  }
  expect_done(3, 1, "broadcast in place");
  for (size_t r = 0; r < 3; ++r) {
    for (uint64_t i = 0; i < kCount; ++i) ASSERT_EQ(floats(r)[i], input(2, i)) << r << " " << i;
  }
  EXPECT_EQ(counts().d2d, 8);
  fill(3);
  for (size_t r = 0; r < 3; ++r) {
    // Ranks 0 and 2 in place, rank 1 out of place.
    const uint64_t recv_at = r == 1 ? kBytes : 0;
    clients_[r]->submit(
        copy_op(3, shm::Opcode::kAllToAll, comms[r], kBlock, regions_[r], 0, regions_[r], recv_at));
  }
  expect_done(3, 1, "alltoall, two ranks in place");
  for (size_t d = 0; d < 3; ++d) {
    const uint64_t recv_at = d == 1 ? kCount : 0;
    for (size_t s = 0; s < 3; ++s) {
      for (uint64_t i = 0; i < kBlock; ++i) {
        ASSERT_EQ(floats(d)[recv_at + s * kBlock + i], input(s, d * kBlock + i))
            << d << " " << s << " " << i;
      }
    }
  }
  EXPECT_EQ(counts().d2d, 8) << "an alltoall with a rank in place was moved by the copy engines";
  EXPECT_GT(device_->host_buffers.load(), 0);
}

// A receive into an allgather's input, called after the allgather and matched before the
// other rank joins it: the allgather carries its input as it was when called (copied
// aside), and the receive does not wait for the other rank's allgather.
TEST_F(GpuCopyCollectiveTest, AWriteAfterAnUnmatchedCollectiveLeavesItsInputAsCalled) {
  device_->polls_per_copy = 20;
  const std::vector<uint32_t> comms = join_on_gpus(2);
  fill(2);
  clients_[0]->submit(
      copy_op(1, shm::Opcode::kAllGather, comms[0], kBlock, regions_[0], 0, regions_[0], kBytes));
  clients_[0]->submit(p2p(2, false, comms[0], 1, regions_[0], 0));
  clients_[1]->submit(p2p(2, true, comms[1], 0, regions_[1], kBytes));  // sends -1s
  for (size_t r = 0; r < 2; ++r) {
    auto c = clients_[r]->next_completion(5000);
    ASSERT_TRUE(c.has_value()) << "rank " << r << "'s receive waited for the allgather";
    EXPECT_EQ(c->user_data, 2u);
    EXPECT_EQ(c->status, PLEXUS_SUCCESS) << text(*c);
  }
  ASSERT_EQ(floats(0)[0], -1.0f) << "the receive did not land";
  for (uint64_t i = 0; i < kCount; ++i) floats(1)[kCount + i] = -2.0f;
  clients_[1]->submit(
      copy_op(1, shm::Opcode::kAllGather, comms[1], kBlock, regions_[1], 0, regions_[1], kBytes));
  expect_done(1, 1, "rank 0's allgather");
  auto c = clients_[1]->next_completion(5000);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->status, PLEXUS_SUCCESS) << text(*c);
  for (size_t r = 0; r < 2; ++r) {
    for (uint64_t i = 0; i < kBlock; ++i) {
      ASSERT_EQ(floats(r)[kCount + i], input(0, i)) << "rank " << r << ": rank 0's block, " << i;
      ASSERT_EQ(floats(r)[kCount + kBlock + i], input(1, i)) << "rank " << r << ": block 1";
    }
  }
}

TEST_F(GpuCopyCollectiveTest, AFailedCopyFailsTheOpOnEveryRankNamingItAndTheNextWorks) {
  device_->polls_per_copy = 5;
  const std::vector<uint32_t> comms = join_on_gpus(2);
  fill(2);
  device_->fail_copies = true;
  for (size_t r = 0; r < 2; ++r) {
    clients_[r]->submit(
        copy_op(1, shm::Opcode::kAllToAll, comms[r], kBlock, regions_[r], 0, regions_[r], kBytes));
  }
  for (size_t r = 0; r < 2; ++r) {
    auto c = clients_[r]->next_completion(5000);
    ASSERT_TRUE(c.has_value()) << "rank " << r << " was left waiting";
    EXPECT_EQ(c->status, PLEXUS_ERR_SYSTEM);
    EXPECT_THAT(text(*c), HasSubstr("alltoall #0 of communicator"));
    EXPECT_THAT(text(*c), HasSubstr("moved by the copy engines: copy failed (test)"));
  }
  device_->fail_copies = false;
  for (size_t r = 0; r < 2; ++r) {
    clients_[r]->submit(copy_op(2, shm::Opcode::kBroadcast, comms[r], kCount, regions_[r], 0,
                                regions_[r], kBytes, 0));
  }
  expect_done(2, 1, "the broadcast after a failed alltoall");
  for (uint64_t i = 0; i < kCount; ++i) ASSERT_EQ(floats(1)[kCount + i], input(0, i)) << i;
}

// A client killed while its blocks are being copied: the copies finish with its mapping
// held, then it goes; the other rank is served again.
TEST_F(GpuCopyCollectiveTest, AClientKilledWhileItsBlocksMoveCostsTheOthersNothing) {
  device_->polls_per_copy = 1000000;  // runs until waited for
  const std::vector<uint32_t> comms = join_on_gpus(2);
  fill(2);
  for (size_t r = 0; r < 2; ++r) {
    clients_[r]->submit(
        copy_op(1, shm::Opcode::kAllGather, comms[r], kBlock, regions_[r], 0, regions_[r], kBytes));
  }
  for (int i = 0; i < 500 && device_->copies_running.load() < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_EQ(device_->copies_running.load(), 4);
  const int closed_before = device_->closed.load();
  clients_[0].reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(device_->closed.load(), closed_before)
      << "rank 0's allocation was unmapped under a running copy";
  device_->polls_per_copy = 0;
  ASSERT_NE(submit_alone(1, 0xd0, 2), 0u);
  std::optional<shm::CompletionEntry> c;
  for (int k = 0; k < 2; ++k) {
    c = clients_[1]->next_completion(5000);
    ASSERT_TRUE(c.has_value());
    if (c->user_data == 2u) break;
  }
  EXPECT_EQ(c->user_data, 2u);
  EXPECT_EQ(c->status, PLEXUS_SUCCESS) << text(*c);
}

// plexusd --gpu-reduce-kernel-bytes: allreduces of at least kBytes per rank on GPU buffers
// go to the device's reduction kernel (here, reduce_arrays run when the "kernel" has been
// polled as long as a copy).
class GpuReduceKernelTest : public GpuStagingDaemonTest {
 protected:
  void configure(daemon::Config& config) override { config.gpu_reduce_kernel_bytes = kBytes; }

  // Rank r's input: i + 100 r + 1 at [0, kBytes) of its allocation, -1 where results go.
  void fill_inputs(size_t ranks) {
    for (size_t r = 0; r < ranks; ++r) {
      for (uint64_t i = 0; i < kCount; ++i) {
        floats(r)[i] = static_cast<float>(i + 100 * r + 1);
        floats(r)[kCount + i] = -1.0f;
      }
    }
  }
  static float sum_of_inputs(uint64_t i, size_t ranks) {
    float sum = 0;
    for (size_t r = 0; r < ranks; ++r) sum += static_cast<float>(i + 100 * r + 1);
    return sum;
  }
};

TEST_F(GpuReduceKernelTest, AnAllreduceOnGpuBuffersIsReducedByTheKernelWithNoHostCopy) {
  device_->has_kernel = true;
  device_->polls_per_copy = 200;
  const std::vector<uint32_t> comms = join_on_gpus(3);
  const auto& regions = regions_;
  fill_inputs(3);
  // Out of place, then twice in place on the result, queued at once: each reads what the
  // one before wrote (the kernel's results land only when it has been polled a while).
  for (size_t r = 0; r < 3; ++r) {
    clients_[r]->submit(allreduce(1, comms[r], regions[r], 0, kBytes));
    clients_[r]->submit(allreduce(2, comms[r], regions[r], kBytes, kBytes));
    clients_[r]->submit(allreduce(3, comms[r], regions[r], kBytes, kBytes));
  }
  expect_done(3, 3, "allreduces on the kernel");
  for (size_t r = 0; r < 3; ++r) {
    for (uint64_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(floats(r)[kCount + i], 9 * sum_of_inputs(i, 3)) << "rank " << r << ", " << i;
      ASSERT_EQ(floats(r)[i], static_cast<float>(i + 100 * r + 1)) << "input changed, " << i;
    }
  }
  EXPECT_EQ(device_->reductions.load(), 3);
  EXPECT_EQ(device_->host_buffers.load(), 0) << "an op for the kernel was staged";
  EXPECT_EQ(device_->copies_to_host.load(), 0);
  // Smaller than --gpu-reduce-kernel-bytes: through host memory, as without the kernel.
  for (size_t r = 0; r < 3; ++r) {
    shm::SubmissionEntry small = allreduce(4, comms[r], regions[r], 0, kBytes);
    small.count = kCount / 2;
    clients_[r]->submit(small);
  }
  expect_done(3, 1, "a small allreduce");
  EXPECT_EQ(device_->reductions.load(), 3);
  EXPECT_GT(device_->host_buffers.load(), 0);
  for (uint64_t i = 0; i < kCount / 2; ++i) ASSERT_EQ(floats(1)[kCount + i], sum_of_inputs(i, 3));
}

TEST_F(GpuReduceKernelTest, RanksTheKernelCannotTakeAreReducedOnTheHostExactly) {
  device_->has_kernel = true;
  device_->polls_per_copy = 50;
  const std::vector<uint32_t> comms = join_on_gpus(2);
  const auto& regions = regions_;
  // The device refuses (a GPU that cannot reach the other's memory): staged there and then.
  fill_inputs(2);
  device_->refuse_reduce = true;
  for (size_t r = 0; r < 2; ++r) clients_[r]->submit(allreduce(1, comms[r], regions[r], 0, kBytes));
  expect_done(2, 1, "a refused kernel");
  for (size_t r = 0; r < 2; ++r) {
    for (uint64_t i = 0; i < kCount; ++i) ASSERT_EQ(floats(r)[kCount + i], sum_of_inputs(i, 2));
  }
  EXPECT_EQ(device_->reductions.load(), 0);
  device_->refuse_reduce = false;
  // Rank 1's buffers in its host pool: rank 0's GPU part is staged when they meet.
  fill_inputs(2);
  auto* pool = static_cast<float*>(clients_[1]->pool().allocate(2 * kBytes));
  ASSERT_NE(pool, nullptr);
  for (uint64_t i = 0; i < kCount; ++i) pool[i] = static_cast<float>(i + 100 + 1);
  const uint64_t at = clients_[1]->pool().offset_of(pool);
  clients_[0]->submit(allreduce(2, comms[0], regions[0], 0, kBytes));
  clients_[1]->submit(allreduce(2, comms[1], shm::kHostPoolRegion, at, at + kBytes));
  expect_done(2, 1, "a GPU rank beside a host rank");
  for (uint64_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(floats(0)[kCount + i], sum_of_inputs(i, 2)) << i;
    ASSERT_EQ(pool[kCount + i], sum_of_inputs(i, 2)) << i;
  }
  EXPECT_EQ(device_->reductions.load(), 0);
  // And the kernel again, once every rank is on a GPU it can take.
  fill_inputs(2);
  for (size_t r = 0; r < 2; ++r) clients_[r]->submit(allreduce(3, comms[r], regions[r], 0, kBytes));
  expect_done(2, 1, "the kernel after host fallbacks");
  EXPECT_EQ(device_->reductions.load(), 1);
  for (uint64_t i = 0; i < kCount; ++i) ASSERT_EQ(floats(1)[kCount + i], sum_of_inputs(i, 2));
}

TEST_F(GpuReduceKernelTest, AFailedKernelFailsTheOpOnEveryRankNamingItAndTheNextWorks) {
  device_->has_kernel = true;
  device_->polls_per_copy = 20;
  const std::vector<uint32_t> comms = join_on_gpus(2);
  const auto& regions = regions_;
  fill_inputs(2);
  device_->fail_copies = true;
  for (size_t r = 0; r < 2; ++r) clients_[r]->submit(allreduce(1, comms[r], regions[r], 0, kBytes));
  for (size_t r = 0; r < 2; ++r) {
    auto c = clients_[r]->next_completion(5000);
    ASSERT_TRUE(c.has_value()) << "rank " << r << " was left waiting";
    EXPECT_EQ(c->status, PLEXUS_ERR_SYSTEM);
    EXPECT_THAT(text(*c), HasSubstr("allreduce #0 of communicator"));
    EXPECT_THAT(text(*c), HasSubstr("reduced on the GPU by plexusd's kernel: copy failed (test)"));
  }
  device_->fail_copies = false;
  for (size_t r = 0; r < 2; ++r) clients_[r]->submit(allreduce(2, comms[r], regions[r], 0, kBytes));
  expect_done(2, 1, "the allreduce after a failed one");
  for (uint64_t i = 0; i < kCount; ++i) ASSERT_EQ(floats(0)[kCount + i], sum_of_inputs(i, 2));
}

// A client killed while the kernel reduces its buffers: the kernel is let finish with the
// mapping held, then the mapping goes; the other rank is served again.
TEST_F(GpuReduceKernelTest, AClientKilledWhileTheKernelRunsCostsTheOthersNothing) {
  device_->has_kernel = true;
  device_->polls_per_copy = 1000000;  // runs until waited for
  const std::vector<uint32_t> comms = join_on_gpus(2);
  const auto& regions = regions_;
  fill_inputs(2);
  for (size_t r = 0; r < 2; ++r) clients_[r]->submit(allreduce(1, comms[r], regions[r], 0, kBytes));
  for (int i = 0; i < 500 && device_->reductions.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_EQ(device_->reductions.load(), 1);
  const int closed_before = device_->closed.load();
  clients_[0].reset();
  for (int i = 0; i < 500 && device_->closed.load() == closed_before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(device_->closed.load(), closed_before)
      << "rank 0's allocation was unmapped under the running kernel";
  device_->polls_per_copy = 0;
  // The kernel is still polled (a long count): the survivor's op ends once it is done.
  ASSERT_NE(submit_alone(1, 0xe0, 2), 0u);
  auto c = clients_[1]->next_completion(5000);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->user_data, 2u) << "the survivor's op waited behind the dead client's kernel";
  EXPECT_EQ(c->status, PLEXUS_SUCCESS) << text(*c);
}

// Two daemons in this process, each over a host-memory device of its own, joined through
// their peer listeners on loopback, one rank on each with its buffers on its node's "GPU":
// the network path of GPU buffers. Each node copies its rank's input to the host in
// pieces, the daemons run the op between them in slices, each slice once its input is in,
// and each node copies a slice's result back as soon as it is written.
class GpuTwoNodeTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kFloats = 1 << 20;  // 4 MiB per buffer: several slices
  static constexpr uint64_t kBufferBytes = kFloats * sizeof(float);

  struct Node {
    std::unique_ptr<HostGpuDaemon> host;
    HostDeviceMemory* device = nullptr;
    shm::GpuExport allocation;  // four buffers of kBufferBytes
    daemon::Daemon* daemon = nullptr;
    std::unique_ptr<RawClient> client;
    uint32_t region = 0;
    uint32_t comm = 0;
    float* floats() { return reinterpret_cast<float*>(device->block(allocation).data()); }
  };

  void SetUp() override {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      Node& node = nodes_[i];
      node.host = std::make_unique<HostGpuDaemon>(
          [i](daemon::Config& config) {
            config.peer_listen = "127.0.0.1:0";
            config.node_name = i == 0 ? "gpu-a" : "gpu-b";
          },
          [&node](HostDeviceMemory& device) {
            node.allocation = device.allocate(4 * kBufferBytes);
          });
      node.device = node.host->device();
      node.daemon = node.host->daemon();
    }
    const RootDaemon root = RawClient::root_of(nodes_[0].daemon->socket_path());
    ASSERT_FALSE(root.addresses.empty()) << "node a has no peer address";
    uint8_t token[16];
    for (int i = 0; i < 16; ++i) token[i] = static_cast<uint8_t>(0x90 + i);
    for (auto& node : nodes_) {
      node.client = std::make_unique<RawClient>(node.daemon->socket_path());
      node.client->hello_with_pool(1 << 20);
    }
    std::vector<std::thread> joining;
    for (size_t r = 0; r < nodes_.size(); ++r) {
      joining.emplace_back([&, r] {
        nodes_[r].comm =
            nodes_[r].client->comm_init(token, 2, static_cast<uint32_t>(r), 10000, root);
      });
    }
    for (auto& t : joining) t.join();
    for (auto& node : nodes_) {
      node.region = node.client->register_export(node.allocation);
      ASSERT_NE(node.region, 0u);
    }
  }
  void TearDown() override {
    for (auto& node : nodes_) node.client.reset();
    for (auto& node : nodes_) node.host.reset();
  }

  static shm::SubmissionEntry entry(uint64_t user_data, shm::Opcode opcode, uint32_t comm,
                                    uint64_t count, uint32_t region, uint64_t send_offset,
                                    uint64_t recv_offset, int peer = 0) {
    shm::SubmissionEntry e{};
    e.user_data = user_data;
    e.opcode = static_cast<uint8_t>(opcode);
    e.dtype = PLEXUS_FLOAT32;
    e.redop = PLEXUS_SUM;
    e.comm = comm;
    e.count = count;
    e.peer = peer;
    if (opcode != shm::Opcode::kRecv) e.send_region = region;
    if (opcode != shm::Opcode::kSend) e.recv_region = region;
    e.send_offset = send_offset;
    e.recv_offset = recv_offset;
    return e;
  }
  // Rank r's first buffer: i % 4096 + 10000 (r + 1), exact in float; the rest -1.
  static float input(size_t rank, uint64_t i) {
    return static_cast<float>(i % 4096 + 10000 * (rank + 1));
  }
  void fill() {
    for (size_t r = 0; r < nodes_.size(); ++r) {
      float* f = nodes_[r].floats();
      for (uint64_t i = 0; i < kFloats; ++i) f[i] = input(r, i);
      std::fill(f + kFloats, f + 4 * kFloats, -1.0f);
    }
  }
  void expect_done(uint64_t user_data, const char* what) {
    for (size_t r = 0; r < nodes_.size(); ++r) {
      auto c = nodes_[r].client->next_completion(10000);
      ASSERT_TRUE(c.has_value()) << what << ": the rank on node " << r << " never ended";
      EXPECT_EQ(c->user_data, user_data) << what;
      EXPECT_EQ(c->status, PLEXUS_SUCCESS)
          << what << ": " << std::string(c->message, c->message_len);
    }
  }

  std::array<Node, 2> nodes_;
};

TEST_F(GpuTwoNodeTest, CollectivesAndSendsAcrossNodesOnGpuBuffersAreExact) {
  for (auto& node : nodes_) node.device->polls_per_copy = 20;
  fill();
  // Allreduce out of place, then in place on its result, queued at once.
  for (auto& node : nodes_) {
    node.client->submit(
        entry(1, shm::Opcode::kAllReduce, node.comm, kFloats, node.region, 0, kBufferBytes));
    node.client->submit(entry(2, shm::Opcode::kAllReduce, node.comm, kFloats, node.region,
                              kBufferBytes, kBufferBytes));
  }
  expect_done(1, "allreduce");
  expect_done(2, "allreduce in place on its result");
  for (size_t r = 0; r < 2; ++r) {
    const float* f = nodes_[r].floats();
    for (uint64_t i = 0; i < kFloats; ++i) {
      ASSERT_EQ(f[kFloats + i], 2 * (input(0, i) + input(1, i))) << "node " << r << ", " << i;
      ASSERT_EQ(f[i], input(r, i)) << "the input changed, node " << r << ", " << i;
    }
    // One copy to the host of each op's input (one piece of 4 MiB), and its result back a
    // slice (2 MiB) at a time as the slices end: nothing else.
    EXPECT_EQ(nodes_[r].device->copies_to_host.load(), 2);
    EXPECT_EQ(nodes_[r].device->copies_to_device.load(), 4);
    EXPECT_EQ(nodes_[r].device->copies_device_to_device.load(), 0);
  }
  // Allgather of half a buffer from each node into [kBufferBytes, 2 kBufferBytes).
  fill();
  for (auto& node : nodes_) {
    node.client->submit(
        entry(3, shm::Opcode::kAllGather, node.comm, kFloats / 2, node.region, 0, kBufferBytes));
  }
  expect_done(3, "allgather");
  for (size_t r = 0; r < 2; ++r) {
    const float* f = nodes_[r].floats();
    for (size_t s = 0; s < 2; ++s) {
      for (uint64_t i = 0; i < kFloats / 2; ++i) {
        ASSERT_EQ(f[kFloats + s * (kFloats / 2) + i], input(s, i)) << r << " " << s << " " << i;
      }
    }
  }
  // A send from node a's GPU buffer to a receive into node b's, and one back.
  fill();
  nodes_[0].client->submit(
      entry(4, shm::Opcode::kSend, nodes_[0].comm, kFloats, nodes_[0].region, 0, 0, 1));
  nodes_[1].client->submit(entry(4, shm::Opcode::kRecv, nodes_[1].comm, kFloats, nodes_[1].region,
                                 0, 2 * kBufferBytes, 0));
  expect_done(4, "a send across nodes");
  const float* b = nodes_[1].floats();
  for (uint64_t i = 0; i < kFloats; ++i) ASSERT_EQ(b[2 * kFloats + i], input(0, i)) << i;
}

// The copies overlap the network: with only the first 4 MiB piece of each node's 8 MiB
// input in, the first slices run between the nodes and their results are copied back
// while the rest of the input is still coming; the op ends, exact, once it is all in.
TEST_F(GpuTwoNodeTest, SlicesRunAsTheirInputArrivesAndTheirResultsGoBackAtOnce) {
  fill();
  for (size_t r = 0; r < 2; ++r) {
    float* f = nodes_[r].floats();
    for (uint64_t i = kFloats; i < 2 * kFloats; ++i) f[i] = input(r, i);  // 8 MiB of input
    nodes_[r].device->to_host_allowed = 1;                                // the first piece only
  }
  for (auto& node : nodes_) {
    node.client->submit(entry(1, shm::Opcode::kAllReduce, node.comm, 2 * kFloats, node.region, 0,
                              2 * kBufferBytes));
  }
  for (int i = 0; i < 2500; ++i) {
    if (nodes_[0].device->copies_to_device.load() > 0 &&
        nodes_[1].device->copies_to_device.load() > 0) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_GT(nodes_[r].device->copies_to_device.load(), 0)
        << "node " << r << ": no slice's result went back while the input was still coming";
    EXPECT_EQ(nodes_[r].device->copies_to_host.load(), 2) << "node " << r << ": two pieces";
    EXPECT_FALSE(nodes_[r].client->next_completion(0).has_value()) << "ended before its input";
  }
  for (auto& node : nodes_) node.device->to_host_allowed = std::numeric_limits<int>::max();
  expect_done(1, "an allreduce whose input came in pieces");
  for (size_t r = 0; r < 2; ++r) {
    const float* f = nodes_[r].floats();
    for (uint64_t i = 0; i < 2 * kFloats; ++i) {
      ASSERT_EQ(f[2 * kFloats + i], input(0, i) + input(1, i)) << "node " << r << ", " << i;
    }
    EXPECT_EQ(nodes_[r].device->copies_to_device.load(), 4) << "one per 2 MiB slice";
  }
}

// An op that writes where an op between nodes is still copying its input in waits until
// that input is in: node a's allreduce has its first piece in and its second held, and a
// local op of the same process then writes into the second piece's bytes. The allreduce
// still reduces the bytes as they were when it was called.
TEST_F(GpuTwoNodeTest, AWriteOverAnInputStillArrivingWaitsForIt) {
  fill();
  for (size_t r = 0; r < 2; ++r) {
    float* f = nodes_[r].floats();
    for (uint64_t i = kFloats; i < 2 * kFloats; ++i) f[i] = input(r, i);
  }
  nodes_[0].device->to_host_allowed = 1;
  for (auto& node : nodes_) {
    node.client->submit(entry(1, shm::Opcode::kAllReduce, node.comm, 2 * kFloats, node.region, 0,
                              2 * kBufferBytes));
  }
  for (int i = 0; i < 2500 && nodes_[0].device->copies_to_device.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_GT(nodes_[0].device->copies_to_device.load(), 0) << "node a's allreduce is not running";
  // A one-rank communicator of node a's process: its allreduce copies 1024 floats from the
  // host pool into [kBufferBytes, +4 KiB), inside the allreduce's second piece.
  uint8_t token[16];
  for (int i = 0; i < 16; ++i) token[i] = static_cast<uint8_t>(0xa0 + i);
  const uint32_t alone = nodes_[0].client->comm_init(token, 1, 0, 5000);
  auto* pool = static_cast<float*>(nodes_[0].client->pool().allocate(4096));
  ASSERT_NE(pool, nullptr);
  for (int i = 0; i < 1024; ++i) pool[i] = 7.0f;
  shm::SubmissionEntry write =
      entry(2, shm::Opcode::kAllReduce, alone, 1024, nodes_[0].region, 0, kBufferBytes);
  write.send_region = shm::kHostPoolRegion;
  write.send_offset = nodes_[0].client->pool().offset_of(pool);
  nodes_[0].client->submit(write);
  EXPECT_FALSE(nodes_[0].client->next_completion(100).has_value())
      << "wrote over the allreduce's input before it was in";
  nodes_[0].device->to_host_allowed = std::numeric_limits<int>::max();
  std::vector<uint64_t> done;
  for (int k = 0; k < 2; ++k) {
    auto c = nodes_[0].client->next_completion(10000);
    ASSERT_TRUE(c.has_value()) << "node a: op " << k << " never ended";
    EXPECT_EQ(c->status, PLEXUS_SUCCESS) << std::string(c->message, c->message_len);
    done.push_back(c->user_data);
  }
  EXPECT_THAT(done, ::testing::UnorderedElementsAre(1u, 2u));
  auto c = nodes_[1].client->next_completion(10000);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->status, PLEXUS_SUCCESS);
  const float* a = nodes_[0].floats();
  for (uint64_t i = 0; i < 2 * kFloats; ++i) {
    ASSERT_EQ(a[2 * kFloats + i], input(0, i) + input(1, i)) << "reduced what was called, " << i;
  }
  for (uint64_t i = 0; i < 1024; ++i) ASSERT_EQ(a[kFloats + i], 7.0f) << "the later write, " << i;
}

// A copy that fails on one node fails the op on both nodes, naming the rank, what failed
// and, on the other node, the node it failed on; neither rank is left waiting.
TEST_F(GpuTwoNodeTest, AFailedCopyOnOneNodeFailsTheOpOnBothNamingIt) {
  fill();
  nodes_[1].device->fail_copies = true;
  for (auto& node : nodes_) {
    node.client->submit(
        entry(1, shm::Opcode::kAllReduce, node.comm, kFloats, node.region, 0, kBufferBytes));
  }
  for (size_t r = 0; r < 2; ++r) {
    auto c = nodes_[r].client->next_completion(10000);
    ASSERT_TRUE(c.has_value()) << "the rank on node " << r << " was left waiting";
    EXPECT_NE(c->status, PLEXUS_SUCCESS);
    const std::string message(c->message, c->message_len);
    EXPECT_THAT(message, HasSubstr("allreduce on rank 1"));
    EXPECT_THAT(message, HasSubstr("copying its GPU input to the host: copy failed (test)"));
    if (r == 0) {
      EXPECT_THAT(message, HasSubstr("node gpu-b")) << "the other node is named";
    }
  }
}

// Room for less than one buffer's host copy.
class GpuSmallStagingBudgetTest : public GpuStagingDaemonTest {
 protected:
  void configure(daemon::Config& config) override {
    config.max_gpu_staging_bytes = kBytes / 2;
    config.gpu_reduce_kernel_bytes = kBytes;
  }
};

// A copy aside that would pass --max-gpu-staging-bytes is not taken: the op overwriting
// the send's input waits until the send is matched instead, and both end exact.
TEST_F(GpuSmallStagingBudgetTest, ACopyAsidePastTheBudgetIsNotTakenAndTheWriterWaits) {
  device_->polls_per_copy = 20;
  const std::vector<uint32_t> comms = join_on_gpus(2);
  fill(2);
  const auto& regions = regions_;
  clients_[0]->submit(p2p(1, true, comms[0], 1, regions[0], 0));
  clients_[0]->submit(p2p(2, false, comms[0], 1, regions[0], 0));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(clients_[0]->next_completion(0).has_value()) << "ended before rank 1 called";
  clients_[1]->submit(p2p(2, true, comms[1], 0, regions[1], 0));
  clients_[1]->submit(p2p(1, false, comms[1], 0, regions[1], kBytes));
  for (size_t r = 0; r < 2; ++r) {
    for (int k = 0; k < 2; ++k) {
      auto c = clients_[r]->next_completion(5000);
      ASSERT_TRUE(c.has_value()) << "rank " << r << " op " << k << " never ended";
      EXPECT_EQ(c->status, PLEXUS_SUCCESS) << text(*c);
    }
  }
  for (uint64_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(floats(1)[kCount + i], static_cast<float>(i + 1000)) << "sent as called, " << i;
    ASSERT_EQ(floats(0)[i], static_cast<float>(i + 2000)) << "received, " << i;
  }
  EXPECT_EQ(device_->host_buffers.load(), 0) << "a copy aside past the budget was taken";
}

// A collective meant for the kernel that must be staged after all (the kernel refused it)
// is held to the same budget: refused on every rank with NO_MEMORY naming the flag; the
// next one, on the kernel, is exact.
TEST_F(GpuSmallStagingBudgetTest, AKernelFallbackPastTheBudgetIsRefusedNamingTheFlag) {
  device_->has_kernel = true;
  device_->refuse_reduce = true;
  const std::vector<uint32_t> comms = join(2);
  std::array<uint32_t, 2> regions{};
  for (size_t r = 0; r < 2; ++r) {
    regions[r] = register_allocation(*clients_[r], r);
    ASSERT_NE(regions[r], 0u);
    for (uint64_t i = 0; i < kCount; ++i) floats(r)[i] = static_cast<float>(i + r);
  }
  for (size_t r = 0; r < 2; ++r) clients_[r]->submit(allreduce(1, comms[r], regions[r], 0, kBytes));
  for (size_t r = 0; r < 2; ++r) {
    auto c = clients_[r]->next_completion(5000);
    ASSERT_TRUE(c.has_value()) << "rank " << r << " was left waiting";
    EXPECT_EQ(c->status, PLEXUS_ERR_NO_MEMORY) << text(*c);
    EXPECT_THAT(text(*c), HasSubstr("rank 0"));
    EXPECT_THAT(text(*c), HasSubstr("--max-gpu-staging-bytes"));
  }
  device_->refuse_reduce = false;
  for (size_t r = 0; r < 2; ++r) clients_[r]->submit(allreduce(2, comms[r], regions[r], 0, kBytes));
  for (size_t r = 0; r < 2; ++r) {
    auto c = clients_[r]->next_completion(5000);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->status, PLEXUS_SUCCESS) << text(*c);
  }
  for (uint64_t i = 0; i < kCount; ++i)
    ASSERT_EQ(floats(1)[kCount + i], static_cast<float>(2 * i + 1));
}

// Room for one out-of-place op's host copies (two spans of kBytes) at a time.
class GpuStagingBudgetTest : public GpuStagingDaemonTest {
 protected:
  void configure(daemon::Config& config) override { config.max_gpu_staging_bytes = 2 * kBytes; }
};

// One process's GPU ops in flight hold at most --max-gpu-staging-bytes of host copies: an
// op past it is refused with NO_MEMORY naming the flag, the op in flight is untouched,
// and the room comes back when it ends.
TEST_F(GpuStagingBudgetTest, AnOpPastTheProcessStagingBudgetIsRefusedAndTheRoomComesBack) {
  const std::vector<uint32_t> comms = join(2);
  const uint32_t region = register_allocation(*clients_[0], 0);
  ASSERT_NE(region, 0u);
  for (uint64_t i = 0; i < kCount; ++i) floats(0)[i] = static_cast<float>(i);
  clients_[0]->submit(allreduce(1, comms[0], region, 0, kBytes));  // waits for rank 1
  clients_[0]->submit(allreduce(2, comms[0], region, 0, kBytes));
  auto refused = clients_[0]->next_completion(5000);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->user_data, 2u);
  EXPECT_EQ(refused->status, PLEXUS_ERR_NO_MEMORY);
  EXPECT_THAT(text(*refused), HasSubstr("needs " + std::to_string(2 * kBytes) + " bytes"));
  EXPECT_THAT(text(*refused), HasSubstr("hold " + std::to_string(2 * kBytes) + " of the"));
  EXPECT_THAT(text(*refused), HasSubstr("--max-gpu-staging-bytes"));
  // Rank 1 joins the first: it completes, exact, and the same op fits again.
  for (uint64_t round : {1u, 3u}) {
    if (round == 3) clients_[0]->submit(allreduce(3, comms[0], region, 0, kBytes));
    clients_[1]->submit(allreduce(round, comms[1], shm::kHostPoolRegion, 4096, 8192));
    for (size_t r = 0; r < 2; ++r) {
      auto c = clients_[r]->next_completion(5000);
      ASSERT_TRUE(c.has_value()) << "rank " << r << " op " << round;
      EXPECT_EQ(c->user_data, round);
      EXPECT_EQ(c->status, PLEXUS_SUCCESS) << text(*c);
    }
  }
  // The pool's zeros were added: the result is rank 0's input.
  for (uint64_t i = 0; i < kCount; ++i) ASSERT_EQ(floats(0)[kCount + i], static_cast<float>(i));
}

// Per-job caps ([jobs.NAME] max_inflight_bytes, max_staging_bytes): "raw-client" may hold
// two buffers' worth; "free" has no cap.
class JobCapsTest : public GpuStagingDaemonTest {
 protected:
  void configure(daemon::Config& config) override {
    config.jobs["raw-client"].caps = {2 * kBytes, 2 * kBytes};
  }

  // Waits for one completion of `client` and checks its user_data and status.
  shm::CompletionEntry expect_completion(RawClient& client, uint64_t user_data,
                                         plexus_result_t status) {
    auto c = client.next_completion(5000);
    EXPECT_TRUE(c.has_value()) << "op " << user_data << " never ended";
    if (!c) return {};
    EXPECT_EQ(c->user_data, user_data);
    EXPECT_EQ(c->status, status) << text(*c);
    return *c;
  }
};

// A job's ops in flight on the node, over all its processes, hold at most its
// max_inflight_bytes: an op that would start new work past it is refused with NO_MEMORY
// naming the job, the cap and the key, before it joins its communicator; an op that joins
// one its other ranks wait in is let through, so they finish; another job is not held to
// the cap; and the room comes back as ops end.
TEST_F(JobCapsTest, AnOpPastItsJobsInFlightCapIsRefusedNamingTheCapAndTheRoomComesBack) {
  const std::vector<uint32_t> comms = join(2);
  const std::vector<uint32_t> solo = join(1);  // a third process of the job
  const std::vector<uint32_t> free_comms = join(2, "free");
  RawClient& a = *clients_[0];
  RawClient& b = *clients_[1];
  RawClient& c = *clients_[2];
  // Each rank's op k reads block k and writes block 4 + k of its pool buffer.
  auto* pool_a = static_cast<float*>(a.pool().allocate(8 * kBytes));
  auto* pool_b = static_cast<float*>(b.pool().allocate(8 * kBytes));
  ASSERT_NE(pool_a, nullptr);
  ASSERT_NE(pool_b, nullptr);
  std::fill(pool_a, pool_a + 8 * kCount, 0.0f);
  std::fill(pool_b, pool_b + 8 * kCount, 0.0f);
  pool_a[kCount] = 5;  // op 2's input on rank 0
  pool_b[kCount] = 7;  // and on rank 1
  auto op_on = [&](RawClient& client, const float* pool, uint64_t k, uint32_t comm) {
    const uint64_t at = client.pool().offset_of(pool);
    return allreduce(k, comm, shm::kHostPoolRegion, at + (k - 1) * kBytes, at + (k + 3) * kBytes);
  };
  // Rank 0 calls two allreduces, which wait for rank 1: the job holds its cap.
  a.submit(op_on(a, pool_a, 1, comms[0]));
  a.submit(op_on(a, pool_a, 2, comms[0]));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(a.next_completion(0).has_value()) << "ended before rank 1 called";
  // A third: refused, and so is an op of another process of the job.
  a.submit(op_on(a, pool_a, 3, comms[0]));
  const shm::CompletionEntry refused = expect_completion(a, 3, PLEXUS_ERR_NO_MEMORY);
  EXPECT_THAT(text(refused), HasSubstr("allreduce on rank 0"));
  EXPECT_THAT(text(refused), HasSubstr("job 'raw-client'"));
  EXPECT_THAT(text(refused), HasSubstr("cap of " + std::to_string(2 * kBytes)));
  EXPECT_THAT(text(refused), HasSubstr("[jobs.raw-client] max_inflight_bytes"));
  c.submit(allreduce(1, solo[0], shm::kHostPoolRegion, 0, 4 * kBytes));
  EXPECT_THAT(text(expect_completion(c, 1, PLEXUS_ERR_NO_MEMORY)), HasSubstr("raw-client"));
  // Another job runs beside it, past what the capped job may hold.
  for (uint64_t op = 1; op <= 3; ++op) {
    for (size_t r = 0; r < 2; ++r) {
      clients_[3 + r]->submit(allreduce(op, free_comms[r], shm::kHostPoolRegion, 0, 4 * kBytes));
    }
  }
  for (uint64_t op = 1; op <= 3; ++op) {
    for (size_t r = 0; r < 2; ++r) expect_completion(*clients_[3 + r], op, PLEXUS_SUCCESS);
  }
  // Rank 1 joins rank 0's two waiting ops: let through past the cap, they finish, exact
  // in order (the refused call took no place in the communicator).
  b.submit(op_on(b, pool_b, 1, comms[1]));
  b.submit(op_on(b, pool_b, 2, comms[1]));
  for (uint64_t op : {1u, 2u}) {
    expect_completion(a, op, PLEXUS_SUCCESS);
    expect_completion(b, op, PLEXUS_SUCCESS);
  }
  EXPECT_EQ(pool_a[5 * kCount], 12.0f);
  EXPECT_EQ(pool_b[5 * kCount], 12.0f);
  // All given back: the op refused before fits now.
  c.submit(allreduce(2, solo[0], shm::kHostPoolRegion, 0, 4 * kBytes));
  expect_completion(c, 2, PLEXUS_SUCCESS);
}

// A job's GPU ops' host staging copies, over all its processes, hold at most its
// max_staging_bytes (each process being well within --max-gpu-staging-bytes): an op past it
// is refused with NO_MEMORY naming the job and the key, and the room comes back.
TEST_F(JobCapsTest, AGpuOpPastItsJobsStagingCapIsRefusedNamingTheCap) {
  const std::vector<uint32_t> comms = join(2);
  const std::vector<uint32_t> solo = join(1);
  RawClient& a = *clients_[0];
  RawClient& c = *clients_[2];
  const uint32_t region_a = register_allocation(a, 0);
  const uint32_t region_c = register_allocation(c, 2);
  ASSERT_NE(region_a, 0u);
  ASSERT_NE(region_c, 0u);
  // Out of place on rank 0's GPU: two host copies of kBytes, the job's whole cap; it waits
  // for rank 1. (Its in-flight charge, kBytes, is within that cap.)
  a.submit(allreduce(1, comms[0], region_a, 0, kBytes));
  // Staged once its input copy has started.
  for (int i = 0; i < 5000 && device_->copies_to_host.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GE(device_->copies_to_host.load(), 1);
  // Another process of the job: its in-place op needs kBytes of staging more.
  c.submit(allreduce(1, solo[0], region_c, 0, 0));
  const shm::CompletionEntry refused = expect_completion(c, 1, PLEXUS_ERR_NO_MEMORY);
  EXPECT_THAT(text(refused), HasSubstr("needs " + std::to_string(kBytes) + " bytes"));
  EXPECT_THAT(text(refused),
              HasSubstr("job 'raw-client''s GPU ops in flight hold " + std::to_string(2 * kBytes)));
  EXPECT_THAT(text(refused), HasSubstr("[jobs.raw-client] max_staging_bytes"));
  clients_[1]->submit(allreduce(1, comms[1], shm::kHostPoolRegion, 0, 4 * kBytes));
  expect_completion(a, 1, PLEXUS_SUCCESS);
  expect_completion(*clients_[1], 1, PLEXUS_SUCCESS);
  c.submit(allreduce(2, solo[0], region_c, 0, 0));
  expect_completion(c, 2, PLEXUS_SUCCESS);
}

// A rank joining a GPU collective its other rank already waits in is staged past the job's
// staging cap (refusing it would leave the first waiting on a rank the cap blocks), and
// the op is exact.
TEST_F(JobCapsTest, ARankJoiningAGpuCollectiveIsStagedPastTheJobsStagingCap) {
  const std::vector<uint32_t> comms = join_on_gpus(2);
  fill(2);
  // Each rank's out-of-place op holds two host copies of kBytes: the job's whole cap.
  for (size_t r = 0; r < 2; ++r) {
    clients_[r]->submit(allreduce(1, comms[r], regions_[r], 0, kBytes));
    if (r == 0) {
      for (int i = 0; i < 5000 && device_->copies_to_host.load() == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  }
  for (size_t r = 0; r < 2; ++r) expect_completion(*clients_[r], 1, PLEXUS_SUCCESS);
  for (uint64_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(floats(0)[kCount + i], input(0, i) + input(1, i)) << i;
    ASSERT_EQ(floats(1)[kCount + i], input(0, i) + input(1, i)) << i;
  }
}

// Classes on the engine's own work: "urgent" is a latency-class job, "raw-client" bulk.
class JobClassesTest : public JobCapsTest {
 protected:
  void configure(daemon::Config& config) override {
    config.jobs["urgent"].policy.traffic_class = transports::TrafficClass::kLatency;
    config.local_slice_bytes = 1 << 20;
  }
};

// A latency job's small allreduce called while a bulk job's large one runs within the node
// ends first: the engine takes latency sessions first and takes their ops between slices
// of the bulk op. Both are exact.
TEST_F(JobClassesTest, ALatencyJobsOpGoesBetweenSlicesOfABulkJobsLargeOp) {
  constexpr uint64_t kBig = 16 << 20;  // floats per rank: 64 MiB, 128 MiB of reduce work
  const std::vector<uint32_t> bulk = join(2, "", 2 * kBig * sizeof(float) + (1 << 20));
  const std::vector<uint32_t> urgent = join(2, "urgent");
  std::array<float*, 2> big{};
  for (size_t r = 0; r < 2; ++r) {
    big[r] = static_cast<float*>(clients_[r]->pool().allocate(2 * kBig * sizeof(float)));
    ASSERT_NE(big[r], nullptr);
    for (uint64_t i = 0; i < kBig; ++i) big[r][i] = static_cast<float>(r + 1);
  }
  auto big_op = [&](size_t r) {
    shm::SubmissionEntry e = allreduce(1, bulk[r], shm::kHostPoolRegion, 0, 0);
    e.count = kBig;
    e.send_offset = clients_[r]->pool().offset_of(big[r]);
    e.recv_offset = e.send_offset + kBig * sizeof(float);
    return e;
  };
  std::array<std::chrono::steady_clock::time_point, 4> done{};
  std::vector<std::thread> waiters;
  auto wait_for = [&](size_t client, size_t slot) {
    waiters.emplace_back([&, client, slot] {
      auto c = clients_[client]->next_completion(20000);
      done[slot] = std::chrono::steady_clock::now();
      EXPECT_TRUE(c.has_value()) << "client " << client << " never completed";
      if (c) {
        EXPECT_EQ(c->status, PLEXUS_SUCCESS) << text(*c);
      }
    });
  };
  for (size_t client = 0; client < 4; ++client) wait_for(client, client);
  clients_[2]->submit(allreduce(1, urgent[0], shm::kHostPoolRegion, 0, 4 * kBytes));
  clients_[0]->submit(big_op(0));
  clients_[1]->submit(big_op(1));
  // The bulk op starts (its last rank is in) before the latency op's last rank calls.
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  clients_[3]->submit(allreduce(1, urgent[1], shm::kHostPoolRegion, 0, 4 * kBytes));
  for (auto& t : waiters) t.join();
  EXPECT_LT(done[2], done[0]) << "the latency op waited for the whole bulk op";
  EXPECT_LT(done[3], done[1]);
  for (size_t r = 0; r < 2; ++r) {
    const float* out = big[r] + kBig;
    for (uint64_t i = 0; i < kBig; i += 4099) ASSERT_EQ(out[i], 3.0f) << "rank " << r << " " << i;
    ASSERT_EQ(out[kBig - 1], 3.0f);
  }
}

// A latency job's GPU copies start on its own streams, a bulk job's do not.
TEST_F(JobClassesTest, ALatencyJobsGpuCopiesAreUrgentAndABulkJobsAreNot) {
  const std::vector<uint32_t> bulk = join(2);
  const std::vector<uint32_t> urgent = join(2, "urgent");
  const uint32_t bulk_region = register_allocation(*clients_[0], 0);
  const uint32_t urgent_region = register_allocation(*clients_[2], 1);
  ASSERT_NE(bulk_region, 0u);
  ASSERT_NE(urgent_region, 0u);
  clients_[0]->submit(allreduce(1, bulk[0], bulk_region, 0, kBytes));
  clients_[1]->submit(allreduce(1, bulk[1], shm::kHostPoolRegion, 0, 4 * kBytes));
  expect_completion(*clients_[0], 1, PLEXUS_SUCCESS);
  expect_completion(*clients_[1], 1, PLEXUS_SUCCESS);
  EXPECT_EQ(device_->urgent_copies.load(), 0) << "a bulk job's copies were urgent";
  const int copies = device_->copies_to_host.load() + device_->copies_to_device.load();
  EXPECT_GE(copies, 2);
  clients_[2]->submit(allreduce(1, urgent[0], urgent_region, 0, kBytes));
  clients_[3]->submit(allreduce(1, urgent[1], shm::kHostPoolRegion, 0, 4 * kBytes));
  expect_completion(*clients_[2], 1, PLEXUS_SUCCESS);
  expect_completion(*clients_[3], 1, PLEXUS_SUCCESS);
  EXPECT_EQ(device_->urgent_copies.load(),
            device_->copies_to_host.load() + device_->copies_to_device.load() - copies)
      << "every copy of the latency job's op is urgent";
  EXPECT_GE(device_->urgent_copies.load(), 2);
}

}  // namespace
}  // namespace plexus::test
