// One multi-node communicator's agreed node speeds, which the slow-node schedule plans with
// (docs/architecture.md). Every node must plan an op with the same speeds, so they change
// only from an op every node agrees on, never within one. The leader (node 0) measures; when
// the speeds it sees differ from the agreed ones (steadily, by enough) it proposes a change.
// Every other node answers with the first op it has not started and starts no op until the
// change is committed; the leader, which also starts none meanwhile, commits the change from
// the largest of those ops and its own, so no node has started that op yet. The caller carries
// the messages (reliably, and a proposal never ahead of the commit before it: InternodeRunner
// sends proposals and answers as frames with no payload, which the channel fences behind every
// frame of the communicator sent before them) and acts on what comes back. Engine thread only;
// no I/O and no clock but the one passed in.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"

namespace plexus::daemon {

class SpeedAgreement {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  struct Settings {
    // A node at or above this fraction of the reference node's bandwidth counts as alike
    // (speed 1): measurement noise must not move the schedule (plexusd --slow-node-below;
    // alike nodes' measures differ by up to ~20 % on a loaded host).
    double alike_above = 0.75;
    // A change is proposed when some node's speed moved by at least this much ...
    double change_at_least = 0.15;
    // ... and the measure has held (within change_at_least) for this long: about the
    // time a node's measure takes to settle (NodeBandwidth::kRateWeight per report).
    std::chrono::milliseconds steady_for{1000};
  };

  enum class Kind : uint32_t { kPropose = 1, kReady = 2, kCommit = 3 };
  struct Message {
    int node = 0;  // to (what this returns) or from (what it is given)
    Kind kind = Kind::kPropose;
    uint64_t generation = 0;
    // kReady: the sender's first op not started; kCommit: the first op with the new speeds.
    uint64_t seq = 0;
    std::vector<double> speeds;  // kCommit: by node, each k/kSpeedSteps (exact on every node)
    std::string reason;          // kCommit: what the nodes' events say
    // kCommit: the reference node's bandwidth (bytes/s, whole), the scale the speeds are of:
    // the cost model's per-byte cost while some node is slow (the rendezvous' figure is the
    // NIC speed the members' control handshakes advertised, NodeJoins::comm_cost, which a
    // shaped or degraded link does not show).
    double reference = 0;
  };
  static constexpr int kSpeedSteps = 64;
  // A bandwidth above this (bytes/s) is no measure: taken as unknown.
  static constexpr double kMaxBandwidth = 1e13;

  SpeedAgreement(int nodes, int my_node, Settings settings);

  bool leader() const { return my_node_ == 0; }
  // Leader: each node's bandwidth now (bytes/s; 0: unknown, taken as alike) and the
  // nodes' names (for the reason). Returns the proposals to send when a change starts.
  std::vector<Message> measured(std::span<const double> bandwidth,
                                std::span<const std::string> names, uint64_t first_unstarted,
                                TimePoint now);
  // A message from another node; `first_unstarted` is this node's first op not started.
  // Returns what to send, or why the sender broke the protocol.
  common::Result<std::vector<Message>> receive(const Message& message, uint64_t first_unstarted);
  // Whether this node may start its next op: not while a change waits to be committed.
  bool may_start() const { return !holding_; }
  // While holding: the nodes whose message it waits for (the leader: those that have not
  // answered; others: the leader).
  std::vector<int> waiting_for() const;
  // The speeds op `seq` runs with (empty: all alike). Ops ask in order: changes before the
  // one in force at `seq` are forgotten.
  const std::vector<double>& speeds_for(uint64_t seq);
  // The reference node's bandwidth that went with them (0 with none).
  double reference_for(uint64_t seq);
  // A change committed here since the last call (leader: on the last answer; others: on
  // the commit), for the event.
  std::optional<Message> take_committed();

  // Snaps measured bandwidths to speeds relative to the reference (reference_of), at most 1,
  // k/kSpeedSteps (alike ones to 1). Empty when all are alike. A node the agreement in
  // force has slow is alike again only above recovered_above(): once the offload schedule
  // spares its link, it is pressed less and its measure drifts up through the noise, and
  // at the plain threshold the schedule flapped between ring and offload.
  double recovered_above() const {
    return settings_.alike_above + 0.6 * (1.0 - settings_.alike_above);
  }
  std::vector<double> speeds_of(std::span<const double> bandwidth) const;
  // The bandwidth speeds are relative to: the upper median of the known ones (0: none).
  // Not the fastest: one node whose measure reads high (a healthy node's read 1.4x on the
  // 2-core test host) would make every other node look slow. The median holds while fewer
  // than half the nodes are slow, and the offload schedule helps only one.
  static double reference_of(std::span<const double> bandwidth);

 private:
  bool differs(const std::vector<double>& a, const std::vector<double>& b) const;
  void commit(uint64_t from_seq, std::vector<double> speeds, double reference, std::string reason);
  struct Agreed {
    uint64_t from = 0;  // the first op they apply to
    std::vector<double> speeds;
    double reference = 0;
  };
  // The entry in force at `seq` (forgetting older ones), or null.
  const Agreed* in_force(uint64_t seq);

  int nodes_;
  int my_node_;
  Settings settings_;
  std::vector<Agreed> agreed_;  // in op order
  bool holding_ = false;
  uint64_t generation_ = 0;
  // Leader: the measure being watched for steadiness, and a change under way.
  std::vector<double> candidate_;
  TimePoint candidate_since_{};
  bool proposing_ = false;
  std::vector<double> proposed_;
  double proposed_reference_ = 0;
  std::string proposed_reason_;
  std::vector<bool> ready_;
  uint64_t ready_seq_ = 0;
  std::optional<Message> committed_;
};

}  // namespace plexus::daemon
