// Memory registered with the verbs device, by region: a window of a client's pool (or a GPU
// region) registered once on first use and reused for every frame sent from it, so that
// payloads go from where they lie. Entries belong to an owner (an announced region,
// transports/path/sendable_memory.h) and are dropped when it goes. Registration pins pages and
// costs a system call, and a memory region deregistered under a posted work request fails that
// request (and the QP with it): entries are pinned while work requests use them, and an invalidated
// entry is deregistered only when its last pin goes. Knows nothing of libibverbs: the path gives it
// the calls (tests give fakes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"

namespace plexus::transports::rdma {

struct MemoryKeys {
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

class MrCache {
 public:
  // A region registered: an opaque handle (non-null) and its keys.
  struct Registration {
    void* handle = nullptr;
    MemoryKeys keys;
  };
  struct Calls {
    // Registers [base, base + bytes), or says why not.
    std::function<common::Result<Registration>(std::byte* base, size_t bytes)> register_region;
    std::function<void(void* handle)> deregister;
  };
  // At most `max_entries` regions at once: past that, a new one takes the place of the least
  // recently used one no work request holds, and when every one is held the lookup fails
  // (the caller copies through its bounce buffer instead) rather than pin without bound.
  MrCache(Calls calls, size_t max_entries);
  ~MrCache();  // deregisters everything (no work request may still use it)
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;

  // A pinned use of the keys of `owner`'s region [base, base + bytes), registered now if
  // it was not. Released (unpinned) when the last copy of the handle goes.
  class Pin {
   public:
    Pin() = default;
    const MemoryKeys& keys() const;
    explicit operator bool() const { return entry_ != nullptr; }

   private:
    friend class MrCache;
    struct Entry;
    explicit Pin(std::shared_ptr<Entry> entry) : entry_(std::move(entry)) {}
    std::shared_ptr<Entry> entry_;
  };
  // Why not when registration fails or the cache is full.
  common::Result<Pin> lookup(uint64_t owner, std::byte* base, size_t bytes);
  // `owner` is gone: its regions are forgotten now and deregistered once unpinned.
  void invalidate(uint64_t owner);
  // The owners with entries, for the caller to ask which are gone.
  std::vector<uint64_t> owners() const;
  // Forgets every region no work request holds (deregistered now): their pins are wanted
  // elsewhere (a new path's rings). The bytes so freed.
  uint64_t drop_unpinned();

  size_t entries() const { return entries_.size(); }
  uint64_t registrations() const { return registrations_; }
  uint64_t deregistrations() const { return *deregistrations_; }

 private:
  using Key = std::pair<uint64_t, uintptr_t>;  // owner, region base address
  Calls calls_;
  size_t max_entries_;
  std::map<Key, std::shared_ptr<Pin::Entry>> entries_;
  uint64_t registrations_ = 0;
  uint64_t uses_ = 0;  // the clock of last use, for eviction
  std::shared_ptr<uint64_t> deregistrations_ = std::make_shared<uint64_t>(0);
};

}  // namespace plexus::transports::rdma
