// Runs one participant's plan over a transport: posts each round's sends, places or
// reduces the pieces that arrive (in any order, in pieces of any size, early ones held
// until their round), and moves to the next round when the current one's receives are
// complete. Sends may finish later than their round (a reliable transport reports them done
// only when the peer has acknowledged them): a receive or copy that would write bytes an
// unfinished send still reads waits for it, and the plan is done once every send is.
// Single-threaded: the caller serialises start, send_done and deliver.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "daemon/algorithms/plan.h"

namespace plexus::daemon::algo {

// What the runner needs from the network.
class PlanTransport {
 public:
  virtual ~PlanTransport() = default;
  // Hand `data` to `peer` as message `message` of this op. The runner leaves the bytes
  // unchanged until send_done(peer, message) is called (which may happen inside this call).
  virtual void post_send(int peer, uint32_t message, std::span<const std::byte> data) = 0;
};

// inout[i] = op(inout[i], in[i]) over `bytes` bytes of whole elements.
using ReduceFn = std::function<void(std::byte* inout, const std::byte* in, size_t bytes)>;

struct PlanBuffers {
  std::byte* work = nullptr;
  uint64_t work_bytes = 0;
  const std::byte* send = nullptr;  // kSend (alltoall); may be null otherwise
  uint64_t send_bytes = 0;
  uint32_t elem_bytes = 1;  // pieces of reduced messages must be whole elements
};

// Empty, or why the plan reaches outside the buffers (a bug in a planner).
std::string check_plan_fits(const Plan& plan, const PlanBuffers& buffers);

class PlanRunner {
 public:
  // `plan` must outlive the runner and fit `buffers` (check_plan_fits).
  PlanRunner(const Plan& plan, PlanBuffers buffers, ReduceFn reduce, PlanTransport& transport);

  // Posts the first round; a plan with nothing to wait for is done on return.
  void start();
  void send_done(int peer, uint32_t message);
  // Bytes [offset, offset + data.size()) of message `message` from `peer`. Returns an empty
  // string, or why the piece does not fit the plan (no such message, outside it, more
  // bytes than it holds, not whole elements of a reduced message): the op must then fail.
  std::string deliver(int peer, uint32_t message, uint64_t offset, std::span<const std::byte> data);

  // Where piece [offset, offset + bytes) of message `message` from `peer` may be written
  // directly (a plain receive of the current round, pieces in any order), or null: then it
  // goes through deliver. A placement is followed by deliver_placed, or abandoned.
  std::byte* placement(int peer, uint32_t message, uint64_t offset, uint64_t bytes);
  // The placed piece is in the buffer.
  void deliver_placed(int peer, uint32_t message, uint64_t offset, uint64_t bytes);

  bool done() const { return round_ >= plan_.rounds() && pending_sends_.empty(); }
  size_t round() const { return round_; }
  // Peers whose messages the current round still waits for or, when none, peers that have
  // not acknowledged a send yet (diagnostics; valid in any state, finished included).
  std::vector<int> waiting_for() const;
  // Whether any message from `peer`, in this round or a later one, is still incomplete.
  bool expects_from(int peer) const;

 private:
  struct HeldPiece {
    uint64_t offset;
    std::vector<std::byte> data;
  };
  void begin_round();
  bool round_complete() const;
  // Whether [offset, offset + bytes) of the work buffer is read by a send not finished yet.
  bool read_by_pending_send(uint64_t offset, uint64_t bytes) const;
  bool can_begin_round() const;             // its copies write nothing a pending send reads
  bool receive_ready(uint32_t step) const;  // its pieces may be applied now
  void apply(const Step& step, uint64_t offset, std::span<const std::byte> data);
  void advance();

  const Plan& plan_;
  PlanBuffers buffers_;
  ReduceFn reduce_;
  PlanTransport& transport_;
  std::vector<uint32_t> step_round_;               // by step
  std::vector<uint64_t> received_;                 // by step: bytes delivered so far
  std::vector<bool> sent_;                         // by step: send_done seen
  std::vector<std::vector<uint32_t>> recv_steps_;  // [peer][message] -> step
  std::vector<std::vector<uint32_t>> send_steps_;  // [peer][message] -> step
  std::vector<std::vector<HeldPiece>> held_;       // by step: pieces not yet applied
  std::vector<uint32_t> pending_sends_;            // posted, send_done not seen
  size_t round_ = 0;
  bool begun_ = false;  // round_'s sends and copies are posted
  bool started_ = false;
  bool advancing_ = false;
};

}  // namespace plexus::daemon::algo
