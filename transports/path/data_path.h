// A path to a peer daemon as the links drive it, whatever carries it: a TCP connection
// (transports/tcp/tcp_path.h) or an RDMA queue pair (transports/rdma/rdma_path.h). It posts
// frames without copying their payload (FramePath: what the reliable channel sees), delivers
// incoming frames whole or places a large one's payload straight into its destination, reports
// when each posted frame is in the transport's hands, says why it failed, and what the
// transport measures of it. Nothing above transports/ names a transport's own types: the
// links get a PathOpener from whoever set the connection up.
//
// Non-blocking and single-threaded: the links' event loop polls poll_fd() (readable, and
// writable while wants_write()) and calls on_readable / on_writable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "transports/channel/frame_path.h"
#include "transports/wire/data_frame.h"

namespace plexus::transports {

// What the transport itself measures of a path (TCP: TCP_INFO), for the links report and
// the slow-path rule.
struct PathDelivery {
  double rate_bytes_per_s = 0;  // its latest delivery-rate sample
  bool app_limited = false;     // that sample had too little data queued to mean much
  double rtt_us = 0;
  uint64_t unsent_bytes = 0;  // queued in the transport, not yet on the wire
  // Cumulative: bytes the peer acknowledged and microseconds the network set the pace
  // (TcpDelivery's); 0 where the transport does not count them.
  uint64_t acked_bytes = 0;
  uint64_t network_busy_us = 0;
};

// One end of a path: text for messages, and the key path notices name it by
// (wire::PathNotice; for IPv4, address << 16 | port; 0 when it has none).
struct PathEndpoint {
  std::string text = "?";
  uint64_t key = 0;
};

class DataPath : public FramePath {
 public:
  struct Callbacks {
    // A whole frame arrived; `payload` is valid only during the call. Return an empty
    // string, or why the frame is unacceptable (the path then fails with it).
    std::function<std::string(const wire::DataFrameHeader&, std::span<const std::byte>)> on_frame;
    // Every byte of the frame posted with `token` (payload_bytes of payload) is in the
    // transport's hands.
    std::function<void(uint64_t token, size_t payload_bytes)> on_sent;
    // Optional. A large frame's header is in: where its payload may be written directly
    // (exactly header.length bytes, kept alive by keep_alive until it is written), or an
    // empty destination to take it through on_frame. A placed frame ends in on_placed
    // (its header validated like any other; return as on_frame does).
    std::function<Placement(const wire::DataFrameHeader&)> place;
    std::function<std::string(const wire::DataFrameHeader&)> on_placed;
    // Optional. A placed frame whose owner abandoned its placement (abandon_placement: the op
    // it was for failed) came in whole, its bytes gone to waste: it was received, and is
    // delivered nowhere. A reliable channel counts it, or its acknowledgements would never
    // go past it. Returns as on_frame does.
    std::function<std::string(const wire::DataFrameHeader&)> on_discarded;
  };

  // What the links' event loop waits on.
  virtual int poll_fd() const = 0;
  virtual bool wants_write() const = 0;
  // Both return false once the path has failed (error() says why). on_readable stops after
  // `max_bytes` so that one busy peer cannot starve the others.
  virtual bool on_readable(size_t max_bytes) = 0;
  virtual bool on_writable() = 0;
  virtual const std::string& error() const = 0;
  // The failure was the peer ending the path in order (its daemon stopped or gave this
  // node up), not a network failure.
  virtual bool peer_closed() const = 0;
  virtual uint64_t bytes_sent() const = 0;
  virtual uint64_t bytes_received() const = 0;
  // Of the payload bytes sent, those that went straight from where they lay, not copied
  // first into the transport's own buffers (RDMA from a registered client pool).
  virtual uint64_t payload_bytes_sent_in_place() const { return 0; }
  // If the frame being placed is kept alive by `owner`, the rest of its payload goes to
  // waste and it ends in on_discarded, not on_placed (the memory must not be written any
  // more).
  virtual bool abandon_placement(const void* owner) = 0;
  // The path has had no traffic for a while (heartbeats at most): memory held for traffic
  // (a receive buffer sized for whole frames) may go, to be made again when traffic comes.
  virtual void release_idle_memory() {}
  virtual PathEndpoint local() const = 0;
  virtual PathEndpoint remote() const = 0;
  virtual std::optional<PathDelivery> delivery() const = 0;
  // The path failed here: when it is closed, the peer must not read an orderly end into it
  // (it would take this daemon for stopped, when it is in fact reconnecting).
  virtual void close_abortively() = 0;
  // What carries it, for plexusctl and the metrics: "tcp" or "rdma".
  virtual const char* transport() const = 0;
  // Fault injection (plexusd --fault-injection): the transport fails the path as a fault of
  // its own would (RDMA: the queue pair goes to the error state and its work requests
  // flush), found by the path's own error handling. "" when injected, else why it cannot be.
  virtual std::string inject_fault() = 0;
};

// Opens a path over a connection that is set up and authenticated, with the links' frame
// limits and callbacks. It owns that connection until called; one never called closes it.
using PathOpener =
    std::function<std::unique_ptr<DataPath>(const wire::DataFrameLimits&, DataPath::Callbacks)>;

}  // namespace plexus::transports
