// A plan: one participant's part of an inter-node collective as rounds of send / receive /
// receive-and-reduce / local-copy steps over its buffers. Algorithms produce plans; the
// plan runner executes them over any transport. Participants are daemons (one per node),
// numbered 0..p-1 within the communicator.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace plexus::daemon::algo {

// kWork is the buffer the collective works in place on (the node's contribution at the
// start, its result at the end); kSend is a second, read-only buffer (alltoall only).
enum class BufferId : uint8_t { kWork, kSend };

enum class StepKind : uint8_t {
  kSend,        // bytes of `buffer` at `offset` to `peer`
  kRecv,        // bytes from `peer` into kWork at `offset`
  kRecvReduce,  // bytes from `peer` reduced into kWork at `offset` (work = op(work, received))
  kCopy,        // local: kSend at `offset` to kWork at `dst_offset`
};

struct Step {
  StepKind kind = StepKind::kSend;
  int peer = -1;  // -1 for kCopy
  BufferId buffer = BufferId::kWork;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  uint64_t dst_offset = 0;  // kCopy only
  // The index of this message among all messages between this participant and `peer` in
  // its direction, in plan order: the k-th send from a to b matches the k-th receive at b
  // from a. Filled in by PlanBuilder::finish.
  uint32_t message = 0;
};

struct Plan {
  std::vector<Step> steps;
  // Round i is steps [round_begin(i), round_ends[i]); a round starts when the previous
  // one has finished (its sends handed off, its receives complete and applied).
  std::vector<uint32_t> round_ends;
  std::string algorithm;  // for logs and tests

  size_t rounds() const { return round_ends.size(); }
  uint32_t round_begin(size_t round) const { return round == 0 ? 0 : round_ends[round - 1]; }
};

// The distinct participants `plan` sends to or receives from, ascending: the paths a node
// needs for it (ring: 2; recursive doubling, halving-doubling, bruck, binomial: at most
// 2 ceil(log2 p); pairwise: p - 1). Pure and O(steps log steps), so the engine may call it
// per plan to open only the connections a plan uses.
std::vector<int> peers_of(const Plan& plan);

// Collects steps round by round. Zero-byte steps and empty rounds are dropped: both ends
// of a message compute the same size, so both drop it.
class PlanBuilder {
 public:
  explicit PlanBuilder(std::string algorithm) { plan_.algorithm = std::move(algorithm); }

  void send(int peer, uint64_t offset, uint64_t bytes, BufferId buffer = BufferId::kWork);
  void recv(int peer, uint64_t offset, uint64_t bytes);
  void recv_reduce(int peer, uint64_t offset, uint64_t bytes);
  void copy(uint64_t src_offset, uint64_t dst_offset, uint64_t bytes);
  void end_round();

  // Numbers the messages per peer and direction.
  Plan finish();

 private:
  void add(Step step);
  Plan plan_;
};

}  // namespace plexus::daemon::algo
