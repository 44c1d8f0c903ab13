// The weight store's rules, without a daemon: versions only go forward, the newest K
// complete ones are kept, a version held by a pull keeps its memory until the pull lets go,
// the cap refuses with a sentence that says what to change, shards complete a version only
// together, and a model belongs to the user that first published it.
#include "daemon/weights/weight_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "daemon/weights/weight_copier.h"

namespace plexus::daemon::weights {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kUid = 1000;

class WeightStoreTest : public ::testing::Test {
 protected:
  void make(uint64_t cap, uint32_t kept) {
    store_ = std::make_unique<WeightStore>(WeightStore::Settings{cap, kept});
  }
  // Begins a shard of tensors "a", "b" (bytes each) and fills them with `fill`.
  common::Result<std::shared_ptr<PendingShard>> begin(uint64_t version, uint64_t bytes,
                                                      uint32_t shard = 0, uint32_t shards = 1,
                                                      uint32_t uid = kUid,
                                                      std::vector<std::string> names = {"a", "b"}) {
    std::vector<TensorSpec> specs;
    for (auto& n : names) specs.push_back({n, bytes});
    bool for_memory = false;
    auto pending = store_->publish_begin("m", version, shard, shards, uid, specs, for_memory);
    last_for_memory_ = for_memory;
    if (pending) {
      for (const Shard::Tensor& t : (*pending)->data->tensors) {
        std::memset((*pending)->data->buffer->data() + t.offset, static_cast<int>(version),
                    t.bytes);
      }
    }
    return pending;
  }
  // Publishes a whole version; "" or why not.
  std::string publish(uint64_t version, uint64_t bytes) {
    auto pending = begin(version, bytes);
    if (!pending) return pending.error();
    auto done = store_->publish_done(*pending);
    return done ? "" : done.error();
  }
  std::unique_ptr<WeightStore> store_;
  bool last_for_memory_ = false;
};

TEST_F(WeightStoreTest, AVersionIsSeenWholeOnceCompleteAndVersionsOnlyGoForward) {
  make(1 << 20, 2);
  EXPECT_EQ(store_->latest("m"), 0u);
  auto pending = begin(1, 100);
  ASSERT_TRUE(pending) << pending.error();
  EXPECT_EQ(store_->find("m", 0), nullptr) << "not complete before its bytes are in";
  auto done = store_->publish_done(*pending);
  ASSERT_TRUE(done) << done.error();
  EXPECT_EQ(*done, 1u);
  auto v = store_->find("m", 0);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->number, 1u);
  EXPECT_EQ(v->bytes, 200u);
  ASSERT_EQ(v->index.count("b"), 1u);
  const auto [shard, tensor] = v->index.find("b")->second;
  const Shard::Tensor& t = v->parts[shard]->tensors[tensor];
  EXPECT_EQ(t.offset % 64, 0u);
  EXPECT_EQ(static_cast<int>(v->parts[shard]->buffer->data()[t.offset]), 1);

  EXPECT_THAT(publish(1, 100), HasSubstr("not newer than the model's newest complete version, 1"));
  EXPECT_THAT(publish(0, 100), HasSubstr("versions count from 1"));
  EXPECT_EQ(publish(5, 100), "");
  EXPECT_EQ(store_->latest("m"), 5u);
}

TEST_F(WeightStoreTest, TheNewestKVersionsAreKeptAndAPulledOneKeepsItsMemoryUntilLetGo) {
  make(1 << 20, 2);
  ASSERT_EQ(publish(1, 1000), "");
  std::shared_ptr<const Version> pulling = store_->find("m", 1);  // a pull copying out of it
  ASSERT_EQ(publish(2, 1000), "");
  ASSERT_EQ(publish(3, 1000), "");
  EXPECT_EQ(store_->find("m", 1), nullptr);
  EXPECT_TRUE(store_->dropped("m", 1));
  EXPECT_FALSE(store_->dropped("m", 2));
  EXPECT_EQ(store_->kept("m"), "2, 3");
  EXPECT_EQ(pulling->number, 1u) << "the pull's version is still whole";
  // Two tensors of 1000 bytes, each 64-byte aligned, in one page (counted whole).
  const uint64_t per_version = 4096;
  EXPECT_EQ(store_->held_bytes(), 3 * per_version);
  pulling.reset();
  EXPECT_EQ(store_->held_bytes(), 2 * per_version);
  // Its buffer is kept for the next version of its size, which takes it (no new mapping).
  EXPECT_EQ(store_->spare_bytes(), per_version);
  const std::byte* spare_base = nullptr;
  {
    auto v2 = store_->find("m", 2);
    ASSERT_NE(v2, nullptr);
  }
  auto pending = begin(4, 1000);
  ASSERT_TRUE(pending);
  spare_base = (*pending)->data->buffer->data();
  EXPECT_EQ(store_->spare_bytes(), 0u);
  ASSERT_TRUE(store_->publish_done(*pending));
  EXPECT_EQ(store_->spare_bytes(), per_version) << "version 2 dropped into the spares";
  auto v4 = store_->find("m", 4);
  const auto [shard, tensor] = v4->index.find("a")->second;
  EXPECT_EQ(v4->parts[shard]->buffer->data(), spare_base);
  EXPECT_EQ(static_cast<int>(spare_base[v4->parts[shard]->tensors[tensor].offset]), 4);
}

TEST_F(WeightStoreTest,
       APublishPastTheCapIsRefusedSayingWhatToChangeAndAnOldVersionMakesRoomWhenDue) {
  // Versions of two 1000-byte tensors: a page each.
  make(10000, 2);
  ASSERT_EQ(publish(1, 1000), "");  // 4 KiB
  ASSERT_EQ(publish(2, 1000), "");  // 8 KiB held
  // Two versions are kept, so the third may take the oldest's place as it comes.
  ASSERT_EQ(publish(3, 1000), "");
  EXPECT_EQ(store_->kept("m"), "2, 3");
  // One too large for the cap whatever is dropped.
  auto refused = begin(4, 4000);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(last_for_memory_);
  EXPECT_THAT(refused.error(), HasSubstr("version 4 of model 'm' refused"));
  EXPECT_THAT(refused.error(), HasSubstr("of its cap of"));
  EXPECT_THAT(refused.error(), HasSubstr("--weight-store-bytes"));
  EXPECT_EQ(store_->kept("m"), "2, 3") << "a refused publish drops nothing";
  // While a pull holds the oldest, dropping it frees nothing: refused too.
  make(10000, 2);
  ASSERT_EQ(publish(1, 1000), "");
  ASSERT_EQ(publish(2, 1000), "");
  auto held = store_->find("m", 1);
  auto blocked = begin(3, 1000);
  ASSERT_FALSE(blocked);
  EXPECT_THAT(blocked.error(), HasSubstr("let pulls of old versions finish"));
  EXPECT_EQ(store_->latest("m"), 2u) << "the newest is never dropped for room";
  // Keeping one version, the cap must hold two while the next is copied in: the only one
  // kept is never dropped for room (a pull of the newest would find none), nor may a
  // version go back once it was complete.
  make(10000, 1);
  ASSERT_EQ(publish(5, 3000), "");  // 8 KiB: two tensors of 3000 bytes
  EXPECT_THAT(publish(6, 3000), HasSubstr("of its cap of"));
  EXPECT_EQ(store_->latest("m"), 5u);
  EXPECT_THAT(publish(4, 10), HasSubstr("not newer than the model's newest complete version, 5"));
}

TEST_F(WeightStoreTest, ShardsCompleteAVersionOnlyTogetherAndMustAgree) {
  make(1 << 20, 2);
  auto s0 = begin(1, 64, 0, 2, kUid, {"layer0"});
  ASSERT_TRUE(s0) << s0.error();
  EXPECT_THAT(begin(1, 64, 1, 3, kUid, {"layer1"}).error(), HasSubstr("an earlier shard said 2"));
  EXPECT_THAT(begin(1, 64, 0, 2, kUid, {"other"}).error(), HasSubstr("published already"));
  EXPECT_THAT(begin(1, 64, 1, 2, kUid, {"layer0"}).error(),
              HasSubstr("'layer0' is in another shard of the version already"));
  EXPECT_THAT(begin(1, 64, 2, 2, kUid, {"x"}).error(), HasSubstr("numbered from 0"));
  ASSERT_EQ(*store_->publish_done(*s0), 0u) << "half a version is not complete";
  EXPECT_EQ(store_->latest("m"), 0u);
  auto s1 = begin(1, 64, 1, 2, kUid, {"layer1"});
  ASSERT_TRUE(s1) << s1.error();
  ASSERT_EQ(*store_->publish_done(*s1), 1u);
  auto v = store_->find("m", 1);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->index.size(), 2u);
  EXPECT_EQ(v->bytes, 128u);
  // Versions left half-published hold memory: a model may have only so many at once.
  for (uint64_t version = 2; version < 2 + kMaxBuildingVersions; ++version) {
    ASSERT_TRUE(begin(version, 64, 0, 2, kUid, {"x"}));
  }
  EXPECT_THAT(begin(9, 64, 0, 2, kUid, {"x"}).error(), HasSubstr("being published already"));
}

TEST_F(WeightStoreTest, AModelBelongsToItsFirstPublishersUserAndAFailedCopyIsForgotten) {
  make(1 << 20, 2);
  ASSERT_EQ(publish(1, 10), "");
  EXPECT_THAT(begin(2, 10, 0, 1, 1001).error(), HasSubstr("belongs to uid 1000"));
  EXPECT_THAT(store_->refuse_reader("m", 1001), HasSubstr("belongs to uid 1000"));
  EXPECT_EQ(store_->refuse_reader("m", kUid), "");
  EXPECT_EQ(store_->refuse_reader("m", 0), "") << "root reads any";
  auto pending = begin(2, 10);
  ASSERT_TRUE(pending);
  store_->publish_failed(*pending);
  EXPECT_EQ(store_->latest("m"), 1u);
  EXPECT_EQ(publish(2, 10), "") << "the version can be published again";
}

TEST(WeightCopierTest, EveryJobIsCopiedWholeInOrderAcrossPiecesAndWorkers) {
  WeightCopier copier(2);
  const size_t bytes = (20 << 20) + 12345;  // several pieces and a tail
  std::vector<std::byte> from(bytes), to(bytes);
  for (size_t i = 0; i < bytes; ++i) from[i] = static_cast<std::byte>(i * 7 + 3);
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::pair<int, std::string>> done;
  auto client = std::make_shared<int>(0);
  std::vector<std::byte> untouched(64, std::byte{5});
  std::atomic<int> device_copies{0};
  bool spans_before_device = false;
  for (int j = 0; j < 4; ++j) {
    CopyJob job;
    if (j != 2) {
      job.spans.push_back({to.data(), from.data(), bytes});
      job.client = client;
    } else {  // its client is gone: nothing is copied
      job.spans.push_back({untouched.data(), from.data(), untouched.size()});
      job.client = std::make_shared<int>(1);  // expires at once
    }
    if (j == 1) {  // a GPU tensor's copy, after the host spans
      job.device_copies.push_back([&] {
        spans_before_device = std::memcmp(to.data(), from.data(), bytes) == 0;
        ++device_copies;
        return std::string();
      });
    }
    if (j == 3) {  // a device copy that fails: the job says why, and the next is not run
      job.device_copies.push_back([&] {
        ++device_copies;
        return std::string("cuMemcpyDtoHAsync: an illegal address (test)");
      });
      job.device_copies.push_back([&] {
        ++device_copies;
        return std::string();
      });
    }
    job.done = [&, j](const std::string& failure) {
      std::lock_guard lock(mutex);
      done.emplace_back(j, failure);
      cv.notify_one();
    };
    copier.copy(std::move(job));
  }
  std::unique_lock lock(mutex);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return done.size() == 4; }));
  EXPECT_EQ(done, (std::vector<std::pair<int, std::string>>{
                      {0, ""},
                      {1, ""},
                      {2, kClientGone},
                      {3, "cuMemcpyDtoHAsync: an illegal address (test)"}}));
  EXPECT_EQ(std::memcmp(to.data(), from.data(), bytes), 0);
  EXPECT_EQ(untouched[0], std::byte{5});
  EXPECT_TRUE(spans_before_device);
  EXPECT_EQ(device_copies.load(), 2);
}

}  // namespace
}  // namespace plexus::daemon::weights
