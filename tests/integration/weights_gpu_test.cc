// The weight store's GPU path without a GPU: plexusd in this process over a DeviceMemory of
// host memory (tests/unit/host_device_memory.h), raw clients naming registered "allocations"
// in their publish and pull requests as libplexus does for device pointers. Shows that a
// version published from GPU memory (beside a pool tensor) is pulled exact into another
// process's GPU memory and its pool, by the device's copies; that a tensor outside its
// allocation or in a region never registered is refused naming it; and that a failed device
// copy fails the publish (nothing kept) or the pull with a sentence, the daemon serving the
// next request as before.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "daemon/daemon.h"
#include "plexus/plexus.h"
#include "shm/control.capnp.h"
#include "tests/integration/host_gpu_daemon.h"
#include "tests/integration/raw_client.h"
#include "tests/unit/host_device_memory.h"

namespace plexus::test {
namespace {

using ::testing::HasSubstr;
namespace control = shm::control;

constexpr uint64_t kGpuBytes = 3 * 4096 + 17;  // a tensor at a GPU region's offset 64
constexpr uint64_t kPoolBytes = 1000;          // a tensor in the pool
constexpr uint64_t kGpuOffset = 64;

struct Tensor {
  std::string name;
  uint32_t region = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

// The daemon's answer to a weights request: "version N" or its error "code: message".
std::string answer(client::Reply reply) {
  capnp::FlatArrayMessageReader reader(reply.words);
  auto root = reader.getRoot<control::DaemonMessage>();
  if (root.isWeightsPublishReply())
    return "version " + std::to_string(root.getWeightsPublishReply());
  if (root.isWeightsPullReply()) return "version " + std::to_string(root.getWeightsPullReply());
  if (root.isError()) {
    return std::to_string(static_cast<int>(root.getError().getCode())) + ": " +
           std::string(root.getError().getMessage());
  }
  return "an unexpected reply";
}

template <typename Request>
void set_tensors(Request request, const std::vector<Tensor>& tensors) {
  auto list = request.initTensors(static_cast<unsigned>(tensors.size()));
  for (unsigned i = 0; i < tensors.size(); ++i) {
    list[i].setName(tensors[i].name);
    list[i].setRegion(tensors[i].region);
    list[i].setOffset(tensors[i].offset);
    list[i].setBytes(tensors[i].bytes);
  }
}

// A weightsPublish (one shard) or a weightsPull (no wait) of model "policy": the answer.
std::string request(RawClient& client, bool publish, uint64_t version,
                    const std::vector<Tensor>& tensors) {
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<control::ClientMessage>();
  if (publish) {
    auto request = root.initWeightsPublish();
    request.setModel("policy");
    request.setVersion(version);
    request.setShards(1);
    set_tensors(request, tensors);
  } else {
    auto request = root.initWeightsPull();
    request.setModel("policy");
    request.setVersion(version);
    set_tensors(request, tensors);
  }
  return answer(client.channel().call(message));
}
std::string publish(RawClient& client, uint64_t version, const std::vector<Tensor>& tensors) {
  return request(client, true, version, tensors);
}
std::string pull(RawClient& client, uint64_t version, const std::vector<Tensor>& tensors) {
  return request(client, false, version, tensors);
}

std::string error_code(plexus_result_t code) { return std::to_string(static_cast<int>(code)); }

class WeightsGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_ = std::make_unique<HostGpuDaemon>([](daemon::Config&) {},
                                            [this](HostDeviceMemory& device) {
                                              for (auto& e : exports_) {
                                                e = device.allocate(kGpuOffset + kGpuBytes);
                                              }
                                            });
    device_ = host_->device();
    daemon_ = host_->daemon();
    for (size_t i = 0; i < clients_.size(); ++i) {
      clients_[i] = std::make_unique<RawClient>(daemon_->socket_path());
      clients_[i]->hello_with_pool(1 << 20);
      pool_tensors_[i] = static_cast<std::byte*>(clients_[i]->pool().allocate(kPoolBytes));
      ASSERT_NE(pool_tensors_[i], nullptr);
      regions_[i] = clients_[i]->register_export(exports_[i]);
    }
  }
  void TearDown() override {
    for (auto& c : clients_) c.reset();
    host_.reset();
  }

  std::byte* gpu(size_t which) { return device_->block(exports_[which]).data() + kGpuOffset; }
  std::byte* pool(size_t which) { return pool_tensors_[which]; }
  // Client `which`'s two tensors: "w" in its GPU allocation, "b" in its pool.
  std::vector<Tensor> tensors(size_t which) const {
    return {{"w", regions_[which], kGpuOffset, kGpuBytes},
            {"b", 0, clients_[which]->pool().offset_of(pool_tensors_[which]), kPoolBytes}};
  }
  // Fills client `which`'s tensors with bytes of `version`.
  void fill(size_t which, uint64_t version) {
    for (uint64_t i = 0; i < kGpuBytes; ++i) gpu(which)[i] = std::byte(version * 31 + i);
    for (uint64_t i = 0; i < kPoolBytes; ++i) pool(which)[i] = std::byte(version * 17 + i);
  }
  // "" when client `which` holds version `version`'s bytes, else the first wrong one.
  std::string holds(size_t which, uint64_t version) {
    for (uint64_t i = 0; i < kGpuBytes; ++i) {
      if (gpu(which)[i] != std::byte(version * 31 + i)) return "GPU byte " + std::to_string(i);
    }
    for (uint64_t i = 0; i < kPoolBytes; ++i) {
      if (pool(which)[i] != std::byte(version * 17 + i)) return "pool byte " + std::to_string(i);
    }
    return "";
  }

  std::unique_ptr<HostGpuDaemon> host_;
  HostDeviceMemory* device_ = nullptr;
  std::array<shm::GpuExport, 2> exports_;
  daemon::Daemon* daemon_ = nullptr;
  std::array<std::unique_ptr<RawClient>, 2> clients_;  // 0 publishes, 1 pulls
  std::array<uint32_t, 2> regions_{};
  std::array<std::byte*, 2> pool_tensors_{};
};

TEST_F(WeightsGpuTest, AVersionFromGpuMemoryIsPulledExactIntoAnotherProcesssGpuMemory) {
  for (uint64_t v = 1; v <= 3; ++v) {
    fill(0, v);
    ASSERT_EQ(publish(*clients_[0], v, tensors(0)), "version " + std::to_string(v));
    fill(0, 99);  // the store holds its own copy
    ASSERT_EQ(pull(*clients_[1], 0, tensors(1)), "version " + std::to_string(v));
    EXPECT_EQ(holds(1, v), "") << "version " << v;
  }
  // Each tensor by the device's copies: one from, one into a GPU allocation per version.
  EXPECT_EQ(device_->copies_aside.load(), 6);
}

TEST_F(WeightsGpuTest, ATensorOutsideItsAllocationOrInARegionNotRegisteredIsRefusedNamingIt) {
  std::vector<Tensor> past = tensors(0);
  past[0].offset = kGpuOffset + 1;  // runs one byte past the allocation
  EXPECT_THAT(publish(*clients_[0], 1, past),
              HasSubstr("tensor 'w' (" + std::to_string(kGpuBytes) + " bytes at offset " +
                        std::to_string(kGpuOffset + 1) + ") is not inside its GPU allocation"));
  std::vector<Tensor> other = tensors(0);
  other[0].region = regions_[0] + 7;
  EXPECT_THAT(publish(*clients_[0], 1, other),
              HasSubstr("tensor 'w' names GPU region " + std::to_string(regions_[0] + 7) +
                        ", which this process has not registered"));
  // A region the process released is refused too.
  fill(0, 1);
  ASSERT_EQ(publish(*clients_[0], 1, tensors(0)), "version 1");
  std::vector<Tensor> released = tensors(1);
  ASSERT_EQ(clients_[1]->release_gpu_memory(regions_[1]), "released");
  EXPECT_THAT(pull(*clients_[1], 1, released),
              HasSubstr("names GPU region " + std::to_string(regions_[1])));
  EXPECT_EQ(device_->copies_aside.load(), 1);  // only version 1's publish
}

TEST_F(WeightsGpuTest, AFailedDeviceCopyFailsThePublishOrThePullWithASentenceAndKeepsNothing) {
  fill(0, 1);
  device_->fail_copies = true;
  const std::string refused = publish(*clients_[0], 1, tensors(0));
  EXPECT_THAT(refused, HasSubstr(error_code(PLEXUS_ERR_SYSTEM) +
                                 ": model 'policy' version 1: "
                                 "copying a GPU tensor into the store: copy failed (test)"));
  device_->fail_copies = false;
  EXPECT_THAT(pull(*clients_[1], 0, tensors(1)), HasSubstr(error_code(PLEXUS_ERR_TIMEOUT)))
      << "the failed version was kept";
  // The same version again, then a pull whose copy fails, then one that works.
  ASSERT_EQ(publish(*clients_[0], 1, tensors(0)), "version 1");
  device_->fail_copies = true;
  EXPECT_THAT(
      pull(*clients_[1], 1, tensors(1)),
      HasSubstr(error_code(PLEXUS_ERR_SYSTEM) + ": version 1 of model 'policy': copying "
                                                "it into a GPU tensor: copy failed (test)"));
  device_->fail_copies = false;
  ASSERT_EQ(pull(*clients_[1], 1, tensors(1)), "version 1");
  EXPECT_EQ(holds(1, 1), "");
}

}  // namespace
}  // namespace plexus::test
