// Tests for shm/memfd (sealed memfd creation and the check applied to a peer's fd) and
// shm/pool (the client's Boost managed_external_buffer pool on a sealed memfd).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "shm/memfd.h"
#include "shm/pool.h"

namespace plexus::shm {
namespace {

using common::UniqueFd;
using ::testing::HasSubstr;

constexpr size_t kMiB = 1024 * 1024;

// A memfd that allows sealing, sized but with only `seals` applied.
UniqueFd memfd_with_seals(size_t bytes, int seals) {
  UniqueFd fd(::memfd_create("test-seals", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return fd;
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) return UniqueFd();
  if (seals != 0 && ::fcntl(fd.get(), F_ADD_SEALS, seals) != 0) return UniqueFd();
  return fd;
}

// ---------------------------------------------------------------------------------------
// create_sealed_memfd

TEST(SealedMemfdTest, HasAllThreeSealsAndTheRequestedSize) {
  UniqueFd fd = create_sealed_memfd("test", 3 * 4096 + 5);
  ASSERT_TRUE(fd);
  int seals = ::fcntl(fd.get(), F_GET_SEALS);
  ASSERT_GE(seals, 0) << std::strerror(errno);
  EXPECT_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  EXPECT_EQ(static_cast<unsigned>(seals) & kRequiredSeals, kRequiredSeals);
  // Writes stay possible: the pool and rings are written through shared mappings.
  EXPECT_EQ(seals & F_SEAL_WRITE, 0);
  struct stat st {};
  ASSERT_EQ(::fstat(fd.get(), &st), 0);
  EXPECT_EQ(st.st_size, 3 * 4096 + 5);
  EXPECT_NE(::fcntl(fd.get(), F_GETFD) & FD_CLOEXEC, 0);
}

// errno of a failed call, 0 when it succeeded.
template <typename Call>
int error_of(Call&& call) {
  errno = 0;
  return call() == 0 ? 0 : errno;
}

TEST(SealedMemfdTest, CannotBeResizedOrResealed) {
  UniqueFd fd = create_sealed_memfd("test", 8192);
  const int f = fd.get();
  EXPECT_EQ(error_of([&] { return ::ftruncate(f, 4096); }), EPERM);
  EXPECT_EQ(error_of([&] { return ::ftruncate(f, 16384); }), EPERM);
  EXPECT_EQ(error_of([&] { return ::ftruncate(f, 0); }), EPERM);
  // Writing past the end would grow it.
  EXPECT_EQ(error_of([&] { return ::pwrite(f, "x", 1, 8192) == 1 ? 0 : -1; }), EPERM);
  // F_SEAL_SEAL: nobody can add F_SEAL_WRITE later and break the peer's writes.
  EXPECT_EQ(error_of([&] { return ::fcntl(f, F_ADD_SEALS, F_SEAL_WRITE); }), EPERM);
  // Writing inside the sealed size is fine.
  EXPECT_EQ(error_of([&] { return ::pwrite(f, "x", 1, 8191) == 1 ? 0 : -1; }), 0);
  struct stat st {};
  ASSERT_EQ(::fstat(f, &st), 0);
  EXPECT_EQ(st.st_size, 8192);
}

TEST(SealedMemfdTest, TwoMappingsShareContents) {
  UniqueFd fd = create_sealed_memfd("test", 4096);
  Mapping a = map_shared(fd.get(), 4096);
  Mapping b = map_shared(fd.get(), 4096);
  ASSERT_NE(a.data(), b.data());
  EXPECT_EQ(a.size(), 4096u);
  std::memcpy(a.data() + 100, "plexus", 6);
  EXPECT_EQ(std::memcmp(b.data() + 100, "plexus", 6), 0);

  // Moving a mapping transfers ownership; the moved-from one is empty.
  Mapping c = std::move(a);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(std::memcmp(c.data() + 100, "plexus", 6), 0);
}

TEST(SealedMemfdTest, MapSharedOfABadFdThrows) {
  EXPECT_THROW(map_shared(-1, 4096), std::system_error);
}

TEST(UniqueFdTest, ClosesOnResetAndTransfersOnMove) {
  int raw[2];
  ASSERT_EQ(::pipe(raw), 0);
  ::close(raw[1]);
  UniqueFd a(raw[0]);
  UniqueFd b = std::move(a);
  EXPECT_FALSE(a);
  EXPECT_EQ(b.get(), raw[0]);
  b.reset();
  EXPECT_EQ(error_of([&] { return ::fcntl(raw[0], F_GETFD); }), EBADF)
      << "reset did not close the descriptor";
  EXPECT_FALSE(b);
}

// ---------------------------------------------------------------------------------------
// check_sealed_memfd

TEST(CheckSealedMemfdTest, AcceptsASealedMemfdWithinBounds) {
  UniqueFd fd = create_sealed_memfd("test", 65536);
  auto size = check_sealed_memfd(fd.get(), 65536, 65536);
  ASSERT_EQ(size.error(), "");
  EXPECT_EQ(*size, 65536u);
  size = check_sealed_memfd(fd.get(), 1, UINT64_MAX);
  ASSERT_EQ(size.error(), "");
  EXPECT_EQ(*size, 65536u);
}

TEST(CheckSealedMemfdTest, RefusesAnUnsealedMemfd) {
  UniqueFd fd = memfd_with_seals(65536, 0);
  ASSERT_TRUE(fd);
  auto size = check_sealed_memfd(fd.get(), 1, UINT64_MAX);
  EXPECT_THAT(size.error(), HasSubstr("not sealed against shrinking"));
  EXPECT_THAT(size.error(), HasSubstr("F_SEAL_SHRINK"));
  EXPECT_FALSE(size.ok()) << "no size on failure";
}

TEST(CheckSealedMemfdTest, RefusesAMemfdThatDoesNotAllowSealing) {
  // Without MFD_ALLOW_SEALING the kernel reports F_SEAL_SEAL only.
  UniqueFd fd(::memfd_create("no-sealing", MFD_CLOEXEC));
  ASSERT_TRUE(fd);
  ASSERT_EQ(::ftruncate(fd.get(), 4096), 0);
  EXPECT_THAT(check_sealed_memfd(fd.get(), 1, UINT64_MAX).error(), HasSubstr("shrinking"));
}

TEST(CheckSealedMemfdTest, RefusesPartialSeals) {
  {
    UniqueFd fd = memfd_with_seals(4096, F_SEAL_SHRINK);
    ASSERT_TRUE(fd);
    auto size = check_sealed_memfd(fd.get(), 1, UINT64_MAX);
    EXPECT_THAT(size.error(), HasSubstr("not sealed against growing"));
    EXPECT_THAT(size.error(), HasSubstr("F_SEAL_GROW"));
    EXPECT_FALSE(size.ok());
  }
  {
    UniqueFd fd = memfd_with_seals(4096, F_SEAL_SHRINK | F_SEAL_GROW);
    ASSERT_TRUE(fd);
    auto size = check_sealed_memfd(fd.get(), 1, UINT64_MAX);
    EXPECT_THAT(size.error(), HasSubstr("not final"));
    EXPECT_THAT(size.error(), HasSubstr("F_SEAL_SEAL"));
    EXPECT_FALSE(size.ok());
  }
  {
    UniqueFd fd = memfd_with_seals(4096, F_SEAL_GROW | F_SEAL_SEAL);
    ASSERT_TRUE(fd);
    auto size = check_sealed_memfd(fd.get(), 1, UINT64_MAX);
    EXPECT_THAT(size.error(), HasSubstr("shrinking"));
    EXPECT_FALSE(size.ok());
  }
  {
    UniqueFd fd = memfd_with_seals(4096, F_SEAL_SHRINK | F_SEAL_SEAL);
    ASSERT_TRUE(fd);
    auto size = check_sealed_memfd(fd.get(), 1, UINT64_MAX);
    EXPECT_THAT(size.error(), HasSubstr("growing"));
    EXPECT_FALSE(size.ok());
  }
}

TEST(CheckSealedMemfdTest, AcceptsExtraSealsBeyondTheRequiredOnes) {
  UniqueFd fd = memfd_with_seals(4096, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  ASSERT_TRUE(fd);
  auto size = check_sealed_memfd(fd.get(), 1, UINT64_MAX);
  ASSERT_EQ(size.error(), "");
  EXPECT_EQ(*size, 4096u);
}

TEST(CheckSealedMemfdTest, RefusesTooSmall) {
  UniqueFd fd = create_sealed_memfd("test", 4096);
  auto size = check_sealed_memfd(fd.get(), 8192, UINT64_MAX);
  EXPECT_THAT(size.error(), HasSubstr("holds 4096 bytes"));
  EXPECT_THAT(size.error(), HasSubstr("8192 were declared"));
  EXPECT_FALSE(size.ok());
  // Exactly the minimum passes.
  EXPECT_EQ(check_sealed_memfd(fd.get(), 4096, UINT64_MAX).error(), "");
}

TEST(CheckSealedMemfdTest, RefusesAnEmptyMemfdWhenBytesAreRequired) {
  UniqueFd fd = create_sealed_memfd("empty", 0);
  EXPECT_THAT(check_sealed_memfd(fd.get(), 1, UINT64_MAX).error(), HasSubstr("holds 0 bytes"));
}

TEST(CheckSealedMemfdTest, RefusesTooLarge) {
  UniqueFd fd = create_sealed_memfd("test", 2 * kMiB);
  auto size = check_sealed_memfd(fd.get(), 1, kMiB);
  EXPECT_THAT(size.error(), HasSubstr("holds 2097152 bytes"));
  EXPECT_THAT(size.error(), HasSubstr("limit of 1048576"));
  EXPECT_FALSE(size.ok());
  EXPECT_EQ(check_sealed_memfd(fd.get(), 1, 2 * kMiB).error(), "");
}

TEST(CheckSealedMemfdTest, RefusesNonMemfdDescriptors) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  UniqueFd read_end(p[0]);
  UniqueFd write_end(p[1]);
  EXPECT_THAT(check_sealed_memfd(read_end.get(), 0, UINT64_MAX).error(),
              HasSubstr("not a sealable memfd"));

  UniqueFd dev_null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(dev_null);
  EXPECT_THAT(check_sealed_memfd(dev_null.get(), 0, UINT64_MAX).error(),
              HasSubstr("not a sealable memfd"));

  auto size = check_sealed_memfd(-1, 0, UINT64_MAX);
  EXPECT_THAT(size.error(), HasSubstr("F_GET_SEALS failed"));
  EXPECT_FALSE(size.ok());
}

// ---------------------------------------------------------------------------------------
// ClientPool

// The pool's base address, recovered from an allocation.
uintptr_t pool_base(const ClientPool& pool, const void* some_allocation) {
  return reinterpret_cast<uintptr_t>(some_allocation) - pool.offset_of(some_allocation);
}

TEST(ClientPoolTest, MemfdIsSealedAndExactlySized) {
  ClientPool pool(kMiB);
  EXPECT_EQ(pool.size(), kMiB);
  auto size = check_sealed_memfd(pool.fd(), kMiB, kMiB);
  ASSERT_EQ(size.error(), "");
  EXPECT_EQ(*size, kMiB);
  EXPECT_GT(pool.free_bytes(), kMiB / 2);
  EXPECT_LT(pool.free_bytes(), kMiB);
}

TEST(ClientPoolTest, AllocationsAreAlignedInsideDistinctAndVisibleToThePeer) {
  ClientPool pool(4 * kMiB);
  const std::vector<size_t> sizes = {0, 1, 7, 63, 64, 65, 100, 1000, 4096, 4097, 100000, 1 << 20};
  std::vector<std::pair<std::byte*, size_t>> blocks;
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto* p = static_cast<std::byte*>(pool.allocate(sizes[i]));
    ASSERT_NE(p, nullptr) << "allocate(" << sizes[i] << ")";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << "allocate(" << sizes[i] << ")";
    size_t usable = std::max<size_t>(sizes[i], 1);
    EXPECT_TRUE(pool.contains(p, usable));
    EXPECT_LT(pool.offset_of(p), pool.size());
    EXPECT_LE(pool.offset_of(p) + usable, pool.size());
    EXPECT_EQ(pool.offset_of(p) % 64, 0u) << "mapping is page-aligned, so offsets are too";
    std::memset(p, static_cast<int>(i + 1), usable);
    blocks.emplace_back(p, usable);
  }
  // Distinct and non-overlapping: every block still holds its own pattern.
  std::vector<std::pair<std::byte*, size_t>> sorted = blocks;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 1; i < sorted.size(); ++i) {
    EXPECT_LE(sorted[i - 1].first + sorted[i - 1].second, sorted[i].first)
        << "blocks " << i - 1 << " and " << i << " overlap";
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    for (size_t j = 0; j < blocks[i].second; ++j) {
      ASSERT_EQ(static_cast<int>(blocks[i].first[j]), static_cast<int>(i + 1))
          << "block " << i << " byte " << j << " was overwritten";
    }
  }
  // The daemon maps the same memfd and finds the data at offset_of().
  Mapping peer = map_shared(pool.fd(), pool.size());
  for (size_t i = 0; i < blocks.size(); ++i) {
    uint64_t off = pool.offset_of(blocks[i].first);
    EXPECT_EQ(static_cast<int>(peer.data()[off]), static_cast<int>(i + 1));
    EXPECT_EQ(static_cast<int>(peer.data()[off + blocks[i].second - 1]), static_cast<int>(i + 1));
  }
  for (auto& [p, n] : blocks) EXPECT_TRUE(pool.deallocate(p));
}

TEST(ClientPoolTest, FreedMemoryIsReusable) {
  ClientPool pool(kMiB);
  const size_t initially_free = pool.free_bytes();
  constexpr size_t kChunk = 64 * 1024;
  std::vector<void*> chunks;
  for (int i = 0; i < 1000; ++i) {
    void* p = pool.allocate(kChunk);
    if (p == nullptr) break;
    chunks.push_back(p);
  }
  ASSERT_GE(chunks.size(), 8u) << "a 1 MiB pool should hold at least 8 chunks of 64 KiB";
  ASSERT_LT(chunks.size(), 16u) << "the pool handed out more than it holds";
  EXPECT_EQ(pool.allocate(kChunk), nullptr);
  EXPECT_LT(pool.free_bytes(), kChunk + 4096);

  // Free one: the same size fits again.
  ASSERT_TRUE(pool.deallocate(chunks.back()));
  chunks.pop_back();
  void* again = pool.allocate(kChunk);
  ASSERT_NE(again, nullptr);
  chunks.push_back(again);

  const size_t count = chunks.size();
  for (void* p : chunks) EXPECT_TRUE(pool.deallocate(p));
  EXPECT_EQ(pool.free_bytes(), initially_free);
  chunks.clear();
  for (size_t i = 0; i < count; ++i) {
    void* p = pool.allocate(kChunk);
    ASSERT_NE(p, nullptr) << "after freeing everything, chunk " << i << " did not fit";
    chunks.push_back(p);
  }
  for (void* p : chunks) EXPECT_TRUE(pool.deallocate(p));
  // Freed neighbours coalesce: one allocation of most of the pool fits.
  void* big = pool.allocate(kMiB / 2);
  EXPECT_NE(big, nullptr);
  EXPECT_TRUE(pool.deallocate(big));
}

TEST(ClientPoolTest, AllocateReturnsNullWhenExhausted) {
  ClientPool pool(kMiB);
  EXPECT_EQ(pool.allocate(2 * kMiB), nullptr);
  EXPECT_EQ(pool.allocate(kMiB), nullptr) << "the allocator's own header takes some space";
  EXPECT_EQ(pool.allocate(std::numeric_limits<size_t>::max() / 2), nullptr);
  EXPECT_EQ(pool.allocate(std::numeric_limits<size_t>::max() - 4096), nullptr);
  // Still usable afterwards.
  void* p = pool.allocate(4096);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(pool.deallocate(p));
}

// Boost's allocate_aligned wraps its size arithmetic for sizes within ~143 bytes of
// SIZE_MAX (returning a small block); allocate() must refuse them first.
TEST(ClientPoolTest, AllocateOfSizesNearSizeMaxReturnsNull) {
  for (size_t below_max :
       {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{100}, size_t{142}}) {
    ClientPool pool(kMiB);
    const size_t free_before = pool.free_bytes();
    EXPECT_EQ(pool.allocate(std::numeric_limits<size_t>::max() - below_max), nullptr)
        << "allocate(SIZE_MAX - " << below_max << ")";
    EXPECT_EQ(pool.free_bytes(), free_before);
    void* p = pool.allocate(4096);
    EXPECT_NE(p, nullptr) << "the pool is unusable after allocate(SIZE_MAX - " << below_max << ")";
    if (p != nullptr) {
      EXPECT_TRUE(pool.deallocate(p));
    }
  }
}

TEST(ClientPoolTest, DeallocateOfAForeignPointerReturnsFalse) {
  ClientPool pool(kMiB);
  int on_stack = 0;
  EXPECT_FALSE(pool.deallocate(&on_stack));
  void* heap = std::malloc(64);
  ASSERT_NE(heap, nullptr);
  EXPECT_FALSE(pool.deallocate(heap));
  std::free(heap);
  EXPECT_FALSE(pool.deallocate(nullptr));

  ClientPool other(kMiB);
  void* theirs = other.allocate(128);
  ASSERT_NE(theirs, nullptr);
  EXPECT_FALSE(pool.deallocate(theirs));
  EXPECT_TRUE(other.deallocate(theirs));

  void* mine = pool.allocate(128);
  ASSERT_NE(mine, nullptr);
  const uintptr_t base = pool_base(pool, mine);
  EXPECT_FALSE(pool.deallocate(reinterpret_cast<void*>(base + pool.size())))
      << "one past the end is not in the pool";
  EXPECT_TRUE(pool.deallocate(mine));
}

// Handing Boost an interior or already-freed pointer crashes or corrupts the pool;
// plexus_free() relies on deallocate() refusing them.
TEST(ClientPoolTest, DeallocateOfAnInteriorPointerOrTwiceReturnsFalse) {
  ClientPool pool(kMiB);
  auto* block = static_cast<std::byte*>(pool.allocate(4096));
  ASSERT_NE(block, nullptr);
  EXPECT_FALSE(pool.deallocate(block + 64)) << "interior pointer";
  EXPECT_TRUE(pool.deallocate(block));
  const size_t free_after = pool.free_bytes();
  EXPECT_FALSE(pool.deallocate(block)) << "double free";
  EXPECT_EQ(pool.free_bytes(), free_after);
  EXPECT_LE(pool.free_bytes(), pool.size());
}

TEST(ClientPoolTest, ContainsRejectsRangesOutsideThePool) {
  ClientPool pool(kMiB);
  void* p = pool.allocate(64);
  ASSERT_NE(p, nullptr);
  const uintptr_t base = pool_base(pool, p);
  const size_t size = pool.size();
  auto at = [](uintptr_t address) { return reinterpret_cast<const void*>(address); };

  EXPECT_TRUE(pool.contains(at(base), size));
  EXPECT_TRUE(pool.contains(at(base), 1));
  EXPECT_TRUE(pool.contains(at(base + size - 1), 1));
  EXPECT_TRUE(pool.contains(at(base + 100), size - 100));

  EXPECT_FALSE(pool.contains(at(base), size + 1)) << "crosses the end";
  EXPECT_FALSE(pool.contains(at(base + size - 1), 2)) << "crosses the end";
  EXPECT_FALSE(pool.contains(at(base + 100), size - 99)) << "crosses the end";
  EXPECT_FALSE(pool.contains(at(base + size), 1)) << "starts at the end";
  EXPECT_FALSE(pool.contains(at(base + size + 4096), 1)) << "after the pool";
  EXPECT_FALSE(pool.contains(at(base - 1), 1)) << "before the base";
  EXPECT_FALSE(pool.contains(at(base - 1), 2)) << "starts before the base";
  EXPECT_FALSE(pool.contains(at(base - 4096), 8192)) << "starts before the base";
  EXPECT_FALSE(pool.contains(at(0), 1));
  // Lengths that would wrap a naive ptr + bytes <= end check.
  EXPECT_FALSE(pool.contains(at(base + 8), std::numeric_limits<size_t>::max()));
  EXPECT_FALSE(pool.contains(at(base + 8), std::numeric_limits<size_t>::max() - base));
  EXPECT_FALSE(pool.contains(at(base + 8), std::numeric_limits<size_t>::max() - base - 7));
  EXPECT_FALSE(pool.contains(at(std::numeric_limits<uintptr_t>::max()), 1));
  EXPECT_FALSE(pool.contains(at(std::numeric_limits<uintptr_t>::max() - 8), 16));
  EXPECT_TRUE(pool.deallocate(p));
}

}  // namespace
}  // namespace plexus::shm
