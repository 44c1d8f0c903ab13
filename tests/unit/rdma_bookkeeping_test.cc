// The RDMA path's bookkeeping, without a verbs device: the receive ring's placement rule as
// the sender applies it and the receiver checks it (wrap-around, credits, hostile offsets),
// the send window (in-order completions, the peer's receive budget), and the registration
// cache (reuse, owners going, deregistration only once unpinned, its bound).
#include <gtest/gtest.h>

#include <cstddef>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "transports/rdma/local_ring.h"
#include "transports/rdma/mr_cache.h"
#include "transports/rdma/remote_ring.h"
#include "transports/rdma/send_window.h"

namespace plexus::transports::rdma {
namespace {

TEST(RdmaRingTest, FramesGoOneAfterAnotherAlignedAndWaitForCredit) {
  RemoteRing remote(1024);
  LocalRing local(1024);
  auto a = remote.place(100);  // 128 bytes
  ASSERT_TRUE(a);
  EXPECT_EQ(a->offset, 0u);
  EXPECT_EQ(a->skipped, 0u);
  remote.commit(*a, 100);
  auto b = remote.place(48);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->offset, 128u);
  remote.commit(*b, 48);
  EXPECT_EQ(remote.in_flight(), 192u);
  // 832 bytes left: a frame of 900 waits for credit.
  EXPECT_FALSE(remote.place(900));
  EXPECT_EQ(local.consume(0, 100), "");
  EXPECT_EQ(local.consume(128, 48), "");
  EXPECT_EQ(local.consumed(), 192u);
  EXPECT_EQ(remote.on_credit(local.consumed()), "");
  EXPECT_EQ(remote.in_flight(), 0u);
  // Now 900 does not fit before the end (at 192): it skips to 0.
  auto c = remote.place(900);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->offset, 0u);
  EXPECT_EQ(c->skipped, 1024u - 192u);
  remote.commit(*c, 900);
  EXPECT_EQ(local.consume(0, 900), "");
  EXPECT_EQ(local.consumed(), remote.written());
  // Larger than the ring: never.
  EXPECT_FALSE(RemoteRing(1024).place(1025));
}

TEST(RdmaRingTest, SenderAndReceiverAgreeOverManyRandomFrames) {
  std::mt19937 rng(7);
  for (uint64_t size : {1024u, 4096u, 65536u}) {
    RemoteRing remote(size);
    LocalRing local(size);
    std::vector<std::pair<uint64_t, uint64_t>> in_flight;  // offset, bytes
    uint64_t reported = 0;
    for (int i = 0; i < 20000; ++i) {
      const uint64_t bytes = 48 + rng() % (size - 48 + 1);
      auto slot = remote.place(bytes);
      if (!slot) {
        // Deliver what is in flight, then credit: the frame must fit then.
        for (auto [offset, n] : in_flight) ASSERT_EQ(local.consume(offset, n), "") << i;
        in_flight.clear();
        ASSERT_EQ(remote.on_credit(local.consumed()), "");
        reported = local.consumed();
        slot = remote.place(bytes);
        ASSERT_TRUE(slot) << "a frame of " << bytes << " does not fit an empty ring of " << size;
      }
      ASSERT_EQ(slot->offset % kRingAlign, 0u);
      const uint64_t end = slot->offset + ring_align_up(bytes);
      ASSERT_LE(end, size);
      // The safety that matters: never over a frame the receiver has not read.
      for (auto [offset, n] : in_flight) {
        ASSERT_TRUE(end <= offset || slot->offset >= offset + ring_align_up(n))
            << "frame " << i << " at " << slot->offset << " overlaps an unread one at " << offset;
      }
      remote.commit(*slot, bytes);
      in_flight.emplace_back(slot->offset, bytes);
      if (rng() % 3 == 0) {  // the receiver catches up now and then
        for (auto [offset, n] : in_flight) ASSERT_EQ(local.consume(offset, n), "") << i;
        in_flight.clear();
        if (local.credit_due(reported) || rng() % 2 == 0) {
          ASSERT_EQ(remote.on_credit(local.consumed()), "");
          reported = local.consumed();
        }
      }
    }
  }
}

TEST(RdmaRingTest, FramesOutOfPlaceAndImpossibleCreditsAreRefusedNamingWhy) {
  LocalRing local(1024);
  EXPECT_NE(local.check_start(32), "");    // not aligned
  EXPECT_NE(local.check_start(1024), "");  // past the end
  EXPECT_NE(local.check_start(128), "");   // not where the next is due (0)
  ASSERT_EQ(local.consume(0, 500), "");    // next due at 512
  EXPECT_NE(local.consume(0, 100), "") << "a frame that fitted at 512 may not skip to 0";
  EXPECT_NE(local.consume(512, 600), "") << "a frame running past the end";
  EXPECT_EQ(local.consume(0, 600), "") << "one that does not fit at 512 skips to 0";
  EXPECT_EQ(local.consumed(), 1024u + 640u);

  RemoteRing remote(1024);
  auto slot = remote.place(100);
  remote.commit(*slot, 100);
  EXPECT_NE(remote.on_credit(129), "") << "more consumed than written";
  EXPECT_EQ(remote.on_credit(128), "");
  EXPECT_NE(remote.on_credit(64), "") << "credit going back";
}

TEST(RdmaSendWindowTest, CompletionsInOrderAndThePeersReceiveBudget) {
  SendWindow window(/*peer_receives=*/2, /*send_depth=*/3);
  EXPECT_TRUE(window.can_post());
  window.posted(11, 100, 128);
  window.posted(12, 200, 384);
  EXPECT_FALSE(window.can_post()) << "the peer has only 2 receives posted";
  EXPECT_EQ(window.peer_consumed(1), "");
  EXPECT_TRUE(window.can_post());
  window.posted(13, 0, 448);
  EXPECT_FALSE(window.can_post()) << "the send queue holds 3";
  auto done = window.completed();
  ASSERT_TRUE(done);
  EXPECT_EQ(done->token, 11u);
  EXPECT_EQ(done->bounce_end, 128u);
  done = window.completed();
  ASSERT_TRUE(done);
  EXPECT_EQ(done->token, 12u);
  EXPECT_EQ(done->payload_bytes, 200u);
  done = window.completed();
  ASSERT_TRUE(done);
  EXPECT_EQ(done->token, 13u);
  done = window.completed();
  EXPECT_FALSE(done);
  EXPECT_NE(done.error().find("no frame outstanding"), std::string::npos);
  EXPECT_NE(window.peer_consumed(4), "") << "more consumed than sent";
  EXPECT_NE(window.peer_consumed(0), "") << "credit going back";
  EXPECT_EQ(window.peer_consumed(3), "");
  EXPECT_EQ(window.frames_unconsumed(), 0u);
}

struct FakeRegistrar {
  std::set<void*> live;
  int next = 1;
  bool fail = false;
  MrCache::Calls calls() {
    return {
        [this](std::byte* base, size_t) -> common::Result<MrCache::Registration> {
          if (fail) return common::fail("ibv_reg_mr: Cannot allocate memory");
          const MemoryKeys keys{static_cast<uint32_t>(next), static_cast<uint32_t>(next + 1000)};
          ++next;
          live.insert(base);
          return MrCache::Registration{base, keys};
        },
        [this](void* handle) { live.erase(handle); }};
  }
};

TEST(RdmaMrCacheTest, RegionsAreRegisteredOnceAndDeregisteredOnlyWhenUnpinned) {
  FakeRegistrar fake;
  std::vector<std::byte> a(4096), b(4096);
  {
    MrCache cache(fake.calls(), 8);
    auto looked = cache.lookup(1, a.data(), a.size());
    ASSERT_TRUE(looked.ok()) << looked.error();
    MrCache::Pin first = looked.take();
    ASSERT_TRUE(first);
    MrCache::Pin again = cache.lookup(1, a.data(), a.size()).take();
    EXPECT_EQ(again.keys().lkey, first.keys().lkey);
    EXPECT_EQ(cache.registrations(), 1u);
    MrCache::Pin other = cache.lookup(2, b.data(), b.size()).take();
    EXPECT_NE(other.keys().lkey, first.keys().lkey);
    // Owner 1 goes while its region is pinned by a posted work request: still registered.
    cache.invalidate(1);
    EXPECT_EQ(cache.entries(), 1u);
    EXPECT_EQ(fake.live.count(a.data()), 1u);
    first = {};
    EXPECT_EQ(fake.live.count(a.data()), 1u);
    again = {};
    EXPECT_EQ(fake.live.count(a.data()), 0u) << "deregistered with its last pin";
    EXPECT_EQ(cache.deregistrations(), 1u);
    // A region of owner 2 resized in place: registered anew, the old one dropped.
    other = {};
    auto resized = cache.lookup(2, b.data(), 2048);
    ASSERT_TRUE(resized.ok() && *resized);
    EXPECT_EQ(cache.registrations(), 3u);
    EXPECT_EQ(cache.deregistrations(), 2u);
  }
  EXPECT_TRUE(fake.live.empty()) << "the cache deregisters everything when it goes";
}

TEST(RdmaMrCacheTest, AFullCacheOrAFailedRegistrationSaysWhy) {
  FakeRegistrar fake;
  std::vector<std::byte> a(64), b(64), c(64);
  MrCache cache(fake.calls(), 2);
  auto pa = cache.lookup(1, a.data(), a.size());
  auto pb = cache.lookup(1, b.data(), b.size());
  ASSERT_TRUE(pa && pb);
  auto full = cache.lookup(1, c.data(), c.size());
  EXPECT_FALSE(full);
  EXPECT_NE(full.error().find("full (2 regions, every one in use)"), std::string::npos)
      << full.error();
  cache.invalidate(1);
  fake.fail = true;
  auto refused = cache.lookup(1, c.data(), c.size());
  EXPECT_FALSE(refused);
  EXPECT_NE(refused.error().find("Cannot allocate memory"), std::string::npos) << refused.error();
  EXPECT_EQ(cache.entries(), 0u);
}

TEST(RdmaMrCacheTest, AFullCacheEvictsTheLeastRecentlyUsedRegionNoWorkRequestHolds) {
  FakeRegistrar fake;
  std::vector<std::byte> a(64), b(64), c(64), d(64);
  MrCache cache(fake.calls(), 2);
  ASSERT_TRUE(cache.lookup(1, a.data(), a.size()));  // a: unpinned at once
  ASSERT_TRUE(cache.lookup(2, b.data(), b.size()));  // b: used after a
  ASSERT_TRUE(cache.lookup(1, a.data(), a.size()));  // a: used again, b is older now
  auto pc = cache.lookup(3, c.data(), c.size());
  ASSERT_TRUE(pc) << pc.error();
  EXPECT_EQ(fake.live.count(b.data()), 0u) << "the least recently used region went";
  EXPECT_EQ(fake.live.count(a.data()), 1u);
  EXPECT_EQ(cache.owners(), (std::vector<uint64_t>{1, 3}));
  // a and c both pinned now: nothing may go, the lookup fails and registers nothing.
  auto pa = cache.lookup(1, a.data(), a.size());
  EXPECT_FALSE(cache.lookup(4, d.data(), d.size()));
  EXPECT_EQ(fake.live.size(), 2u);
  EXPECT_EQ(cache.registrations(), 3u);
  // A registration that fails evicts nothing: the window it would have replaced stays.
  pa = MrCache::Pin{};
  fake.fail = true;
  EXPECT_FALSE(cache.lookup(4, d.data(), d.size()));
  EXPECT_EQ(fake.live.count(a.data()), 1u);
  EXPECT_EQ(cache.entries(), 2u);
}

}  // namespace
}  // namespace plexus::transports::rdma
