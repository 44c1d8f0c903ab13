#include "daemon/gpu/staged_op.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace plexus::daemon::gpu {
namespace {

bool on_gpu(const shm::BufferSpan& span) {
  return span.bytes > 0 && span.region != shm::kHostPoolRegion;
}

// Overlapping spans of one allocation (the in-place forms) share one host copy.
bool shares_one_copy(const shm::BufferSpan& s, const shm::BufferSpan& r) {
  return on_gpu(s) && on_gpu(r) && s.region == r.region && s.offset < r.offset + r.bytes &&
         r.offset < s.offset + s.bytes;
}

// Whether [a, a + a_bytes) and [b, b + b_bytes) of one allocation overlap.
bool overlap(uint64_t a, uint64_t a_bytes, uint64_t b, uint64_t b_bytes) {
  return a < b + b_bytes && b < a + a_bytes;
}

}  // namespace

common::Result<std::unique_ptr<StagedOp>> StagedOp::direct(const GpuRegions& regions,
                                                           const shm::ValidatedEntry& entry) {
  auto op = std::unique_ptr<StagedOp>(new StagedOp);
  op->direct_ = true;
  const shm::BufferSpan& s = entry.send;
  const shm::BufferSpan& r = entry.recv;
  if (on_gpu(s)) {
    op->send_mapping_ = regions.mapping(s.region);
    if (!op->send_mapping_) {
      // Validation checked: a daemon bug.
      return common::fail("a GPU region that is not registered");
    }
    // What it reads, for the order of the session's ops (reads_result_of).
    op->read_region_ = s.region;
    op->read_offset_ = s.offset;
    op->read_bytes_ = s.bytes;
  }
  if (on_gpu(r)) {
    op->recv_mapping_ = regions.mapping(r.region);
    if (!op->recv_mapping_) return common::fail("a GPU region that is not registered");
    op->recv_region_ = r.region;
    op->recv_offset_ = r.offset;
    op->recv_bytes_ = r.bytes;
  }
  return op;
}

uint64_t StagedOp::host_bytes_for(const shm::ValidatedEntry& entry) {
  const shm::BufferSpan& s = entry.send;
  const shm::BufferSpan& r = entry.recv;
  if (shares_one_copy(s, r)) {
    return std::max(s.offset + s.bytes, r.offset + r.bytes) - std::min(s.offset, r.offset);
  }
  return (on_gpu(s) ? s.bytes : 0) + (on_gpu(r) ? r.bytes : 0);
}

common::Result<std::unique_ptr<StagedOp>> StagedOp::stage(DeviceMemory& device,
                                                          const GpuRegions& regions,
                                                          const shm::ValidatedEntry& entry,
                                                          const std::byte** send,
                                                          std::byte** recv) {
  auto op = std::unique_ptr<StagedOp>(new StagedOp);
  const shm::BufferSpan& s = entry.send;
  const shm::BufferSpan& r = entry.recv;
  if (on_gpu(s)) op->send_mapping_ = regions.mapping(s.region);
  if (on_gpu(r)) op->recv_mapping_ = regions.mapping(r.region);
  if ((on_gpu(s) && !op->send_mapping_) || (on_gpu(r) && !op->recv_mapping_)) {
    // Validation checked: a daemon bug.
    return common::fail("a GPU region that is not registered");
  }
  std::string error = op->lay_out(device, entry, send, recv);
  if (!error.empty()) return common::fail(std::move(error));
  return op;
}

std::string StagedOp::lay_out(DeviceMemory& device, const shm::ValidatedEntry& entry,
                              const std::byte** send, std::byte** recv) {
  const shm::BufferSpan& s = entry.send;
  const shm::BufferSpan& r = entry.recv;
  const bool send_gpu = on_gpu(s);
  const bool recv_gpu = on_gpu(r);
  const bool shared = shares_one_copy(s, r);
  // One host buffer: the union of overlapping spans, else the send part then the recv part.
  const uint64_t first = shared ? std::min(s.offset, r.offset) : 0;
  std::string error = host_.allocate(device, host_bytes_for(entry));
  if (!error.empty()) return error;
  std::byte* host = host_.data();
  if (shared) {
    read_offset_ = first;
    read_bytes_ = host_.bytes();
    send_in_read_ = s.offset - first;
    *send = host + (s.offset - first);
    *recv = host + (r.offset - first);
  } else {
    if (send_gpu) {
      read_offset_ = s.offset;
      read_bytes_ = s.bytes;
      *send = host;
    }
    if (recv_gpu) *recv = host + (send_gpu ? s.bytes : 0);
  }
  if (send_gpu) {
    read_region_ = s.region;
    read_host_ = host;
  }
  if (recv_gpu) {
    recv_region_ = r.region;
    recv_offset_ = r.offset;
    recv_bytes_ = r.bytes;
    copy_back_.aim(recv_mapping_, r.offset, *recv, r.bytes);
  }
  return {};
}

std::string StagedOp::stage_now(DeviceMemory& device, const shm::ValidatedEntry& entry,
                                const std::byte** send, std::byte** recv, StagingBudget budget) {
  if (!direct_) return "a daemon bug: staging an op that is staged already";
  // Its input as it was when it was called: the copy aside if a later op has since
  // written there, else the device now.
  std::string error = snapshot_.wait();
  if (!error.empty()) return "copying its input to the host: " + error;
  direct_ = false;
  matched_ = true;
  error = lay_out(device, entry, send, recv);
  if (error.empty()) {
    charge_to(std::move(budget));
    input_.mark_in();
    if (entry.send.bytes > 0 && send_mapping_) {
      if (snapshot_.taken()) {
        std::memcpy(const_cast<std::byte*>(*send), snapshot_.host(), entry.send.bytes);
      } else {
        error = device.to_host(read_host_, *send_mapping_, read_offset_, read_bytes_);
        if (!error.empty()) error = "copying its input to the host: " + error;
      }
    }
  }
  snapshot_.release();  // laid out afresh: the copy aside's bytes, given back
  return error;
}

bool StagedOp::reads_result_of(const StagedOp& earlier) const {
  return read_bytes_ > 0 && earlier.recv_mapping_ && !earlier.copy_back_.written() &&
         earlier.recv_region_ == read_region_ &&
         overlap(read_offset_, read_bytes_, earlier.recv_offset_, earlier.recv_bytes_);
}

std::string StagedOp::snapshot_input(DeviceMemory& device, StagingBudget budget) {
  if (snapshot_needs() == 0) return {};
  return snapshot_.take(device, *send_mapping_, read_offset_, read_bytes_, std::move(budget));
}

bool StagedOp::input_safe_to_overwrite() {
  if (!direct_ || read_bytes_ == 0) return true;
  if (matched_ || !snapshot_.taken()) return false;  // read by a copy to come, or running
  return snapshot_.in();
}

bool StagedOp::overwrites_result_of(const StagedOp& earlier) const {
  return recv_mapping_ && recv_bytes_ > 0 && earlier.recv_mapping_ &&
         !earlier.copy_back_.written() && earlier.recv_region_ == recv_region_ &&
         overlap(recv_offset_, recv_bytes_, earlier.recv_offset_, earlier.recv_bytes_);
}

bool StagedOp::overwrites_input_of(const StagedOp& earlier) const {
  return earlier.direct_ && earlier.read_bytes_ > 0 && recv_mapping_ && recv_bytes_ > 0 &&
         earlier.read_region_ == recv_region_ &&
         overlap(recv_offset_, recv_bytes_, earlier.read_offset_, earlier.read_bytes_);
}

bool StagedOp::overwrites_arriving_input_of(StagedOp& earlier) const {
  if (earlier.direct_ || !recv_mapping_ || recv_bytes_ == 0 ||
      earlier.read_region_ != recv_region_) {
    return false;
  }
  return earlier.input_.arriving() &&
         overlap(recv_offset_, recv_bytes_, earlier.read_offset_, earlier.read_bytes_);
}

common::Result<bool> StagedOp::input_ready() {
  common::Result<bool> ready = input_.ready();
  if (!ready.ok() || !*ready) return ready;
  // A direct op's only copy is its copy aside: one that failed is this op's error.
  if (direct_ && !snapshot_.error().empty()) return common::fail(snapshot_.error());
  return true;
}

void StagedOp::start_input(DeviceMemory& device) {
  // A direct op has no host copy: its input is read where it lies, once matched.
  input_.start(device, read_host_, send_mapping_.get(), read_offset_, direct_ ? 0 : read_bytes_);
}

}  // namespace plexus::daemon::gpu
