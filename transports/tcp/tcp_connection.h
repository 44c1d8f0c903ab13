// One TCP connection to a peer daemon carrying data frames (transports/wire/data_frame.h):
// outgoing frames are queued without copying their payload and written with writev, many
// per call; incoming bytes are read in gulps at frame boundaries and then exactly to the
// end of the frame whose header is in (so payloads are not moved within the buffer), and
// cut into frames whose header is validated before any payload is looked at. Non-blocking and
// single-threaded: the owner's event loop calls on_readable / on_writable.
#pragma once

#include <sys/uio.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "transports/path/data_path.h"
#include "transports/wire/data_frame.h"

namespace plexus::transports {

class TcpConnection {
 public:
  using Placement = transports::Placement;
  // Frames from this size up are offered to Callbacks::place.
  static constexpr uint32_t kPlaceMinBytes = 16 << 10;

  // As every path's (DataPath::Callbacks): frames in, placements, frames written.
  using Callbacks = DataPath::Callbacks;

  // Takes ownership of `fd` (a connected stream socket; made non-blocking here).
  TcpConnection(int fd, wire::DataFrameLimits limits, Callbacks callbacks);
  ~TcpConnection();
  TcpConnection(const TcpConnection&) = delete;
  TcpConnection& operator=(const TcpConnection&) = delete;

  int fd() const { return fd_; }

  // Queues a frame. `payload` must stay unchanged until on_sent(token). Frames go out in
  // queue order. Does not write: call on_writable (or let the event loop do it).
  void queue(const wire::DataFrameHeader& header, std::span<const std::byte> payload,
             uint64_t token);
  // Queues a frame ahead of every frame not yet begun (acknowledgements and heartbeats must
  // not wait behind megabytes of data).
  void queue_urgent(const wire::DataFrameHeader& header, std::span<const std::byte> payload,
                    uint64_t token);
  bool wants_write() const { return queued_ > 0; }
  // Bytes (headers and payloads) queued and not yet written to the socket.
  uint64_t queued_bytes() const { return queued_bytes_; }
  // Bytes written to the socket that the peer has not acknowledged yet (SIOCOUTQ): the
  // kernel's send buffer holds megabytes, so a path's real backlog is both.
  uint64_t kernel_unacknowledged_bytes() const;
  // Of those, the bytes the kernel has not sent yet (SIOCOUTQNSD).
  uint64_t kernel_unsent_bytes() const;

  // The receive buffer grows as frames need it (a frame is read whole into it unless it is
  // placed), from nothing to a gulp beyond the largest frame; with nothing in it, it goes
  // (a path that has gone idle: a thousand idle peers hold no 576 KiB each). Returns the
  // bytes it held.
  size_t release_buffer();
  size_t buffer_bytes() const { return in_.size() + sink_.size(); }

  // Both return false once the connection has failed (error() says why); the owner then
  // closes it. on_readable stops after `max_bytes` so one busy peer cannot starve others.
  bool on_readable(size_t max_bytes = 8 << 20);
  bool on_writable();

  // If the frame being read straight into a placement is `owner`'s (its keep_alive), the
  // rest of its payload goes to waste instead and the frame ends in on_discarded, not
  // on_placed: the memory must not be written any more (the op it was for failed, its client
  // was told). Returns whether one was.
  bool abandon_placement(const void* owner);
  // The same for the frame being placed if its channel sequence number is `channel_seq`,
  // but it ends in neither: its other copy came first, and was counted.
  bool abandon_placement_of(uint64_t channel_seq);

  const std::string& error() const { return error_; }
  // The failure was the peer closing the connection in order (a FIN: its process ended, or
  // it gave the connection up). A reset is not counted: a peer's kernel also resets a
  // connection it no longer knows, e.g. one its side aborted when a NIC went down.
  bool peer_closed() const { return peer_closed_; }
  uint64_t bytes_sent() const { return bytes_sent_; }
  uint64_t bytes_received() const { return bytes_received_; }

 private:
  struct Outgoing {
    std::array<std::byte, wire::kDataFrameHeaderBytes> header;
    std::span<const std::byte> payload;
    uint64_t token;
    size_t written;  // of header + payload
  };
  bool fail(std::string reason);
  bool fail_closed(std::string reason);
  bool fail_errno(const char* what);  // from errno
  Outgoing& slot(size_t i) { return ring_[(head_ + i) % ring_.size()]; }
  bool parse_frames();
  // Readies the buffer for the next read; returns how many bytes to read.
  size_t make_room();
  // Offers the partial frame at consumed_ to Callbacks::place; true when it took it.
  bool try_place(const wire::DataFrameHeader& header);
  bool read_placed();    // false on failure
  bool placing() const;  // a frame is being read straight into its placement
  void abandon_current_placement(bool by_owner);
  bool write_queued();

  int fd_;
  wire::DataFrameLimits limits_;
  Callbacks callbacks_;
  // Outgoing frames: a ring that grows (doubling) only when full, so steady traffic
  // allocates nothing.
  std::vector<Outgoing> ring_;
  size_t head_ = 0;
  size_t queued_ = 0;
  uint64_t queued_bytes_ = 0;
  std::vector<iovec> iov_;
  // Incoming bytes: [consumed_, filled_) not yet parsed.
  std::vector<std::byte> in_;
  size_t consumed_ = 0;
  size_t filled_ = 0;
  size_t frame_bytes_ = 0;    // header + payload of the partial frame at consumed_, once known
  bool read_filled_ = false;  // the last read took all the room it had: more may wait
  // A frame whose payload is read straight to its destination.
  wire::DataFrameHeader placed_header_;
  Placement placed_;
  size_t placed_done_ = 0;
  bool placement_abandoned_ = false;
  bool abandoned_by_owner_ = false;  // abandon_placement: the frame ends in on_discarded
  std::vector<std::byte> sink_;      // where an abandoned placement's bytes go
  bool writing_ = false;
  std::string error_;
  bool peer_closed_ = false;
  uint64_t bytes_sent_ = 0;
  uint64_t bytes_received_ = 0;
};

}  // namespace plexus::transports
