#include "transports/rdma/frame_transfer.h"

#include <arpa/inet.h>

#include <array>
#include <cstring>
#include <utility>

#include "transports/rdma/errno_text.h"

namespace plexus::transports::rdma {

FrameTransfer::FrameTransfer(PathVerbs& verbs, const RdmaSettings& settings,
                             const wire::DataFrameLimits& limits, Hooks hooks)
    : verbs_(verbs),
      settings_(settings),
      limits_(limits),
      hooks_(std::move(hooks)),
      bounce_space_(settings.bounce_bytes),
      window_(1, settings.send_depth),
      local_ring_(settings.ring_bytes) {}

bool FrameTransfer::post_receives() {
  for (uint64_t slot = 0; slot < receive_slots(settings_); ++slot) {
    if (!post_receive(slot)) return false;
  }
  return true;
}

void FrameTransfer::connect(const Hello& peer) {
  peer_ring_address_ = peer.ring_address;
  peer_ring_rkey_ = peer.ring_rkey;
  remote_ring_.emplace(peer.ring_bytes);
  // One of the peer's receives is kept for this side's credit messages; of the send queue,
  // one entry for credit and one for a liveness probe.
  window_ = SendWindow(peer.receive_depth - 1, settings_.send_depth - 2);
}

bool FrameTransfer::start() {
  if (state_ == State::kStopped) return false;  // the path failed first: it stays failed
  state_ = State::kReady;
  pump();
  // The peer's first frames may have landed before its ready byte (RDMA and the socket are
  // different roads): the credit they earned could not go before now, and the peer may be
  // waiting for it.
  return send_credit(true);
}

void FrameTransfer::queue(const wire::DataFrameHeader& header, std::span<const std::byte> payload,
                          uint64_t token) {
  pending_.push_back(Pending{header, payload, token});
  pending_bytes_ += wire::kDataFrameHeaderBytes + payload.size();
  pump();
}

void FrameTransfer::queue_urgent(const wire::DataFrameHeader& header, uint64_t token) {
  pending_.push_front(Pending{header, {}, token});
  pending_bytes_ += wire::kDataFrameHeaderBytes;
  pump();
}

bool FrameTransfer::post_receive(uint64_t slot) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uint64_t>(verbs_.slots.data() + slot * kReceiveSlotBytes);
  sge.length = kReceiveSlotBytes;
  sge.lkey = verbs_.slots_mr->lkey;
  ibv_recv_wr wr{};
  wr.wr_id = wr_id(kReceive, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(verbs_.qp.get(), &wr, &bad); rc != 0) {
    return hooks_.fail(errno_text("ibv_post_recv", rc));
  }
  return true;
}

bool FrameTransfer::take_completions(Clock::time_point* heard) {
  ibv_cq* cq = verbs_.cq.get();
  ibv_cq* event_cq = nullptr;
  void* context = nullptr;
  unsigned events = 0;
  while (ibv_get_cq_event(verbs_.channel.get(), &event_cq, &context) == 0) ++events;
  if (events > 0) {
    ibv_ack_cq_events(cq, events);
    if (ibv_req_notify_cq(cq, 0) != 0) return hooks_.fail("ibv_req_notify_cq failed");
  }
  // After re-arming, everything already in the queue is taken here: a completion that came
  // before the arm raises no event, so none may be left for later.
  ibv_wc wcs[32];
  for (;;) {
    const int n = ibv_poll_cq(cq, 32, wcs);
    if (n < 0) return hooks_.fail("ibv_poll_cq failed");
    if (n == 0) break;
    *heard = Clock::now();
    for (int i = 0; i < n; ++i) {
      if (!handle_completion(wcs[i])) return false;
    }
  }
  if (!send_credit(true)) return false;
  pump();
  return state_ != State::kStopped;
}

bool FrameTransfer::handle_completion(const ibv_wc& wc) {
  const Completion c =
      classify_completion(wc, receive_slots(settings_), verbs_.slots.data(), kRingAlign);
  switch (c.kind) {
    case Completion::Kind::kFailed:
      return hooks_.fail(c.error);
    case Completion::Kind::kFrameWritten: {
      const auto done = window_.completed();
      if (!done.ok()) return hooks_.fail(done.error());
      bounce_space_.on_credit(done->bounce_end);
      if (verbs_.pool_windows) verbs_.pool_windows->write_completed();  // its window may go now
      posted_bytes_ -= wire::kDataFrameHeaderBytes + done->payload_bytes;
      if (hooks_.on_sent) hooks_.on_sent(done->token, done->payload_bytes);
      return state_ != State::kStopped;
    }
    case Completion::Kind::kCreditSent:
      credit_in_flight_ = false;
      return true;
    case Completion::Kind::kProbeWritten:
      probe_in_flight_ = false;
      return true;
    case Completion::Kind::kFrameArrived:
      return handle_frame(c);
    case Completion::Kind::kCreditArrived:
      if (!remote_ring_) return hooks_.fail("credit from the peer before its setup");
      if (std::string why = remote_ring_->on_credit(c.credit.ring_consumed); !why.empty()) {
        return hooks_.fail(why);
      }
      if (std::string why = window_.peer_consumed(c.credit.frames_consumed); !why.empty()) {
        return hooks_.fail(why);
      }
      return post_receive(c.slot);
  }
  return hooks_.fail("a completion of no known kind");  // unreachable: every kind returns above
}

bool FrameTransfer::handle_frame(const Completion& c) {
  const uint64_t offset = c.ring_offset;
  if (std::string why = local_ring_.check_start(offset); !why.empty()) return hooks_.fail(why);
  const std::span<const std::byte, wire::kDataFrameHeaderBytes> header_bytes(
      verbs_.ring.data() + offset, wire::kDataFrameHeaderBytes);
  const wire::DecodedHeader decoded = wire::decode_data_frame_header(header_bytes, limits_);
  if (!decoded.ok()) return hooks_.fail("a frame with a bad header: " + decoded.error);
  const uint64_t bytes = wire::kDataFrameHeaderBytes + decoded.header.length;
  if (c.bytes != bytes) {
    return hooks_.fail("a frame write of " + std::to_string(c.bytes) + " bytes whose header says " +
                       std::to_string(bytes));
  }
  if (std::string why = local_ring_.consume(offset, bytes); !why.empty()) return hooks_.fail(why);
  bytes_received_ += bytes;
  ++frames_consumed_;
  // The frame stays in the ring until credit for it goes back, after this call.
  std::string refused = hooks_.on_frame(
      decoded.header,
      std::span<const std::byte>(verbs_.ring.data() + offset + wire::kDataFrameHeaderBytes,
                                 decoded.header.length));
  if (!refused.empty()) return hooks_.fail(refused);
  if (!post_receive(c.slot)) return false;
  return send_credit(false);
}

bool FrameTransfer::send_credit(bool force) {
  if (credit_in_flight_ || state_ != State::kReady) return true;
  const bool owed = local_ring_.consumed() != credit_reported_bytes_ ||
                    frames_consumed_ != credit_reported_frames_;
  if (!owed || (!force && !local_ring_.credit_due(credit_reported_bytes_))) return true;
  encode_credit(Credit{local_ring_.consumed(), frames_consumed_}, verbs_.credit.data());
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uint64_t>(verbs_.credit.data());
  sge.length = kCreditBytes;
  sge.lkey = verbs_.credit_mr->lkey;
  ibv_send_wr wr{};
  wr.wr_id = wr_id(kCreditSend, 0);
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(verbs_.qp.get(), &wr, &bad); rc != 0) {
    return hooks_.fail(errno_text("posting credit", rc));
  }
  credit_in_flight_ = true;
  credit_reported_bytes_ = local_ring_.consumed();
  credit_reported_frames_ = frames_consumed_;
  return true;
}

void FrameTransfer::pump() {
  pump_frames();
  probe_if_stalled();
}

// Frames waiting while nothing is posted (the peer's ring full, its credit not coming)
// would leave a dead peer unnoticed: no work request, no retries to run out. A zero-length
// RDMA write needs no ring space and no receive, but the peer's device must acknowledge
// it, so at most every 100 ms (as frames keep being queued: the channel's heartbeats) one
// goes, and a peer that is gone fails the path when its retries run out.
void FrameTransfer::probe_if_stalled() {
  if (state_ != State::kReady || pending_.empty() || window_.outstanding() != 0 ||
      probe_in_flight_ || Clock::now() - last_probe_ < std::chrono::milliseconds(100)) {
    return;
  }
  ibv_send_wr wr{};
  wr.wr_id = wr_id(kProbeWrite, 0);
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.num_sge = 0;
  wr.wr.rdma.remote_addr = peer_ring_address_;
  wr.wr.rdma.rkey = peer_ring_rkey_;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(verbs_.qp.get(), &wr, &bad); rc != 0) {
    hooks_.fail(errno_text("posting a liveness probe", rc));
    return;
  }
  probe_in_flight_ = true;
  last_probe_ = Clock::now();
}

void FrameTransfer::pump_frames() {
  while (state_ == State::kReady && !pending_.empty() && window_.can_post()) {
    const Pending& frame = pending_.front();
    const uint64_t bytes = wire::kDataFrameHeaderBytes + frame.payload.size();
    // At least one write is always allowed, whatever the limit.
    if (posted_limit_ != 0 && posted_bytes_ != 0 && posted_bytes_ + bytes > posted_limit_) return;
    if (bytes > remote_ring_->size() || bytes > bounce_space_.size()) {
      hooks_.fail("a frame of " + std::to_string(bytes) + " bytes is larger than the rings");
      return;
    }
    const auto slot = remote_ring_->place(bytes);
    if (!slot) return;  // the peer's ring is full: its credit brings us back
    // In place: only the header is staged, the payload is the second scatter entry.
    // Withdrawn pools' windows are dropped in RdmaPath::on_readable.
    MrCache::Pin pin =
        verbs_.pool_windows ? verbs_.pool_windows->pin(frame.payload) : MrCache::Pin{};
    const uint64_t staged = pin ? wire::kDataFrameHeaderBytes : bytes;
    const auto bounce = bounce_space_.place(staged);
    if (!bounce) return;  // writes in flight hold the bounce ring: their completions do
    std::byte* out = verbs_.bounce.data() + bounce->offset;
    wire::encode_data_frame_header(frame.header, std::span<std::byte, wire::kDataFrameHeaderBytes>(
                                                     out, wire::kDataFrameHeaderBytes));
    if (!pin && !frame.payload.empty()) {
      std::memcpy(out + wire::kDataFrameHeaderBytes, frame.payload.data(), frame.payload.size());
    }
    std::array<ibv_sge, 2> sge{};
    sge[0].addr = reinterpret_cast<uint64_t>(out);
    sge[0].length = static_cast<uint32_t>(staged);
    sge[0].lkey = verbs_.bounce_mr->lkey;
    if (pin) {
      sge[1].addr = reinterpret_cast<uint64_t>(frame.payload.data());
      sge[1].length = static_cast<uint32_t>(frame.payload.size());
      sge[1].lkey = pin.keys().lkey;
    }
    ibv_send_wr wr{};
    wr.wr_id = wr_id(kFrameWrite, 0);
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(static_cast<uint32_t>(slot->offset / kRingAlign));
    wr.sg_list = sge.data();
    wr.num_sge = pin ? 2 : 1;
    wr.wr.rdma.remote_addr = peer_ring_address_ + slot->offset;
    wr.wr.rdma.rkey = peer_ring_rkey_;
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(verbs_.qp.get(), &wr, &bad); rc != 0) {
      hooks_.fail(errno_text("posting a frame", rc));
      return;
    }
    remote_ring_->commit(*slot, bytes);
    bounce_space_.commit(*bounce, staged);
    window_.posted(frame.token, frame.payload.size(), bounce_space_.written());
    if (pin) in_place_bytes_ += frame.payload.size();
    if (verbs_.pool_windows) verbs_.pool_windows->posted(std::move(pin));
    pending_bytes_ -= bytes;
    posted_bytes_ += bytes;
    bytes_sent_ += bytes;
    pending_.pop_front();
  }
}

}  // namespace plexus::transports::rdma
