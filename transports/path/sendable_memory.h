// Memory that lives long enough to be worth registering with a device: a client's pool,
// mapped for as long as its session lasts. Whoever maps it announces it here, and the
// announcement is withdrawn before the memory is unmapped; a transport that can send from
// registered memory (RDMA) asks which announced region holds a payload, and registers it
// once instead of copying every frame into a buffer of its own.
//
// A region's id is never reused, so a registration made for one mapping can never be taken
// for a later mapping at the same address (that would send the old pages' bytes). Those who
// cache registrations compare withdrawals() with what they saw and drop the ids no longer
// held. A client that punches holes in its own pool (fallocate, MADV_REMOVE: the seals allow
// it) while registered windows pin the old pages gets their stale bytes sent: it harms only
// its own results, and clientlib never does it. Announcements come and go on the control and engine
// threads, lookups on the engine thread: one mutex, held for a map lookup.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>

namespace plexus::transports {

class SendableMemory : public std::enable_shared_from_this<SendableMemory> {
 public:
  struct Region {
    uint64_t id = 0;
    std::byte* base = nullptr;
    size_t bytes = 0;
  };

  // Withdraws its region when it goes (or is reset); the registry may go first.
  class Announcement {
   public:
    Announcement() = default;
    ~Announcement() { reset(); }
    Announcement(Announcement&& other) noexcept;
    Announcement& operator=(Announcement&& other) noexcept;
    Announcement(const Announcement&) = delete;
    Announcement& operator=(const Announcement&) = delete;
    void reset();
    uint64_t id() const { return id_; }

   private:
    friend class SendableMemory;
    Announcement(std::weak_ptr<SendableMemory> registry, uint64_t id)
        : registry_(std::move(registry)), id_(id) {}
    std::weak_ptr<SendableMemory> registry_;
    uint64_t id_ = 0;
  };

  // Made with std::make_shared (announcements hold it weakly).
  SendableMemory() = default;
  SendableMemory(const SendableMemory&) = delete;
  SendableMemory& operator=(const SendableMemory&) = delete;

  // `memory` stays mapped until the announcement is withdrawn. Empty memory announces
  // nothing (an empty announcement).
  Announcement announce(std::span<std::byte> memory);
  // The announced region holding all of [data, data + bytes), if one does.
  std::optional<Region> find(const std::byte* data, size_t bytes) const;
  bool holds(uint64_t id) const;
  // How many announcements were ever withdrawn: when it moves, cached ids may be stale.
  uint64_t withdrawals() const;
  size_t regions() const;

 private:
  void withdraw(uint64_t id);

  mutable std::mutex mutex_;
  std::map<uintptr_t, Region> by_base_;  // regions never overlap: each is its own mapping
  uint64_t next_id_ = 1;
  // Read on every event of every RDMA path: an atomic, no lock.
  std::atomic<uint64_t> withdrawals_{0};
};

}  // namespace plexus::transports
