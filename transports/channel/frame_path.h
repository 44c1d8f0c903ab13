// One path of a channel to a peer daemon: a connection over one NIC pair that carries data
// frames (a TCP connection or an RDMA queue pair). The channel queues frames on it; its owner
// does the I/O and reports back (ReliableChannel::on_path_sent, receive, path_failed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "transports/wire/data_frame.h"

namespace plexus::transports {

// Where a large frame's payload may be read to directly, and what keeps that memory alive.
struct Placement {
  std::span<std::byte> destination;
  std::shared_ptr<void> keep_alive;
};

class FramePath {
 public:
  virtual ~FramePath() = default;
  // Queues a frame; `payload` stays unchanged until the path is told the frame is
  // acknowledged or the path is gone. `token` comes back in on_path_sent.
  virtual void queue(const wire::DataFrameHeader& header, std::span<const std::byte> payload,
                     uint64_t token) = 0;
  // A frame without payload, ahead of the frames queued and not yet begun
  // (acknowledgements, heartbeats).
  virtual void queue_urgent(const wire::DataFrameHeader& header, uint64_t token) {
    queue(header, {}, token);
  }
  // Bytes queued on this path that the peer has not received yet: what a new frame waits
  // behind (for TCP, the socket's unacknowledged bytes too).
  virtual uint64_t backlog_bytes() const = 0;
  // Of those, the bytes not handed to the network yet. While a path always has some, the
  // network sets its pace: only then is its rate measured.
  virtual uint64_t unsent_bytes() const { return backlog_bytes(); }
  // Of those, the bytes still waiting in the path itself, not yet handed to its transport,
  // and what its transport holds beyond limit_queue (the channel gives a path another frame
  // only while this is small).
  virtual uint64_t waiting_bytes() const { return 0; }
  // Whether limit_queue's limit is what keeps this path from taking a frame now: nothing but
  // looking again says when the network has taken enough (TCP's acknowledgements raise no
  // event the owner polls for).
  virtual bool held_by_queue_limit() const { return false; }
  // The transport should hold about `bytes` unsent. With `in_flight_too`, also about
  // `bytes` beyond what the network needs in flight at `rate` (bytes/s), counting what it
  // holds beyond that in waiting_bytes: so that frames wait in the channel's scheduler,
  // where a later frame of a higher class can still go first, not in a kernel queue that
  // sends first in, first out. TCP: the socket's unsent bytes (TCP_NOTSENT_LOWAT), and its
  // unacknowledged bytes (SIOCOUTQ, which counts the local qdisc's queue too); RDMA: posted
  // writes not yet complete, always.
  virtual void limit_queue(uint64_t bytes, double rate, bool in_flight_too) {
    (void)bytes;
    (void)rate;
    (void)in_flight_too;
  }
  // If the frame being read straight into a placement has this channel sequence number,
  // the rest of it goes to waste: its other copy already arrived on another path.
  virtual void abandon_placement_of(uint64_t channel_seq) = 0;
  // Milliseconds since the network last brought anything from the peer on this path, frames
  // or transport acknowledgements (-1: unknown). A path whose peer daemon is merely slow to
  // send frames still hears its peer's transport, and is not failed for it.
  virtual int64_t network_silence_ms() const { return -1; }
};

}  // namespace plexus::transports
