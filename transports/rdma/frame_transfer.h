// Frames both ways over one RDMA path's connected queue pair (rdma_path.cc): posting each
// queued frame by RDMA WRITE WITH IMMEDIATE into the peer's ring (its header staged in the
// bounce ring, its payload copied there too or sent in place from a pool window), the
// zero-length liveness probe while frames wait and nothing is posted, the credit SENDs that
// hand this side's ring and receives back, the receives themselves, and every completion:
// a frame written releases its bounce space, window pin and token (on_sent), a frame arrived
// is checked against the ring's rule and handed to on_frame, the peer's credit frees its ring.
//
// Owns the frames waiting, the sender's view of the peer's ring and of the bounce ring, the
// send window, the receiver's ring and the credit it owes, and the byte counts; posts on the
// path's verbs objects (path_verbs.h), which it does not own. Nothing goes before start() (the
// peer's queue pair can receive) or after stop() (the path failed). A failure is reported
// through the fail hook (the path's own fail, which calls stop()), then the call returns
// false. Called only by the thread that runs the path (the links' event loop); the hooks may
// call queue() again.
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "transports/rdma/local_ring.h"
#include "transports/rdma/path_verbs.h"
#include "transports/rdma/remote_ring.h"
#include "transports/rdma/send_window.h"
#include "transports/rdma/work_completion.h"
#include "transports/wire/data_frame.h"

namespace plexus::transports::rdma {

class FrameTransfer {
 public:
  using Clock = std::chrono::steady_clock;
  struct Hooks {
    // DataPath::Callbacks' on_frame and on_sent.
    std::function<std::string(const wire::DataFrameHeader&, std::span<const std::byte>)> on_frame;
    std::function<void(uint64_t token, size_t payload_bytes)> on_sent;
    // Fails the path naming why; returns false.
    std::function<bool(std::string why)> fail;
  };
  FrameTransfer(PathVerbs& verbs, const RdmaSettings& settings, const wire::DataFrameLimits& limits,
                Hooks hooks);

  // Every receive slot posted, at set-up, before the queue pair can receive.
  bool post_receives();
  // The peer's setup message is in: where its ring is, and how many of its receives and of
  // this side's send queue frames may hold.
  void connect(const Hello& peer);
  // The peer's queue pair can receive: frames waiting go, and the credit owed.
  bool start();
  // The path failed: nothing more is posted.
  void stop() { state_ = State::kStopped; }

  void queue(const wire::DataFrameHeader& header, std::span<const std::byte> payload,
             uint64_t token);
  void queue_urgent(const wire::DataFrameHeader& header, uint64_t token);
  // Takes the completion channel's events and every completion in the queue; *heard is set
  // to now when there were any.
  bool take_completions(Clock::time_point* heard);

  // Posted writes not yet complete are this path's send queue: kept to about `bytes` (0: the
  // rings and credits alone).
  void limit_queue(uint64_t bytes) { posted_limit_ = bytes; }
  uint64_t backlog_bytes() const { return pending_bytes_ + posted_bytes_; }
  uint64_t unsent_bytes() const { return pending_bytes_; }
  uint64_t bytes_sent() const { return bytes_sent_; }
  uint64_t bytes_received() const { return bytes_received_; }
  uint64_t in_place_bytes() const { return in_place_bytes_; }

 private:
  enum class State { kSetup, kReady, kStopped };
  struct Pending {
    wire::DataFrameHeader header;
    std::span<const std::byte> payload;
    uint64_t token;
  };

  bool post_receive(uint64_t slot);
  bool handle_completion(const ibv_wc& wc);
  bool handle_frame(const Completion& completion);
  bool send_credit(bool force);
  void pump();
  void pump_frames();
  void probe_if_stalled();

  PathVerbs& verbs_;
  RdmaSettings settings_;
  wire::DataFrameLimits limits_;
  Hooks hooks_;
  State state_ = State::kSetup;

  // Sending.
  uint64_t peer_ring_address_ = 0;
  uint32_t peer_ring_rkey_ = 0;
  std::optional<RemoteRing> remote_ring_;  // the peer's ring, once its hello is in
  RemoteRing bounce_space_;                // the bounce ring, handed back as writes complete
  SendWindow window_;                      // sized once the peer's receive depth is known
  bool probe_in_flight_ = false;
  Clock::time_point last_probe_{};
  std::deque<Pending> pending_;
  uint64_t pending_bytes_ = 0;
  uint64_t posted_bytes_ = 0;
  uint64_t posted_limit_ = 0;
  uint64_t bytes_sent_ = 0;
  uint64_t in_place_bytes_ = 0;

  // Receiving.
  LocalRing local_ring_;
  uint64_t frames_consumed_ = 0;
  uint64_t credit_reported_bytes_ = 0;
  uint64_t credit_reported_frames_ = 0;
  bool credit_in_flight_ = false;
  uint64_t bytes_received_ = 0;
};

}  // namespace plexus::transports::rdma
