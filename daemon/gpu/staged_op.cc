#include "daemon/gpu/staged_op.h"

#include <algorithm>
#include <cstring>

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

}  // namespace

std::unique_ptr<StagedOp> StagedOp::direct(const GpuRegions& regions,
                                           const shm::ValidatedEntry& entry, std::string* error) {
  auto op = std::unique_ptr<StagedOp>(new StagedOp);
  op->direct_ = true;
  const shm::BufferSpan& s = entry.send;
  const shm::BufferSpan& r = entry.recv;
  if (on_gpu(s)) {
    op->send_mapping_ = regions.mapping(s.region);
    if (!op->send_mapping_) {
      *error = "a GPU region that is not registered";  // validation checked: a daemon bug
      return nullptr;
    }
    // What it reads, for the order of the session's ops (reads_result_of).
    op->read_region_ = s.region;
    op->read_offset_ = s.offset;
    op->read_bytes_ = s.bytes;
  }
  if (on_gpu(r)) {
    op->recv_mapping_ = regions.mapping(r.region);
    if (!op->recv_mapping_) {
      *error = "a GPU region that is not registered";
      return nullptr;
    }
    op->recv_region_ = r.region;
    op->recv_offset_ = r.offset;
    op->recv_bytes_ = r.bytes;
  }
  return op;
}

std::unique_ptr<CopyInFlight> StagedOp::copy_part(DeviceMemory& device, StagedOp* from,
                                                  const std::byte* from_host, uint64_t from_at,
                                                  StagedOp* to, std::byte* to_host, uint64_t to_at,
                                                  uint64_t bytes) {
  if (from != nullptr) from->matched_ = true;
  if (to != nullptr) to->matched_ = true;
  if (from != nullptr && from->snapshot_ != nullptr) {
    if (from->copy_) {
      // Rare: matched while its snapshot is still coming in; a short wait on a copy engine.
      from->copy_error_ = from->copy_->wait();
      from->copy_.reset();
    }
    if (!from->copy_error_.empty()) {
      return std::make_unique<FinishedCopy>("copying its input to the host: " + from->copy_error_);
    }
    from_host = from->snapshot_;
    from = nullptr;
  }
  const bool from_gpu = from != nullptr && from->send_mapping_;
  const bool to_gpu = to != nullptr && to->recv_mapping_;
  if (bytes == 0) return std::make_unique<FinishedCopy>();
  if (from_gpu && to_gpu) {
    const uint64_t source = from->read_offset_ + from_at;
    const uint64_t target = to->recv_offset_ + to_at;
    if (from->send_mapping_ == to->recv_mapping_ && source == target) {
      return std::make_unique<FinishedCopy>();
    }
    return device.start_device_to_device(*to->recv_mapping_, target, *from->send_mapping_, source,
                                         bytes);
  }
  if (from_gpu) {
    return device.start_to_host(to_host + to_at, *from->send_mapping_, from->read_offset_ + from_at,
                                bytes);
  }
  if (to_gpu) {
    return device.start_to_device(*to->recv_mapping_, to->recv_offset_ + to_at, from_host + from_at,
                                  bytes);
  }
  if (to_host + to_at != from_host + from_at)
    std::memcpy(to_host + to_at, from_host + from_at, bytes);
  return std::make_unique<FinishedCopy>();
}

uint64_t StagedOp::host_bytes_for(const shm::ValidatedEntry& entry) {
  const shm::BufferSpan& s = entry.send;
  const shm::BufferSpan& r = entry.recv;
  if (shares_one_copy(s, r)) {
    return std::max(s.offset + s.bytes, r.offset + r.bytes) - std::min(s.offset, r.offset);
  }
  return (on_gpu(s) ? s.bytes : 0) + (on_gpu(r) ? r.bytes : 0);
}

void StagedOp::charge_to(StagingBudget budget) {
  for (const auto& total : {charged_to_.process, charged_to_.job}) {
    if (total) *total -= staged_bytes_;
  }
  charged_to_ = std::move(budget);
  for (const auto& total : {charged_to_.process, charged_to_.job}) {
    if (total) *total += staged_bytes_;
  }
}

StagedOp::~StagedOp() {
  // The copies first: their destructors wait for them, and the buffer must outlive them.
  copy_.reset();
  input_pieces_.clear();
  copies_back_.clear();
  charge_to({});
}

std::unique_ptr<StagedOp> StagedOp::stage(DeviceMemory& device, const GpuRegions& regions,
                                          const shm::ValidatedEntry& entry, const std::byte** send,
                                          std::byte** recv, std::string* error) {
  auto op = std::unique_ptr<StagedOp>(new StagedOp);
  const shm::BufferSpan& s = entry.send;
  const shm::BufferSpan& r = entry.recv;
  if (on_gpu(s)) op->send_mapping_ = regions.mapping(s.region);
  if (on_gpu(r)) op->recv_mapping_ = regions.mapping(r.region);
  if ((on_gpu(s) && !op->send_mapping_) || (on_gpu(r) && !op->recv_mapping_)) {
    *error = "a GPU region that is not registered";  // validation checked: a daemon bug
    return nullptr;
  }
  if (!op->lay_out(device, entry, send, recv, error)) return nullptr;
  return op;
}

bool StagedOp::lay_out(DeviceMemory& device, const shm::ValidatedEntry& entry,
                       const std::byte** send, std::byte** recv, std::string* error) {
  const shm::BufferSpan& s = entry.send;
  const shm::BufferSpan& r = entry.recv;
  const bool send_gpu = on_gpu(s);
  const bool recv_gpu = on_gpu(r);
  const bool shared = shares_one_copy(s, r);
  // One host buffer: the union of overlapping spans, else the send part then the recv part.
  const uint64_t first = shared ? std::min(s.offset, r.offset) : 0;
  staged_bytes_ = host_bytes_for(entry);
  buffer_ = device.allocate_host(staged_bytes_, error);
  if (!buffer_) return false;
  std::byte* host = buffer_.get();
  if (shared) {
    read_offset_ = first;
    read_bytes_ = staged_bytes_;
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
    recv_host_ = *recv;
  }
  return true;
}

std::string StagedOp::stage_now(DeviceMemory& device, const shm::ValidatedEntry& entry,
                                const std::byte** send, std::byte** recv, StagingBudget budget) {
  if (!direct_) return "a daemon bug: staging an op that is staged already";
  // Its input as it was when it was called: the copy aside if a later op has since
  // written there, else the device now.
  if (copy_) copy_error_ = copy_->wait();
  copy_.reset();
  if (!copy_error_.empty()) return "copying its input to the host: " + copy_error_;
  HostBuffer snapshot = std::move(buffer_);
  const std::byte* snapshot_at = snapshot_;
  charge_to({});  // the copy aside's bytes, given back
  staged_bytes_ = 0;
  direct_ = false;
  matched_ = true;
  snapshot_ = nullptr;
  std::string error;
  if (!lay_out(device, entry, send, recv, &error)) return error;
  charge_to(std::move(budget));
  input_started_ = true;
  if (entry.send.bytes == 0 || !send_mapping_) return {};
  if (snapshot_at != nullptr) {
    std::memcpy(const_cast<std::byte*>(*send), snapshot_at, entry.send.bytes);
    return {};
  }
  error = device.to_host(read_host_, *send_mapping_, read_offset_, read_bytes_);
  return error.empty() ? error : "copying its input to the host: " + error;
}

DeviceSpan StagedOp::device_input() const { return {send_mapping_.get(), read_offset_}; }

DeviceSpan StagedOp::device_output() const { return {recv_mapping_.get(), recv_offset_}; }

bool StagedOp::reads_result_of(const StagedOp& earlier) const {
  return read_bytes_ > 0 && earlier.recv_mapping_ && !earlier.result_written_ &&
         earlier.recv_region_ == read_region_ &&
         read_offset_ < earlier.recv_offset_ + earlier.recv_bytes_ &&
         earlier.recv_offset_ < read_offset_ + read_bytes_;
}

std::string StagedOp::snapshot_input(DeviceMemory& device, StagingBudget budget) {
  if (snapshot_needs() == 0) return {};
  std::string error;
  buffer_ = device.allocate_host(read_bytes_, &error);
  if (!buffer_) return error;
  snapshot_ = buffer_.get();
  staged_bytes_ = read_bytes_;
  charge_to(std::move(budget));
  copy_ = device.start_to_host(snapshot_, *send_mapping_, read_offset_, read_bytes_);
  return {};
}

bool StagedOp::input_safe_to_overwrite() {
  if (!direct_ || read_bytes_ == 0) return true;
  if (matched_ || snapshot_ == nullptr) return false;  // read by a copy to come, or running
  if (copy_) {
    if (!copy_->done(&copy_error_)) return false;
    copy_.reset();
  }
  return true;
}

bool StagedOp::overwrites_result_of(const StagedOp& earlier) const {
  return recv_mapping_ && recv_bytes_ > 0 && earlier.recv_mapping_ && !earlier.result_written_ &&
         earlier.recv_region_ == recv_region_ &&
         recv_offset_ < earlier.recv_offset_ + earlier.recv_bytes_ &&
         earlier.recv_offset_ < recv_offset_ + recv_bytes_;
}

bool StagedOp::overwrites_input_of(const StagedOp& earlier) const {
  return earlier.direct_ && earlier.read_bytes_ > 0 && recv_mapping_ && recv_bytes_ > 0 &&
         earlier.read_region_ == recv_region_ &&
         recv_offset_ < earlier.read_offset_ + earlier.read_bytes_ &&
         earlier.read_offset_ < recv_offset_ + recv_bytes_;
}

bool StagedOp::overwrites_arriving_input_of(StagedOp& earlier) const {
  if (earlier.direct_ || earlier.input_pieces_.empty() || !recv_mapping_ || recv_bytes_ == 0 ||
      earlier.read_region_ != recv_region_) {
    return false;
  }
  earlier.poll_input_pieces();
  return !earlier.input_pieces_.empty() &&
         recv_offset_ < earlier.read_offset_ + earlier.read_bytes_ &&
         earlier.read_offset_ < recv_offset_ + recv_bytes_;
}

void StagedOp::start_input(DeviceMemory& device) {
  input_started_ = true;
  if (direct_) return;
  for (uint64_t at = 0; at < read_bytes_; at += kInputPieceBytes) {
    const uint64_t n = std::min(kInputPieceBytes, read_bytes_ - at);
    input_pieces_.push_back(
        {at + n, device.start_to_host(read_host_ + at, *send_mapping_, read_offset_ + at, n)});
  }
}

void StagedOp::poll_input_pieces() {
  while (!input_pieces_.empty()) {
    std::string piece_error;
    if (!input_pieces_.front().copy->done(&piece_error)) return;
    if (copy_error_.empty()) copy_error_ = piece_error;
    input_in_ = input_pieces_.front().end;
    input_pieces_.pop_front();
  }
}

bool StagedOp::input_ready(std::string* error) {
  if (!input_started_) return false;
  poll_input_pieces();
  if (!input_pieces_.empty()) return false;
  *error = copy_error_;
  return true;
}

bool StagedOp::send_in_through(uint64_t bytes, std::string* error) {
  poll_input_pieces();
  *error = copy_error_;
  if (!error->empty()) return false;
  return !send_mapping_ || input_pieces_.empty() || send_in_read_ + bytes <= input_in_;
}

void StagedOp::start_copy_back_part(DeviceMemory& device, uint64_t offset, uint64_t bytes) {
  if (!recv_mapping_ || bytes == 0) return;
  copies_back_.push_back(
      device.start_to_device(*recv_mapping_, recv_offset_ + offset, recv_host_ + offset, bytes));
  copied_back_early_ += bytes;
}

void StagedOp::start_copy_back(DeviceMemory& device) {
  copy_error_.clear();
  if (recv_mapping_ && copied_back_early_ < recv_bytes_)
    copy_ = device.start_to_device(*recv_mapping_, recv_offset_, recv_host_, recv_bytes_);
}

bool StagedOp::copied_back(std::string* error) {
  while (!copies_back_.empty()) {
    std::string part_error;
    if (!copies_back_.back()->done(&part_error)) return false;
    if (copy_error_.empty()) copy_error_ = part_error;
    copies_back_.pop_back();
  }
  if (copy_) {
    std::string last_error;
    if (!copy_->done(&last_error)) return false;
    if (copy_error_.empty()) copy_error_ = last_error;
    copy_.reset();
  }
  result_written_ = true;
  *error = copy_error_;
  return true;
}

std::string StagedOp::copy_back(DeviceMemory& device) {
  start_copy_back(device);
  for (auto& part : copies_back_) {
    std::string part_error = part->wait();
    if (copy_error_.empty()) copy_error_ = part_error;
  }
  copies_back_.clear();
  if (copy_) {
    std::string last_error = copy_->wait();
    if (copy_error_.empty()) copy_error_ = last_error;
  }
  copy_.reset();
  result_written_ = true;
  return copy_error_;
}

}  // namespace plexus::daemon::gpu
