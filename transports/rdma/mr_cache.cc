#include "transports/rdma/mr_cache.h"

namespace plexus::transports::rdma {

// One registration. Its deleter deregisters it: the cache holds one reference until the
// owner goes, each Pin another.
struct MrCache::Pin::Entry {
  std::byte* base = nullptr;
  size_t bytes = 0;
  uint64_t last_use = 0;
  MemoryKeys keys;
  void* handle = nullptr;
  std::function<void(void*)> deregister;
  std::shared_ptr<uint64_t> deregistrations;
  ~Entry() {
    if (handle != nullptr) {
      deregister(handle);
      ++*deregistrations;
    }
  }
};

const MemoryKeys& MrCache::Pin::keys() const { return entry_->keys; }

MrCache::MrCache(Calls calls, size_t max_entries)
    : calls_(std::move(calls)), max_entries_(max_entries) {}

MrCache::~MrCache() = default;

common::Result<MrCache::Pin> MrCache::lookup(uint64_t owner, std::byte* base, size_t bytes) {
  const Key key{owner, reinterpret_cast<uintptr_t>(base)};
  if (auto it = entries_.find(key); it != entries_.end()) {
    if (it->second->bytes == bytes) {
      it->second->last_use = ++uses_;
      return Pin(it->second);
    }
    // The same base with another size: the region was replaced (a new mapping). The old
    // registration goes once unpinned.
    entries_.erase(it);
  }
  // When full, the least recently used entry no work request holds (only the cache's
  // reference) makes room, once the new registration has succeeded.
  auto victim = entries_.end();
  if (entries_.size() >= max_entries_) {
    for (auto e = entries_.begin(); e != entries_.end(); ++e) {
      if (e->second.use_count() == 1 &&
          (victim == entries_.end() || e->second->last_use < victim->second->last_use)) {
        victim = e;
      }
    }
    if (victim == entries_.end()) {
      return common::fail("the memory registration cache is full (" + std::to_string(max_entries_) +
                          " regions, every one in use)");
    }
  }
  auto entry = std::make_shared<Pin::Entry>();
  entry->base = base;
  entry->bytes = bytes;
  entry->last_use = ++uses_;
  entry->deregister = calls_.deregister;
  entry->deregistrations = deregistrations_;
  auto registered = calls_.register_region(base, bytes);
  if (!registered.ok()) return common::fail(registered.error());
  entry->handle = registered->handle;
  entry->keys = registered->keys;
  ++registrations_;
  if (victim != entries_.end()) entries_.erase(victim);
  entries_.emplace(key, entry);
  return Pin(std::move(entry));
}

void MrCache::invalidate(uint64_t owner) {
  auto it = entries_.lower_bound(Key{owner, 0});
  while (it != entries_.end() && it->first.first == owner) it = entries_.erase(it);
}

uint64_t MrCache::drop_unpinned() {
  uint64_t bytes = 0;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.use_count() == 1) {
      bytes += it->second->bytes;
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  return bytes;
}

std::vector<uint64_t> MrCache::owners() const {
  std::vector<uint64_t> out;
  for (const auto& [key, entry] : entries_) {
    if (out.empty() || out.back() != key.first) out.push_back(key.first);
  }
  return out;
}

}  // namespace plexus::transports::rdma
