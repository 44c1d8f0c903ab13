// Tests for shm/ring: the SQ/CQ ring pair shared by a client and plexusd. The daemon
// side creates the ring; the client side attaches a second mapping of a dup of the
// memfd, exactly as a client does with the fd it receives over the control socket.
#include "shm/ring.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "shm/memfd.h"
#include "shm/ring_layout.h"

namespace plexus::shm {
namespace {

using common::UniqueFd;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// A daemon-side ring and a client-side attachment of the same memfd.
struct RingPair {
  RingMemory daemon;
  RingMemory client;
};

RingPair make_pair(uint32_t sq_entries, uint32_t cq_entries) {
  RingMemory daemon = RingMemory::create(sq_entries, cq_entries);
  int fd = ::dup(daemon.fd());
  if (fd < 0) throw std::runtime_error("dup failed");
  RingMemory client = RingMemory::attach(UniqueFd(fd));
  return RingPair{std::move(daemon), std::move(client)};
}

UniqueFd make_eventfd() {
  UniqueFd fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!fd) throw std::runtime_error("eventfd failed");
  return fd;
}

// poll() for readability: 1 when readable, 0 on timeout, -1 on error.
int wait_readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  int r;
  do {
    r = ::poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  return r;
}

SubmissionEntry make_submission(uint64_t seq) {
  SubmissionEntry e{};
  e.user_data = seq;
  e.opcode = static_cast<uint8_t>(1 + seq % kMaxOpcode);
  e.dtype = static_cast<uint8_t>(seq % 10);
  e.redop = static_cast<uint8_t>(seq % 5);
  e.flags = 0;
  e.comm = static_cast<uint32_t>(seq * 7);
  e.count = seq * 3 + 1;
  e.send_offset = ~seq;
  e.recv_offset = seq << 5;
  e.send_region = static_cast<uint32_t>(seq >> 3);
  e.recv_region = static_cast<uint32_t>(seq >> 4);
  e.peer = static_cast<int32_t>(seq % 17) - 8;
  e.stream_ticket = static_cast<uint32_t>(seq ^ 0x5a5a5a5a);
  e.stream_flags = seq * 0x9e3779b97f4a7c15ull;
  return e;
}

bool same_submission(const SubmissionEntry& a, const SubmissionEntry& b) {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}

char message_byte(uint64_t seq, size_t i) { return static_cast<char>('a' + (seq + i) % 26); }

CompletionEntry make_completion(uint64_t seq, uint32_t message_len) {
  CompletionEntry e{};
  e.user_data = seq;
  e.status = static_cast<int32_t>(seq % 13);
  e.message_len = message_len;
  e.source = static_cast<int32_t>(seq % 7) - 1;
  for (size_t i = 0; i < message_len && i < kCompletionMessageBytes; ++i) {
    e.message[i] = message_byte(seq, i);
  }
  return e;
}

// Returns "" when `got` is the completion make_completion(seq, len) describes.
std::string check_completion(const CompletionEntry& got, uint64_t seq, uint32_t len) {
  if (got.user_data != seq) {
    return "user_data " + std::to_string(got.user_data) + " where " + std::to_string(seq) +
           " was expected";
  }
  if (got.status != static_cast<int32_t>(seq % 13)) {
    return "status " + std::to_string(got.status) + " for seq " + std::to_string(seq);
  }
  if (got.source != static_cast<int32_t>(seq % 7) - 1) {
    return "source " + std::to_string(got.source) + " for seq " + std::to_string(seq);
  }
  if (got.message_len != len) {
    return "message_len " + std::to_string(got.message_len) + " for seq " + std::to_string(seq) +
           ", expected " + std::to_string(len);
  }
  for (size_t i = 0; i < len; ++i) {
    if (got.message[i] != message_byte(seq, i)) {
      return "message byte " + std::to_string(i) + " wrong for seq " + std::to_string(seq);
    }
  }
  return {};
}

// First error reported by any thread of a concurrent test; stops the others.
class FirstError {
 public:
  void set(std::string message) {
    std::lock_guard lock(mutex_);
    if (message_.empty()) message_ = std::move(message);
    stop_.store(true, std::memory_order_relaxed);
  }
  bool stopped() const { return stop_.load(std::memory_order_relaxed); }
  std::string get() {
    std::lock_guard lock(mutex_);
    return message_;
  }

 private:
  std::mutex mutex_;
  std::string message_;
  std::atomic<bool> stop_{false};
};

// ---------------------------------------------------------------------------------------
// Creation and attachment.

TEST(RingMemoryTest, CreateLaysOutHeaderAndAttachSeesTheSameMemory) {
  RingPair rings = make_pair(16, 32);
  const RingHeader* h = rings.daemon.header();
  EXPECT_EQ(h->magic, kRingMagic);
  EXPECT_EQ(h->version, kRingLayoutVersion);
  EXPECT_EQ(h->sq_entries, 16u);
  EXPECT_EQ(h->cq_entries, 32u);
  EXPECT_EQ(h->total_bytes, ring_bytes(16, 32));
  EXPECT_EQ(h->total_bytes % 4096, 0u);
  EXPECT_EQ(h->sq_offset % kCacheLine, 0u);
  EXPECT_EQ(h->cq_offset % kCacheLine, 0u);
  EXPECT_GE(h->cq_offset, h->sq_offset + 16 * sizeof(SubmissionEntry));
  EXPECT_GE(h->total_bytes, h->cq_offset + 32 * sizeof(CompletionEntry));

  EXPECT_EQ(rings.client.sq_entries(), 16u);
  EXPECT_EQ(rings.client.cq_entries(), 32u);
  EXPECT_NE(rings.client.fd(), rings.daemon.fd());
  // Two distinct mappings of one memfd.
  EXPECT_NE(static_cast<void*>(rings.client.header()), static_cast<void*>(rings.daemon.header()));
  rings.daemon.sq()[15].user_data = 0x1122334455667788ull;
  EXPECT_EQ(rings.client.sq()[15].user_data, 0x1122334455667788ull);
  rings.client.cq()[31].user_data = 42;
  EXPECT_EQ(rings.daemon.cq()[31].user_data, 42u);

  // The daemon's memfd is sealed: a client cannot shrink it under the daemon.
  auto size = check_sealed_memfd(rings.daemon.fd(), 1, UINT64_MAX);
  ASSERT_EQ(size.error(), "");
  EXPECT_EQ(*size, h->total_bytes);
}

TEST(RingMemoryTest, CreateRejectsNonPowerOfTwoAndOversizedCounts) {
  for (uint32_t bad : {0u, 3u, 6u, 100u, 65535u, 1u << 17, 0x80000000u, 0xffffffffu}) {
    EXPECT_THROW(RingMemory::create(bad, 8), std::invalid_argument) << "sq_entries " << bad;
    EXPECT_THROW(RingMemory::create(8, bad), std::invalid_argument) << "cq_entries " << bad;
  }
  EXPECT_NO_THROW(RingMemory::create(1, 1));
  EXPECT_NO_THROW(RingMemory::create(65536, 2));
}

// The header fields a client checks, in RingHeader's order (its first 40 bytes).
struct HeaderFields {
  uint32_t magic;
  uint32_t version;
  uint32_t sq_entries;
  uint32_t cq_entries;
  uint64_t sq_offset;
  uint64_t cq_offset;
  uint64_t total_bytes;
};

HeaderFields valid_header_fields(uint32_t sq, uint32_t cq) {
  RingMemory real = RingMemory::create(sq, cq);
  const RingHeader* h = real.header();
  return HeaderFields{h->magic,     h->version,   h->sq_entries, h->cq_entries,
                      h->sq_offset, h->cq_offset, h->total_bytes};
}

// A fresh sealed memfd of `bytes` with `f` written where a ring header goes.
UniqueFd memfd_with_header(size_t bytes, const HeaderFields& f) {
  UniqueFd fd = create_sealed_memfd("fake-ring", bytes);
  Mapping m = map_shared(fd.get(), bytes);
  if (bytes >= sizeof(RingHeader)) {
    auto* h = new (m.data()) RingHeader{};
    h->magic = f.magic;
    h->version = f.version;
    h->sq_entries = f.sq_entries;
    h->cq_entries = f.cq_entries;
    h->sq_offset = f.sq_offset;
    h->cq_offset = f.cq_offset;
    h->total_bytes = f.total_bytes;
  } else {
    std::memcpy(m.data(), &f, std::min(bytes, sizeof(f)));
  }
  return fd;
}

void expect_attach_fails(UniqueFd fd, const std::string& substring) {
  try {
    RingMemory::attach(std::move(fd));
    ADD_FAILURE() << "attach accepted a bad memfd (expected an error containing \"" << substring
                  << "\")";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr(substring));
  }
}

TEST(RingMemoryTest, AttachAcceptsAHandWrittenValidHeader) {
  HeaderFields h = valid_header_fields(8, 8);
  RingMemory ring = RingMemory::attach(memfd_with_header(ring_bytes(8, 8), h));
  EXPECT_EQ(ring.sq_entries(), 8u);
  EXPECT_EQ(ring.cq_entries(), 8u);
}

TEST(RingMemoryTest, AttachRejectsWrongMagic) {
  HeaderFields h = valid_header_fields(8, 8);
  h.magic = 0xdeadbeef;
  expect_attach_fails(memfd_with_header(ring_bytes(8, 8), h),
                      "magic/version 3735928559/" + std::to_string(kRingLayoutVersion));
}

TEST(RingMemoryTest, AttachRejectsWrongVersion) {
  HeaderFields h = valid_header_fields(8, 8);
  h.version = kRingLayoutVersion + 1;
  expect_attach_fails(memfd_with_header(ring_bytes(8, 8), h), "expected layout version");
}

TEST(RingMemoryTest, AttachRejectsTooSmallMemfd) {
  HeaderFields h = valid_header_fields(8, 8);
  expect_attach_fails(memfd_with_header(16, h), "too small");
  expect_attach_fails(memfd_with_header(sizeof(RingHeader) - 1, h), "too small");
  // An empty memfd.
  UniqueFd empty(::memfd_create("empty-ring", MFD_CLOEXEC));
  ASSERT_TRUE(empty);
  expect_attach_fails(std::move(empty), "too small");
}

TEST(RingMemoryTest, AttachRejectsHeaderInconsistentWithSize) {
  // Claims 1024 SQ entries in a memfd sized for 8.
  HeaderFields big = valid_header_fields(1024, 8);
  expect_attach_fails(memfd_with_header(ring_bytes(8, 8), big), "inconsistent");

  // Absurd entry counts must not overflow the size computation into acceptance.
  HeaderFields huge = valid_header_fields(8, 8);
  huge.sq_entries = 0x80000000u;
  huge.cq_entries = 0x80000000u;
  expect_attach_fails(memfd_with_header(ring_bytes(8, 8), huge), "inconsistent");

  HeaderFields npot = valid_header_fields(8, 8);
  npot.sq_entries = 6;
  expect_attach_fails(memfd_with_header(ring_bytes(8, 8), npot), "inconsistent");

  HeaderFields zero = valid_header_fields(8, 8);
  zero.cq_entries = 0;
  expect_attach_fails(memfd_with_header(ring_bytes(8, 8), zero), "inconsistent");

  HeaderFields moved = valid_header_fields(8, 8);
  moved.cq_offset += kCacheLine;
  expect_attach_fails(memfd_with_header(ring_bytes(8, 8), moved), "inconsistent");
}

TEST(RingMemoryTest, DaemonKeepsItsOwnSizesWhenTheClientScribblesOnTheHeader) {
  RingPair rings = make_pair(8, 8);
  SubmissionEntry* sq_before = rings.daemon.sq();
  CompletionEntry* cq_before = rings.daemon.cq();
  RingHeader* h = rings.client.header();
  h->sq_entries = 1u << 30;
  h->cq_entries = 1u << 30;
  h->sq_offset = 1ull << 40;
  h->cq_offset = 1ull << 41;
  EXPECT_EQ(rings.daemon.sq_entries(), 8u);
  EXPECT_EQ(rings.daemon.cq_entries(), 8u);
  EXPECT_EQ(rings.daemon.sq(), sq_before);
  EXPECT_EQ(rings.daemon.cq(), cq_before);

  // A daemon end made now still bounds a hostile tail by the real size.
  DaemonRingEnd daemon(rings.daemon);
  h->sq_tail.value.store(9, std::memory_order_release);
  SubmissionEntry out[16];
  EXPECT_EQ(daemon.consume(out, 16), 0u);
  EXPECT_TRUE(daemon.corrupt());
  EXPECT_THAT(daemon.corruption(), HasSubstr("in a ring of 8"));
}

// ---------------------------------------------------------------------------------------
// Single entries.

TEST(RingTest, SingleSubmissionRoundTrip) {
  RingPair rings = make_pair(8, 8);
  ClientRingEnd client(rings.client);
  DaemonRingEnd daemon(rings.daemon);
  SubmissionEntry out[8];

  EXPECT_EQ(client.submission_space(), 8u);
  EXPECT_EQ(daemon.consume(out, 8), 0u);
  EXPECT_FALSE(client.publish()) << "publishing nothing must not ask for a wakeup";

  const SubmissionEntry in = make_submission(12345);
  client.stage(in);
  EXPECT_EQ(client.submission_space(), 7u);
  EXPECT_EQ(daemon.consume(out, 8), 0u) << "a staged but unpublished entry was visible";
  EXPECT_FALSE(client.publish()) << "nobody asked for a wakeup";
  EXPECT_EQ(rings.client.header()->sq_tail.value.load(), 1u);

  ASSERT_EQ(daemon.consume(out, 8), 1u);
  EXPECT_TRUE(same_submission(out[0], in));
  EXPECT_EQ(rings.daemon.header()->sq_head.value.load(), 1u);
  EXPECT_EQ(client.submission_space(), 8u);
  EXPECT_EQ(daemon.consume(out, 8), 0u);
  EXPECT_FALSE(daemon.corrupt());
}

TEST(RingTest, ConsumeHonoursMax) {
  RingPair rings = make_pair(8, 8);
  ClientRingEnd client(rings.client);
  DaemonRingEnd daemon(rings.daemon);
  for (uint64_t i = 0; i < 5; ++i) client.stage(make_submission(i));
  client.publish();
  SubmissionEntry out[8];
  EXPECT_EQ(daemon.consume(out, 0), 0u);
  ASSERT_EQ(daemon.consume(out, 2), 2u);
  EXPECT_EQ(out[0].user_data, 0u);
  EXPECT_EQ(out[1].user_data, 1u);
  ASSERT_EQ(daemon.consume(out, 8), 3u);
  EXPECT_EQ(out[0].user_data, 2u);
  EXPECT_EQ(out[2].user_data, 4u);
}

TEST(RingTest, FullSubmissionQueueHasNoSpaceAndIsConsumedWhole) {
  RingPair rings = make_pair(4, 4);
  ClientRingEnd client(rings.client);
  DaemonRingEnd daemon(rings.daemon);
  for (uint64_t i = 0; i < 4; ++i) client.stage(make_submission(i));
  EXPECT_EQ(client.submission_space(), 0u);
  client.publish();
  SubmissionEntry out[4];
  ASSERT_EQ(daemon.consume(out, 4), 4u) << daemon.corruption();
  for (uint64_t i = 0; i < 4; ++i) EXPECT_TRUE(same_submission(out[i], make_submission(i)));
  EXPECT_FALSE(daemon.corrupt());
}

TEST(RingTest, SingleCompletionRoundTrip) {
  RingPair rings = make_pair(8, 8);
  ClientRingEnd client(rings.client);
  DaemonRingEnd daemon(rings.daemon);
  CompletionEntry out{};

  EXPECT_EQ(daemon.completion_space(), 8u);
  EXPECT_FALSE(client.poll_completion(&out));
  EXPECT_FALSE(daemon.publish());

  CompletionEntry in = make_completion(77, 5);
  daemon.post(in);
  EXPECT_EQ(daemon.completion_space(), 7u);
  EXPECT_FALSE(client.poll_completion(&out)) << "a posted but unpublished completion was visible";
  EXPECT_FALSE(daemon.publish());

  ASSERT_TRUE(client.poll_completion(&out));
  EXPECT_EQ(check_completion(out, 77, 5), "");
  EXPECT_EQ(rings.client.header()->cq_head.value.load(), 1u);
  EXPECT_EQ(daemon.completion_space(), 8u);
  EXPECT_FALSE(client.poll_completion(&out));
  EXPECT_FALSE(daemon.corrupt());
}

TEST(RingTest, CompletionWithEmptyAndFullMessages) {
  RingPair rings = make_pair(8, 8);
  ClientRingEnd client(rings.client);
  DaemonRingEnd daemon(rings.daemon);
  daemon.post(make_completion(1, 0));
  daemon.post(make_completion(2, kCompletionMessageBytes));
  daemon.publish();
  CompletionEntry out{};
  ASSERT_TRUE(client.poll_completion(&out));
  EXPECT_EQ(check_completion(out, 1, 0), "");
  ASSERT_TRUE(client.poll_completion(&out));
  EXPECT_EQ(check_completion(out, 2, kCompletionMessageBytes), "");
}

TEST(RingTest, OversizedMessageLengthIsClampedOnBothSides) {
  RingPair rings = make_pair(8, 8);
  ClientRingEnd client(rings.client);
  DaemonRingEnd daemon(rings.daemon);
  CompletionEntry in = make_completion(9, kCompletionMessageBytes);
  in.message_len = 100000;  // more than the slot holds
  daemon.post(in);
  daemon.publish();
  CompletionEntry out{};
  ASSERT_TRUE(client.poll_completion(&out));
  EXPECT_EQ(out.message_len, kCompletionMessageBytes);
  EXPECT_EQ(check_completion(out, 9, kCompletionMessageBytes), "");

  // A slot whose length field says more than the slot holds (e.g. scribbled) is clamped by
  // the reader too.
  daemon.post(make_completion(10, 3));
  rings.daemon.cq()[1].message_len = 0xffffffffu;
  daemon.publish();
  ASSERT_TRUE(client.poll_completion(&out));
  EXPECT_EQ(out.message_len, kCompletionMessageBytes);
}

// ---------------------------------------------------------------------------------------
// Wrap-around.

TEST(RingTest, SubmissionsWrapAroundManyTimes) {
  constexpr uint32_t kEntries = 8;
  RingPair rings = make_pair(kEntries, kEntries);
  ClientRingEnd client(rings.client);
  DaemonRingEnd daemon(rings.daemon);
  std::mt19937 rng(1);
  uint64_t produced = 0;
  uint64_t consumed = 0;
  const uint64_t total = kEntries * 1000 + 5;
  SubmissionEntry out[kEntries];
  while (consumed < total) {
    uint32_t batch = std::uniform_int_distribution<uint32_t>(0, client.submission_space())(rng);
    for (uint32_t i = 0; i < batch && produced < total; ++i)
      client.stage(make_submission(produced++));
    client.publish();
    uint32_t max = std::uniform_int_distribution<uint32_t>(1, kEntries)(rng);
    uint32_t n = daemon.consume(out, max);
    ASSERT_LE(n, max);
    for (uint32_t i = 0; i < n; ++i) {
      ASSERT_TRUE(same_submission(out[i], make_submission(consumed))) << "at " << consumed;
      ++consumed;
    }
    ASSERT_FALSE(daemon.corrupt()) << daemon.corruption();
    ASSERT_EQ(client.submission_space(), kEntries - (produced - consumed));
  }
  EXPECT_EQ(produced, total);
  EXPECT_EQ(rings.client.header()->sq_head.value.load(), static_cast<uint32_t>(total));
  EXPECT_EQ(rings.client.header()->sq_tail.value.load(), static_cast<uint32_t>(total));
}

TEST(RingTest, CompletionsWrapAroundManyTimes) {
  constexpr uint32_t kEntries = 4;
  RingPair rings = make_pair(kEntries, kEntries);
  ClientRingEnd client(rings.client);
  DaemonRingEnd daemon(rings.daemon);
  std::mt19937 rng(2);
  uint64_t produced = 0;
  uint64_t consumed = 0;
  const uint64_t total = kEntries * 2000 + 3;
  while (consumed < total) {
    uint32_t space = daemon.completion_space();
    ASSERT_EQ(space, kEntries - (produced - consumed));
    uint32_t batch = std::uniform_int_distribution<uint32_t>(0, space)(rng);
    for (uint32_t i = 0; i < batch && produced < total; ++i, ++produced) {
      daemon.post(make_completion(produced,
                                  static_cast<uint32_t>(produced % (kCompletionMessageBytes + 1))));
    }
    daemon.publish();
    uint32_t take = std::uniform_int_distribution<uint32_t>(0, kEntries)(rng);
    CompletionEntry out{};
    for (uint32_t i = 0; i < take && client.poll_completion(&out); ++i, ++consumed) {
      ASSERT_EQ(check_completion(out, consumed,
                                 static_cast<uint32_t>(consumed % (kCompletionMessageBytes + 1))),
                "");
    }
    ASSERT_FALSE(daemon.corrupt()) << daemon.corruption();
  }
  EXPECT_EQ(produced, total);
  CompletionEntry out{};
  EXPECT_FALSE(client.poll_completion(&out));
}

// ---------------------------------------------------------------------------------------
// Concurrent producer and consumer, 1,000,000 entries each way. Consumers spin briefly
// then park on an eventfd with the need-wakeup protocol; a lost wakeup shows up as a
// poll timeout and fails the test instead of hanging it.

constexpr uint64_t kConcurrentEntries = 1000000;
constexpr int kParkTimeoutMs = 10000;
constexpr auto kConcurrentDeadline = std::chrono::seconds(240);
constexpr int kSpinsBeforePark = 64;
// Every this many entries the producer stops until the consumer has committed to a park,
// so the wakeup path is exercised at least kConcurrentEntries / kForcedParkEvery - 1 times.
constexpr uint64_t kForcedParkEvery = 10000;
constexpr uint64_t kMinParks = kConcurrentEntries / kForcedParkEvery - 1;

// Waits (bounded) until a consumer has announced that it is parking.
bool await_parked(const std::atomic<uint32_t>& need_wakeup, Clock::time_point until) {
  while (need_wakeup.load(std::memory_order_acquire) == 0) {
    if (Clock::now() > until) return false;
    std::this_thread::yield();
  }
  return true;
}

// Waits (bounded) until the consumer has committed to a park later than `seen`. Watching
// need_wakeup instead is racy: a consumer that raises the flag and then finds new entries
// clears it again without parking, and that round exercises no wakeup.
bool await_committed_park(const std::atomic<uint64_t>& committed_parks, uint64_t seen,
                          Clock::time_point until) {
  while (committed_parks.load(std::memory_order_acquire) == seen) {
    if (Clock::now() > until) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST(RingConcurrencyTest, OneMillionSubmissionsInOrder) {
  RingPair rings = make_pair(64, 64);
  ClientRingEnd client(rings.client);
  DaemonRingEnd daemon(rings.daemon);
  UniqueFd sq_event = make_eventfd();
  FirstError error;
  const auto deadline = Clock::now() + kConcurrentDeadline;
  uint64_t parks = 0;
  uint64_t signals = 0;
  uint64_t consumed = 0;
  std::atomic<uint64_t> committed_parks{0};

  std::thread consumer([&] {
    SubmissionEntry batch[16];
    int idle = 0;
    while (consumed < kConcurrentEntries && !error.stopped()) {
      uint32_t n = daemon.consume(batch, 16);
      if (n == 0) {
        if (daemon.corrupt()) return error.set("ring corrupt: " + daemon.corruption());
        if (Clock::now() > deadline) return error.set("consumer ran past the deadline");
        if (++idle < kSpinsBeforePark) {
          std::this_thread::yield();
          continue;
        }
        idle = 0;
        if (daemon.prepare_park()) continue;
        committed_parks.fetch_add(1, std::memory_order_release);
        int r = wait_readable(sq_event.get(), kParkTimeoutMs);
        daemon.finish_park();
        drain_eventfd(sq_event.get());
        if (r <= 0) {
          return error.set("parked consumer was not woken within " +
                           std::to_string(kParkTimeoutMs) + " ms after entry " +
                           std::to_string(consumed) + " (lost wakeup)");
        }
        ++parks;
        continue;
      }
      idle = 0;
      for (uint32_t i = 0; i < n; ++i, ++consumed) {
        if (!same_submission(batch[i], make_submission(consumed))) {
          return error.set("entry " + std::to_string(consumed) + " arrived as user_data " +
                           std::to_string(batch[i].user_data));
        }
      }
    }
  });

  std::thread producer([&] {
    std::mt19937 rng(3);
    uint32_t batch_target = 1;
    uint32_t staged = 0;
    for (uint64_t seq = 0; seq < kConcurrentEntries && !error.stopped(); ++seq) {
      while (client.submission_space() == 0) {
        if (error.stopped()) return;
        if (Clock::now() > deadline) return error.set("producer ran past the deadline");
        std::this_thread::yield();
      }
      client.stage(make_submission(seq));
      ++staged;
      const bool force_park = (seq + 1) % kForcedParkEvery == 0 && seq + 1 < kConcurrentEntries;
      // Read before publishing: a park committed after this point, even one the publish
      // below wakes at once, is a park of this round.
      const uint64_t parks_seen = committed_parks.load(std::memory_order_acquire);
      if (staged >= batch_target || client.submission_space() == 0 ||
          seq + 1 == kConcurrentEntries || force_park) {
        if (client.publish()) {
          signal_eventfd(sq_event.get());
          ++signals;
        }
        staged = 0;
        batch_target = std::uniform_int_distribution<uint32_t>(1, 24)(rng);
      }
      if (force_park &&
          !await_committed_park(committed_parks, parks_seen,
                                Clock::now() + std::chrono::milliseconds(kParkTimeoutMs))) {
        return error.set("the consumer never parked after entry " + std::to_string(seq));
      }
    }
  });

  producer.join();
  consumer.join();
  ASSERT_EQ(error.get(), "");
  EXPECT_EQ(consumed, kConcurrentEntries);
  EXPECT_FALSE(daemon.corrupt());
  SubmissionEntry extra;
  EXPECT_EQ(daemon.consume(&extra, 1), 0u);
  EXPECT_EQ(client.submission_space(), 64u);
  // Every park that ended in a wakeup had a signal behind it.
  EXPECT_GE(signals, parks);
  EXPECT_GE(parks, kMinParks) << "the wakeup path was not exercised";
  RecordProperty("parks", std::to_string(parks));
  RecordProperty("signals", std::to_string(signals));
}

TEST(RingConcurrencyTest, OneMillionCompletionsInOrderWithVaryingMessages) {
  RingPair rings = make_pair(64, 32);
  ClientRingEnd client(rings.client);
  DaemonRingEnd daemon(rings.daemon);
  UniqueFd cq_event = make_eventfd();
  FirstError error;
  const auto deadline = Clock::now() + kConcurrentDeadline;
  uint64_t parks = 0;
  uint64_t signals = 0;
  uint64_t consumed = 0;
  std::atomic<uint64_t> committed_parks{0};
  auto length_of = [](uint64_t seq) {
    return static_cast<uint32_t>((seq * 37) % (kCompletionMessageBytes + 1));
  };

  std::thread consumer([&] {
    int idle = 0;
    CompletionEntry out{};
    while (consumed < kConcurrentEntries && !error.stopped()) {
      if (client.poll_completion(&out)) {
        idle = 0;
        std::string problem = check_completion(out, consumed, length_of(consumed));
        if (!problem.empty()) return error.set(problem);
        ++consumed;
        continue;
      }
      if (Clock::now() > deadline) return error.set("consumer ran past the deadline");
      if (++idle < kSpinsBeforePark) {
        std::this_thread::yield();
        continue;
      }
      idle = 0;
      if (client.prepare_park()) continue;
      committed_parks.fetch_add(1, std::memory_order_release);
      int r = wait_readable(cq_event.get(), kParkTimeoutMs);
      client.finish_park();
      drain_eventfd(cq_event.get());
      if (r <= 0) {
        return error.set("parked client was not woken within " + std::to_string(kParkTimeoutMs) +
                         " ms after completion " + std::to_string(consumed) + " (lost wakeup)");
      }
      ++parks;
    }
  });

  std::thread producer([&] {
    std::mt19937 rng(4);
    uint32_t batch_target = 1;
    uint32_t posted = 0;
    for (uint64_t seq = 0; seq < kConcurrentEntries && !error.stopped(); ++seq) {
      while (daemon.completion_space() == 0) {
        if (daemon.corrupt()) return error.set("ring corrupt: " + daemon.corruption());
        if (error.stopped()) return;
        if (Clock::now() > deadline) return error.set("producer ran past the deadline");
        std::this_thread::yield();
      }
      daemon.post(make_completion(seq, length_of(seq)));
      ++posted;
      const bool force_park = (seq + 1) % kForcedParkEvery == 0 && seq + 1 < kConcurrentEntries;
      const uint64_t parks_seen = committed_parks.load(std::memory_order_acquire);
      if (posted >= batch_target || daemon.completion_space() == 0 ||
          seq + 1 == kConcurrentEntries || force_park) {
        if (daemon.publish()) {
          signal_eventfd(cq_event.get());
          ++signals;
        }
        posted = 0;
        batch_target = std::uniform_int_distribution<uint32_t>(1, 24)(rng);
      }
      if (force_park &&
          !await_committed_park(committed_parks, parks_seen,
                                Clock::now() + std::chrono::milliseconds(kParkTimeoutMs))) {
        return error.set("the client never parked after completion " + std::to_string(seq));
      }
    }
  });

  producer.join();
  consumer.join();
  ASSERT_EQ(error.get(), "");
  EXPECT_EQ(consumed, kConcurrentEntries);
  EXPECT_FALSE(daemon.corrupt());
  CompletionEntry extra{};
  EXPECT_FALSE(client.poll_completion(&extra));
  EXPECT_EQ(daemon.completion_space(), 32u);
  EXPECT_GE(signals, parks);
  EXPECT_GE(parks, kMinParks) << "the wakeup path was not exercised";
}

// ---------------------------------------------------------------------------------------
// Need-wakeup protocol.

TEST(RingWakeupTest, DaemonParkOnEmptyQueueMakesNextPublishAskForWakeup) {
  RingPair rings = make_pair(8, 8);
  ClientRingEnd client(rings.client);
  DaemonRingEnd daemon(rings.daemon);

  EXPECT_FALSE(daemon.prepare_park()) << "an empty SQ has no work";
  EXPECT_EQ(rings.client.header()->sq_wakeup.need_wakeup.load(), 1u);
  client.stage(make_submission(1));
  EXPECT_FALSE(daemon.prepare_park()) << "a staged, unpublished entry is not work yet";
  EXPECT_TRUE(client.publish()) << "the daemon is parked: publish must ask for a wakeup";
  // Still set until the daemon finishes parking: each publish meanwhile asks again.
  client.stage(make_submission(2));
  EXPECT_TRUE(client.publish());

  daemon.finish_park();
  EXPECT_EQ(rings.client.header()->sq_wakeup.need_wakeup.load(), 0u);
  client.stage(make_submission(3));
  EXPECT_FALSE(client.publish()) << "no wakeup wanted once the daemon is running";

  SubmissionEntry out[8];
  EXPECT_EQ(daemon.consume(out, 8), 3u);
}

TEST(RingWakeupTest, DaemonParkWithWorkPendingReturnsTrueAndClearsFlag) {
  RingPair rings = make_pair(8, 8);
  ClientRingEnd client(rings.client);
  DaemonRingEnd daemon(rings.daemon);
  client.stage(make_submission(1));
  EXPECT_FALSE(client.publish());
  EXPECT_TRUE(daemon.prepare_park()) << "work is already there: must not park";
  EXPECT_EQ(rings.client.header()->sq_wakeup.need_wakeup.load(), 0u);
  client.stage(make_submission(2));
  EXPECT_FALSE(client.publish()) << "the flag must have been cleared";
  SubmissionEntry out[8];
  EXPECT_EQ(daemon.consume(out, 8), 2u);
  EXPECT_FALSE(daemon.prepare_park()) << "all consumed: the SQ is empty again";
  daemon.finish_park();
}

TEST(RingWakeupTest, ClientParkOnEmptyQueueMakesNextPublishAskForWakeup) {
  RingPair rings = make_pair(8, 8);
  ClientRingEnd client(rings.client);
  DaemonRingEnd daemon(rings.daemon);

  EXPECT_FALSE(client.prepare_park());
  EXPECT_EQ(rings.daemon.header()->cq_wakeup.need_wakeup.load(), 1u);
  daemon.post(make_completion(1, 4));
  EXPECT_FALSE(client.prepare_park()) << "a posted, unpublished completion is not work yet";
  EXPECT_TRUE(daemon.publish());
  client.finish_park();
  EXPECT_EQ(rings.daemon.header()->cq_wakeup.need_wakeup.load(), 0u);
  daemon.post(make_completion(2, 4));
  EXPECT_FALSE(daemon.publish());
}

TEST(RingWakeupTest, ClientParkWithCompletionPendingReturnsTrueAndClearsFlag) {
  RingPair rings = make_pair(8, 8);
  ClientRingEnd client(rings.client);
  DaemonRingEnd daemon(rings.daemon);
  daemon.post(make_completion(1, 4));
  EXPECT_FALSE(daemon.publish());
  EXPECT_TRUE(client.prepare_park());
  EXPECT_EQ(rings.daemon.header()->cq_wakeup.need_wakeup.load(), 0u);
  daemon.post(make_completion(2, 4));
  EXPECT_FALSE(daemon.publish());
  CompletionEntry out{};
  EXPECT_TRUE(client.poll_completion(&out));
  EXPECT_TRUE(client.poll_completion(&out));
  EXPECT_FALSE(client.prepare_park());
  client.finish_park();
}

TEST(RingWakeupTest, ParkedDaemonThreadIsWokenByPublish) {
  RingPair rings = make_pair(8, 8);
  ClientRingEnd client(rings.client);
  DaemonRingEnd daemon(rings.daemon);
  UniqueFd event = make_eventfd();

  std::atomic<int> poll_result{-2};
  uint32_t consumed = 0;
  SubmissionEntry got{};
  std::thread parked([&] {
    if (daemon.prepare_park()) {
      poll_result = -3;  // should not happen: the SQ is empty
      return;
    }
    poll_result = wait_readable(event.get(), kParkTimeoutMs);
    daemon.finish_park();
    drain_eventfd(event.get());
    consumed = daemon.consume(&got, 1);
  });

  ASSERT_TRUE(await_parked(rings.client.header()->sq_wakeup.need_wakeup,
                           Clock::now() + std::chrono::seconds(10)))
      << "the daemon thread never set need_wakeup";
  EXPECT_EQ(wait_readable(event.get(), 0), 0) << "eventfd readable before any publish";
  const auto start = Clock::now();
  client.stage(make_submission(99));
  bool wake = client.publish();
  EXPECT_TRUE(wake);
  if (wake) signal_eventfd(event.get());
  parked.join();
  EXPECT_EQ(poll_result.load(), 1) << "the parked thread timed out instead of being woken";
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(kParkTimeoutMs));
  ASSERT_EQ(consumed, 1u);
  EXPECT_TRUE(same_submission(got, make_submission(99)));
  EXPECT_EQ(rings.client.header()->sq_wakeup.need_wakeup.load(), 0u);
  // drain_eventfd emptied the counter.
  EXPECT_EQ(wait_readable(event.get(), 0), 0);
}

TEST(RingWakeupTest, ParkedClientThreadIsWokenByPublish) {
  RingPair rings = make_pair(8, 8);
  ClientRingEnd client(rings.client);
  DaemonRingEnd daemon(rings.daemon);
  UniqueFd event = make_eventfd();

  std::atomic<int> poll_result{-2};
  bool got_one = false;
  CompletionEntry got{};
  std::thread parked([&] {
    if (client.prepare_park()) {
      poll_result = -3;
      return;
    }
    poll_result = wait_readable(event.get(), kParkTimeoutMs);
    client.finish_park();
    drain_eventfd(event.get());
    got_one = client.poll_completion(&got);
  });

  ASSERT_TRUE(await_parked(rings.daemon.header()->cq_wakeup.need_wakeup,
                           Clock::now() + std::chrono::seconds(10)))
      << "the client thread never set need_wakeup";
  daemon.post(make_completion(5, 17));
  bool wake = daemon.publish();
  EXPECT_TRUE(wake);
  if (wake) signal_eventfd(event.get());
  parked.join();
  EXPECT_EQ(poll_result.load(), 1) << "the parked thread timed out instead of being woken";
  ASSERT_TRUE(got_one);
  EXPECT_EQ(check_completion(got, 5, 17), "");
}

TEST(RingWakeupTest, SignalOnAFullEventfdCounterDoesNotBlock) {
  UniqueFd event = make_eventfd();
  uint64_t near_max = 0xfffffffffffffffeull;
  ASSERT_EQ(::write(event.get(), &near_max, sizeof(near_max)), 8);
  signal_eventfd(event.get());  // EAGAIN: must return, not block
  EXPECT_EQ(wait_readable(event.get(), 0), 1);
  drain_eventfd(event.get());
  EXPECT_EQ(wait_readable(event.get(), 0), 0);
  drain_eventfd(event.get());  // empty: must not block either
}

// ---------------------------------------------------------------------------------------
// Hostile indices written by the client.

TEST(RingHostileTest, SubmissionTailFarBeyondHeadCorruptsTheRing) {
  RingPair rings = make_pair(8, 8);
  DaemonRingEnd daemon(rings.daemon);
  rings.client.header()->sq_tail.value.store(1000000, std::memory_order_release);
  SubmissionEntry out[8];
  EXPECT_EQ(daemon.consume(out, 8), 0u);
  ASSERT_TRUE(daemon.corrupt());
  EXPECT_THAT(daemon.corruption(), HasSubstr("tail 1000000"));
  EXPECT_THAT(daemon.corruption(), HasSubstr("head 0"));
  EXPECT_EQ(rings.daemon.header()->sq_head.value.load(), 0u) << "head moved on a corrupt ring";

  // Corruption is for good: even a repaired tail is not consumed.
  rings.client.header()->sq_tail.value.store(1, std::memory_order_release);
  EXPECT_EQ(daemon.consume(out, 8), 0u);
  EXPECT_TRUE(daemon.corrupt());
  EXPECT_EQ(daemon.completion_space(), 0u);
}

TEST(RingHostileTest, SubmissionTailOneBeyondCapacityCorruptsTheRing) {
  RingPair rings = make_pair(8, 8);
  DaemonRingEnd daemon(rings.daemon);
  rings.client.header()->sq_tail.value.store(9, std::memory_order_release);
  SubmissionEntry out[16];
  EXPECT_EQ(daemon.consume(out, 16), 0u);
  EXPECT_TRUE(daemon.corrupt());
  EXPECT_THAT(daemon.corruption(), HasSubstr("tail 9"));
}

TEST(RingHostileTest, SubmissionTailMovedBackwardsCorruptsTheRing) {
  RingPair rings = make_pair(8, 8);
  ClientRingEnd client(rings.client);
  DaemonRingEnd daemon(rings.daemon);
  for (uint64_t i = 0; i < 3; ++i) client.stage(make_submission(i));
  client.publish();
  SubmissionEntry out[8];
  ASSERT_EQ(daemon.consume(out, 8), 3u);
  rings.client.header()->sq_tail.value.store(1, std::memory_order_release);
  EXPECT_EQ(daemon.consume(out, 8), 0u);
  ASSERT_TRUE(daemon.corrupt());
  EXPECT_THAT(daemon.corruption(), HasSubstr("tail 1"));
  EXPECT_THAT(daemon.corruption(), HasSubstr("head 3"));
}

TEST(RingHostileTest, SubmissionHeadWrittenByClientIsIgnored) {
  RingPair rings = make_pair(8, 8);
  ClientRingEnd client(rings.client);
  DaemonRingEnd daemon(rings.daemon);
  client.stage(make_submission(0));
  client.stage(make_submission(1));
  client.publish();
  // The daemon's head is authoritative; a scribbled copy in shared memory changes nothing.
  rings.client.header()->sq_head.value.store(500, std::memory_order_release);
  SubmissionEntry out[8];
  ASSERT_EQ(daemon.consume(out, 8), 2u);
  EXPECT_EQ(out[0].user_data, 0u);
  EXPECT_EQ(out[1].user_data, 1u);
  EXPECT_FALSE(daemon.corrupt());
  EXPECT_EQ(rings.daemon.header()->sq_head.value.load(), 2u);
}

TEST(RingHostileTest, CompletionHeadAheadOfTailCorruptsTheRing) {
  RingPair rings = make_pair(8, 8);
  DaemonRingEnd daemon(rings.daemon);
  rings.client.header()->cq_head.value.store(5, std::memory_order_release);
  EXPECT_EQ(daemon.completion_space(), 0u);
  ASSERT_TRUE(daemon.corrupt());
  EXPECT_THAT(daemon.corruption(), HasSubstr("completion queue head 5"));
  EXPECT_THAT(daemon.corruption(), HasSubstr("tail 0"));
  // Once corrupt, neither queue is used.
  rings.client.header()->cq_head.value.store(0, std::memory_order_release);
  EXPECT_EQ(daemon.completion_space(), 0u);
  SubmissionEntry out[8];
  EXPECT_EQ(daemon.consume(out, 8), 0u);
}

TEST(RingHostileTest, CompletionHeadTooFarBehindTailCorruptsTheRing) {
  RingPair rings = make_pair(8, 8);
  DaemonRingEnd daemon(rings.daemon);
  for (uint64_t i = 0; i < 3; ++i) daemon.post(make_completion(i, 0));
  daemon.publish();
  // head = tail - 9: more than the ring holds is outstanding.
  rings.client.header()->cq_head.value.store(static_cast<uint32_t>(3 - 9),
                                             std::memory_order_release);
  EXPECT_EQ(daemon.completion_space(), 0u);
  EXPECT_TRUE(daemon.corrupt());
}

TEST(RingHostileTest, CompletionHeadAtLegalPositionsIsAccepted) {
  RingPair rings = make_pair(8, 8);
  DaemonRingEnd daemon(rings.daemon);
  for (uint64_t i = 0; i < 8; ++i) daemon.post(make_completion(i, 0));
  daemon.publish();
  EXPECT_EQ(daemon.completion_space(), 0u);
  EXPECT_FALSE(daemon.corrupt()) << "a full CQ is not corrupt";
  rings.client.header()->cq_head.value.store(8, std::memory_order_release);
  EXPECT_EQ(daemon.completion_space(), 8u);
  EXPECT_FALSE(daemon.corrupt());
}

}  // namespace
}  // namespace plexus::shm
