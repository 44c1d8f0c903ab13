// The engine's per-communicator state for collectives between daemons: the op running
// now (one at a time, in op order), frames that arrived for ops not started yet, and the
// scratch buffers the ops' slices share. Engine thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "daemon/engine/speed_agreement.h"
#include "daemon/internode/internode_op.h"

namespace plexus::daemon {

class Comm;

// A data frame kept until its op starts.
struct HeldFrame {
  int node = 0;
  uint64_t op_seq = 0;
  uint32_t message = 0;
  uint64_t offset = 0;
  std::vector<std::byte> payload;
  uint32_t chunk = 0;
};

// A point-to-point message from a rank on another node, gathered until its recv takes it.
struct InboundMessage {
  std::vector<std::byte> data;
  uint64_t received = 0;
  bool ended = false;  // its end marker came: `size` and `tag` are known
  uint64_t size = 0;
  int32_t tag = 0;
  bool complete = false;  // ended and every byte arrived: data.size() is its size
};

struct InternodeState {
  std::shared_ptr<ScratchPool> scratch = std::make_shared<ScratchPool>();
  std::shared_ptr<InternodeOp> active;  // shared: send completions hold it weakly
  uint64_t active_seq = 0;              // op number of `active`
  const char* active_algorithm = "";    // its algorithm's name (algo::algorithm_name)
  uint64_t frames_in = 0;               // data frames delivered to it: progress for the stall watch
  std::deque<HeldFrame> early;          // frames for later ops
  size_t early_bytes = 0;
  std::string failure;  // set inside a transport callback; acted on by the engine loop
  plexus_result_t failure_status = PLEXUS_ERR_PEER_LOST;  // what the ranks get for it
  // Once it failed: why (sent to a node that did not hear it yet, when its data comes), and
  // by node index whether that node was told.
  std::string abort_text;
  std::vector<bool> told;
  std::unique_ptr<SpeedAgreement> speeds;              // the nodes' agreed speeds (made in add())
  std::chrono::steady_clock::time_point held_since{};  // holding for a change since

  // Send/recv with ranks on other nodes, by pair key source * nranks + destination.
  std::unordered_map<uint64_t, uint64_t> p2p_sent;       // messages sent
  std::unordered_map<uint64_t, uint64_t> p2p_delivered;  // messages handed to matching
  std::unordered_map<uint64_t, std::map<uint64_t, InboundMessage>> inbound;
  size_t inbound_bytes = 0;     // the inbound messages' buffers
  size_t inbound_messages = 0;  // of them, at most kMaxInboundMessagesPerComm
  uint64_t next_send_id = 0;
  // Until the links release the send's end marker: the peer acknowledged it (with
  // --channel-acks off: it is in its transport's hands).
  std::unordered_map<uint64_t, Contribution> sends_in_flight;
};

// The first collective of `comm` this node has not started (frames for earlier ones are
// stale; a speed change applies from one no node has started).
uint64_t first_unstarted(const Comm& comm);

// Frames held for a later op, per communicator, before the communicator fails with the
// sender named (a peer that runs this far ahead is broken, or a broadcast root outran
// its receivers by more than this).
inline constexpr size_t kMaxEarlyBytesPerComm = size_t{1} << 30;
// Sends from other nodes arriving at once (not yet whole, or behind one that is not): what a
// peer that numbers its messages wildly can make this node hold.
inline constexpr size_t kMaxInboundMessagesPerComm = size_t{1} << 16;
// Frames for communicators this node has not formed yet (it is still connecting).
inline constexpr size_t kMaxUnknownCommBytes = size_t{256} << 20;

}  // namespace plexus::daemon
