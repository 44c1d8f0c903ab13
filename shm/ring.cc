#include "shm/ring.h"

#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>

namespace plexus::shm {
namespace {

size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

struct Offsets {
  uint64_t sq;
  uint64_t cq;
  uint64_t total;
};

Offsets layout(uint32_t sq_entries, uint32_t cq_entries) {
  Offsets o{};
  o.sq = round_up(sizeof(RingHeader), kCacheLine);
  o.cq = round_up(o.sq + uint64_t{sq_entries} * sizeof(SubmissionEntry), kCacheLine);
  o.total = round_up(o.cq + uint64_t{cq_entries} * sizeof(CompletionEntry), 4096);
  return o;
}

}  // namespace

size_t ring_bytes(uint32_t sq_entries, uint32_t cq_entries) {
  return layout(sq_entries, cq_entries).total;
}

RingMemory RingMemory::create(uint32_t sq_entries, uint32_t cq_entries) {
  if (!is_power_of_two(sq_entries) || !is_power_of_two(cq_entries) || sq_entries > (1u << 16) ||
      cq_entries > (1u << 16)) {
    throw std::invalid_argument("ring entry counts must be powers of two up to 65536");
  }
  Offsets o = layout(sq_entries, cq_entries);
  RingMemory ring;
  ring.fd_ = create_sealed_memfd("plexus-rings", o.total);
  ring.mapping_ = map_shared(ring.fd_.get(), o.total);
  auto* header = new (ring.mapping_.data()) RingHeader{};
  header->magic = kRingMagic;
  header->version = kRingLayoutVersion;
  header->sq_entries = sq_entries;
  header->cq_entries = cq_entries;
  header->sq_offset = o.sq;
  header->cq_offset = o.cq;
  header->total_bytes = o.total;
  ring.sq_entries_ = sq_entries;
  ring.cq_entries_ = cq_entries;
  ring.sq_offset_ = o.sq;
  ring.cq_offset_ = o.cq;
  return ring;
}

RingMemory RingMemory::attach(common::UniqueFd fd) {
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || st.st_size < static_cast<off_t>(sizeof(RingHeader))) {
    throw std::runtime_error("ring memfd from the daemon is too small or unreadable");
  }
  RingMemory ring;
  ring.mapping_ = map_shared(fd.get(), static_cast<size_t>(st.st_size));
  ring.fd_ = std::move(fd);
  const RingHeader* h = ring.header();
  if (h->magic != kRingMagic || h->version != kRingLayoutVersion) {
    throw std::runtime_error("ring memfd has magic/version " + std::to_string(h->magic) + "/" +
                             std::to_string(h->version) + ", expected layout version " +
                             std::to_string(kRingLayoutVersion));
  }
  Offsets o = layout(h->sq_entries, h->cq_entries);
  if (!is_power_of_two(h->sq_entries) || !is_power_of_two(h->cq_entries) || o.sq != h->sq_offset ||
      o.cq != h->cq_offset || o.total > ring.mapping_.size()) {
    throw std::runtime_error("ring memfd header is inconsistent with its size");
  }
  ring.sq_entries_ = h->sq_entries;
  ring.cq_entries_ = h->cq_entries;
  ring.sq_offset_ = o.sq;
  ring.cq_offset_ = o.cq;
  return ring;
}

SubmissionEntry* RingMemory::sq() const {
  return reinterpret_cast<SubmissionEntry*>(mapping_.data() + sq_offset_);
}

CompletionEntry* RingMemory::cq() const {
  return reinterpret_cast<CompletionEntry*>(mapping_.data() + cq_offset_);
}

void signal_eventfd(int eventfd) {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(eventfd, &one, sizeof(one));
}

void drain_eventfd(int eventfd) {
  uint64_t value;
  [[maybe_unused]] ssize_t n = ::read(eventfd, &value, sizeof(value));
}

DaemonRingEnd::DaemonRingEnd(const RingMemory& ring)
    : header_(ring.header()),
      sq_(ring.sq()),
      cq_(ring.cq()),
      sq_mask_(ring.sq_entries() - 1),
      cq_mask_(ring.cq_entries() - 1),
      sq_entries_(ring.sq_entries()),
      cq_entries_(ring.cq_entries()) {}

uint32_t DaemonRingEnd::consume(SubmissionEntry* out, uint32_t max) {
  if (corrupt()) return 0;
  uint32_t tail = header_->sq_tail.value.load(std::memory_order_acquire);
  uint32_t available = tail - sq_head_;
  if (available > sq_entries_) {
    corruption_ = "submission queue tail " + std::to_string(tail) + " is " +
                  std::to_string(available) + " entries past head " + std::to_string(sq_head_) +
                  " in a ring of " + std::to_string(sq_entries_);
    return 0;
  }
  uint32_t n = available < max ? available : max;
  for (uint32_t i = 0; i < n; ++i) {
    std::memcpy(&out[i], &sq_[(sq_head_ + i) & sq_mask_], sizeof(SubmissionEntry));
  }
  if (n > 0) {
    sq_head_ += n;
    header_->sq_head.value.store(sq_head_, std::memory_order_release);
  }
  return n;
}

uint32_t DaemonRingEnd::completion_space() {
  if (corrupt()) return 0;
  uint32_t head = header_->cq_head.value.load(std::memory_order_acquire);
  uint32_t used = cq_tail_ - head;
  if (used > cq_entries_) {
    corruption_ = "completion queue head " + std::to_string(head) + " is not within " +
                  std::to_string(cq_entries_) + " entries behind tail " + std::to_string(cq_tail_);
    return 0;
  }
  return cq_entries_ - used;
}

void DaemonRingEnd::post(const CompletionEntry& entry) {
  size_t used =
      kCompletionHeaderBytes + std::min<size_t>(entry.message_len, kCompletionMessageBytes);
  std::memcpy(&cq_[cq_tail_ & cq_mask_], &entry, used);
  ++cq_tail_;
}

bool DaemonRingEnd::publish() {
  if (cq_published_ == cq_tail_) return false;
  cq_published_ = cq_tail_;
  header_->cq_tail.value.store(cq_tail_, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return header_->cq_wakeup.need_wakeup.load(std::memory_order_relaxed) != 0;
}

void DaemonRingEnd::announce_park() {
  header_->sq_wakeup.need_wakeup.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

bool DaemonRingEnd::prepare_park() {
  announce_park();
  if (header_->sq_tail.value.load(std::memory_order_acquire) != sq_head_) {
    finish_park();
    return true;
  }
  return false;
}

void DaemonRingEnd::finish_park() {
  header_->sq_wakeup.need_wakeup.store(0, std::memory_order_relaxed);
}

ClientRingEnd::ClientRingEnd(const RingMemory& ring)
    : header_(ring.header()),
      sq_(ring.sq()),
      cq_(ring.cq()),
      sq_mask_(ring.sq_entries() - 1),
      cq_mask_(ring.cq_entries() - 1),
      sq_entries_(ring.sq_entries()) {}

uint32_t ClientRingEnd::submission_space() const {
  uint32_t head = header_->sq_head.value.load(std::memory_order_acquire);
  return sq_entries_ - (sq_tail_ - head);
}

void ClientRingEnd::stage(const SubmissionEntry& entry) {
  std::memcpy(&sq_[sq_tail_ & sq_mask_], &entry, sizeof(entry));
  ++sq_tail_;
}

bool ClientRingEnd::publish() {
  if (sq_published_ == sq_tail_) return false;
  sq_published_ = sq_tail_;
  header_->sq_tail.value.store(sq_tail_, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return header_->sq_wakeup.need_wakeup.load(std::memory_order_relaxed) != 0;
}

bool ClientRingEnd::poll_completion(CompletionEntry* out) {
  uint32_t tail = header_->cq_tail.value.load(std::memory_order_acquire);
  if (tail == cq_head_) return false;
  const CompletionEntry& slot = cq_[cq_head_ & cq_mask_];
  std::memcpy(out, &slot, kCompletionHeaderBytes);
  out->message_len = std::min<uint32_t>(out->message_len, kCompletionMessageBytes);
  std::memcpy(out->message, slot.message, out->message_len);
  ++cq_head_;
  header_->cq_head.value.store(cq_head_, std::memory_order_release);
  return true;
}

bool ClientRingEnd::prepare_park() {
  header_->cq_wakeup.need_wakeup.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (header_->cq_tail.value.load(std::memory_order_acquire) != cq_head_) {
    finish_park();
    return true;
  }
  return false;
}

void ClientRingEnd::finish_park() {
  header_->cq_wakeup.need_wakeup.store(0, std::memory_order_relaxed);
}

bool ClientRingEnd::daemon_parked_with_backlog() const {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return header_->sq_wakeup.need_wakeup.load(std::memory_order_relaxed) != 0 &&
         header_->sq_head.value.load(std::memory_order_acquire) != sq_published_;
}

}  // namespace plexus::shm
