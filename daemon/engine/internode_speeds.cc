// Collectives between daemons, the nodes' speeds: each node's measured sending speed, the
// agreement on a change between the nodes (speed_agreement.h) carried in speed frames, and
// the event that names a slow node.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "daemon/engine/internode_runner.h"

namespace plexus::daemon {

namespace wire = transports::wire;

std::string InternodeRunner::on_speed_frame(Comm& comm, int node, uint64_t op_seq, uint32_t step,
                                            uint64_t offset, std::span<const std::byte> payload) {
  InternodeState& state = *comm.internode;
  if (!state.speeds) return {};  // this daemon takes every node as alike: no change applies
  SpeedAgreement::Message m;
  m.node = node;
  m.kind = static_cast<SpeedAgreement::Kind>(step);
  m.generation = op_seq & ~kSpeedFlag;
  m.seq = offset;
  if (m.kind == SpeedAgreement::Kind::kCommit) {
    // One frame: u64 first op, u64 reference bandwidth, u32 nodes, u16 speeds, reason.
    auto get = [&](size_t at, size_t bytes) {
      uint64_t v = 0;
      for (size_t i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(payload[at + i]) << (8 * i);
      return v;
    };
    constexpr size_t kFixed = 20;
    if (offset != 0 || payload.size() < kFixed || payload.size() > kMaxSpeedCommitBytes) {
      return "a speed change that is not one frame of " + std::to_string(kFixed) + " to " +
             std::to_string(kMaxSpeedCommitBytes) + " bytes";
    }
    m.seq = get(0, 8);
    m.reference = static_cast<double>(get(8, 8));
    const uint64_t count = get(16, 4);
    if (count > static_cast<uint64_t>(comm.span()->node_ids.size()) ||
        payload.size() < kFixed + 2 * count) {
      return "a speed change whose speeds do not fit it";
    }
    for (uint64_t i = 0; i < count; ++i) {
      m.speeds.push_back(static_cast<double>(get(kFixed + 2 * i, 2)) / SpeedAgreement::kSpeedSteps);
    }
    const size_t text = kFixed + 2 * count;
    m.reason.assign(reinterpret_cast<const char*>(payload.data()) + text, payload.size() - text);
    while (!m.reason.empty() && m.reason.back() == '\0') m.reason.pop_back();  // the padding
  } else if (!payload.empty()) {
    return "a speed message with a payload";
  }
  std::string error;
  const auto out = state.speeds->receive(m, first_unstarted(comm), &error);
  if (!error.empty()) return error;
  send_speed_messages(comm, out);
  speed_change_event(comm);
  // Not from inside a transport callback: the loop starts the held op.
  if (state.speeds->may_start()) resume_.push_back(comm_by_id_[comm.span()->comm_id]);
  return {};
}

void InternodeRunner::send_speed_messages(Comm& comm,
                                          const std::vector<SpeedAgreement::Message>& messages) {
  const NodeSpan& span = *comm.span();
  for (const SpeedAgreement::Message& m : messages) {
    const uint64_t peer = span.node_ids[static_cast<size_t>(m.node)];
    const uint64_t op_seq = kSpeedFlag | m.generation;
    const auto step = static_cast<uint32_t>(m.kind);
    bool sent = false;
    if (m.kind != SpeedAgreement::Kind::kCommit) {
      sent = links_.send_marker(peer, span.comm_id, op_seq, step, m.seq, 0, [] {});
    } else {
      auto bytes = std::make_shared<std::vector<std::byte>>();
      auto put = [&](uint64_t v, size_t n) {
        for (size_t i = 0; i < n; ++i) bytes->push_back(static_cast<std::byte>(v >> (8 * i)));
      };
      put(m.seq, 8);
      put(static_cast<uint64_t>(m.reference), 8);
      put(m.speeds.size(), 4);
      for (double speed : m.speeds) {
        put(static_cast<uint64_t>(std::lround(speed * SpeedAgreement::kSpeedSteps)), 2);
      }
      const size_t room =
          bytes->size() >= kMaxSpeedCommitBytes ? 0 : kMaxSpeedCommitBytes - bytes->size();
      const std::string_view reason(m.reason.data(), std::min(m.reason.size(), room));
      for (char c : reason) bytes->push_back(static_cast<std::byte>(c));
      // Padded with NULs to whole 8 bytes: frames follow one another in a path's read
      // buffer, and a payload of odd length would leave the next frame's payload (read in
      // place and reduced as whole elements) misaligned.
      while (bytes->size() % 8 != 0 && bytes->size() < kMaxSpeedCommitBytes) {
        bytes->push_back(std::byte{0});
      }
      const std::span<const std::byte> data(*bytes);
      sent = links_.send_message(peer, span.comm_id, op_seq, step, data, bytes, [] {});
    }
    if (!sent) defer_failure(comm, "no data connection to node " + node_name(comm, m.node));
  }
}

void InternodeRunner::speed_change_event(Comm& comm) {
  std::optional<SpeedAgreement::Message> change = comm.internode->speeds->take_committed();
  if (!change) return;
  const auto& names = comm.span()->topology.node_names;
  std::string speeds;
  std::string slow;
  double slowest = 1.0;
  for (size_t i = 0; i < change->speeds.size(); ++i) {
    char figure[16];
    std::snprintf(figure, sizeof(figure), "%.2f", change->speeds[i]);
    speeds += (speeds.empty() ? "" : ", ") + names[i] + " " + figure;
    if (change->speeds[i] < slowest) {
      slowest = change->speeds[i];
      slow = names[i];
    }
  }
  const std::string message =
      "communicator " + token_prefix(comm.token()) + ": from collective #" +
      std::to_string(change->seq) + ", " +
      (slow.empty() ? std::string("every node taken as alike")
                    : "node " + slow + " is slow (speeds " + speeds +
                          "), so allreduces and allgathers may take the offload schedule") +
      ": " + change->reason;
  spdlog::info("{}", message);
  events_.emit("schedule", "info", message,
               {{"comm", token_prefix(comm.token())},
                {"from_collective", change->seq},
                {"node", slow},
                {"speed", slowest},
                {"reason", change->reason}});
}

void InternodeRunner::measure_speeds() {
  const auto now = std::chrono::steady_clock::now();
  if (now - measured_at_ < kMeasureEvery) return;
  measured_at_ = now;
  const double own = follow_speeds_ ? links_.own_bandwidth() : 0.0;
  std::vector<double> bandwidth;
  for (auto& [id, comm] : comm_by_id_) {
    InternodeState& state = *comm->internode;
    if (!state.speeds || comm->broken()) continue;
    const NodeSpan& span = *comm->span();
    // A change that is not agreed in time (a node that left the communicator, or stopped
    // answering without losing its link) fails the communicator rather than hold it.
    if (state.speeds->may_start()) {
      state.held_since = {};
    } else if (state.held_since == std::chrono::steady_clock::time_point{}) {
      state.held_since = now;
    } else if (now - state.held_since > kHoldLimit) {
      std::string nodes;
      for (int node : state.speeds->waiting_for()) {
        nodes += (nodes.empty() ? "" : ", ") + node_name(*comm, node);
      }
      defer_failure(*comm, "a change of the nodes' speeds was not agreed within " +
                               std::to_string(kHoldLimit.count()) + " ms (waiting for node " +
                               nodes + ")");
      continue;
    }
    // Only a leader that measures proposes, and not once a node's ranks have left: its
    // answer may never come.
    if (!follow_speeds_ || !state.speeds->leader() || !comm->remote_departure.empty()) continue;
    bandwidth.clear();
    for (size_t node = 0; node < span.node_ids.size(); ++node) {
      bandwidth.push_back(static_cast<int>(node) == span.topology.my_node
                              ? own
                              : links_.peer_bandwidth(span.node_ids[node], now));
    }
    send_speed_messages(*comm, state.speeds->measured(bandwidth, span.topology.node_names,
                                                      first_unstarted(*comm), now));
  }
}

}  // namespace plexus::daemon
