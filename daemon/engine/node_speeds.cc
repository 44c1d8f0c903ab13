#include "daemon/engine/node_speeds.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdio>

#include "daemon/engine/internode_state.h"
#include "transports/wire/frame_views.h"
#include "transports/wire/speed_commit.h"

namespace plexus::daemon {

namespace wire = transports::wire;

NodeSpeeds::NodeSpeeds(double slow_node_below, NodeLinks& links, monitor::EventLog& events,
                       Hooks hooks)
    : measures_(slow_node_below > 0), links_(links), events_(events), hooks_(std::move(hooks)) {
  settings_.alike_above = slow_node_below;
}

void NodeSpeeds::join(Comm& comm) const {
  const NodeSpan& span = *comm.span();
  comm.internode->speeds = std::make_unique<SpeedAgreement>(static_cast<int>(span.node_ids.size()),
                                                            span.topology.my_node, settings_);
  // A leader that measures hears every node's rate over a link to it, which its plans may
  // not open: it opens them now (the one node that holds a link per member while slow nodes
  // are watched for).
  if (!measures_ || !comm.internode->speeds->leader()) return;
  // Pinned: an idle link would close, and the reports with it (leave unpins them).
  for (int node = 0; node < static_cast<int>(span.node_ids.size()); ++node) {
    if (node != span.topology.my_node) links_.pin(hooks_.reach(comm, node), true);
  }
}

void NodeSpeeds::leave(Comm& comm) const {
  if (!measures_ || !comm.internode || !comm.internode->speeds ||
      !comm.internode->speeds->leader()) {
    return;
  }
  const NodeSpan& span = *comm.span();
  for (int node = 0; node < static_cast<int>(span.node_ids.size()); ++node) {
    if (node != span.topology.my_node) links_.pin(span.node_ids[static_cast<size_t>(node)], false);
  }
}

std::string NodeSpeeds::on_frame(Comm& comm, int node, uint64_t op_seq, uint32_t step,
                                 uint64_t offset, std::span<const std::byte> payload) {
  InternodeState& state = *comm.internode;
  if (!state.speeds) return {};  // this daemon takes every node as alike: no change applies
  SpeedAgreement::Message m;
  m.node = node;
  m.kind = static_cast<SpeedAgreement::Kind>(step);
  m.generation = wire::speed_generation(op_seq);
  m.seq = offset;
  if (m.kind == SpeedAgreement::Kind::kCommit) {
    if (offset != 0) return "a speed change that is not one frame";
    common::Result<wire::SpeedCommit> decoded =
        wire::decode_speed_commit(payload, comm.span()->node_ids.size());
    if (!decoded) return decoded.error();
    wire::SpeedCommit commit = decoded.take();
    m.seq = commit.first_op;
    m.reference = static_cast<double>(commit.reference);
    for (uint16_t speed : commit.speeds) {
      m.speeds.push_back(static_cast<double>(speed) / SpeedAgreement::kSpeedSteps);
    }
    m.reason = std::move(commit.reason);
  } else if (!payload.empty()) {
    return "a speed message with a payload";
  }
  const common::Result<std::vector<SpeedAgreement::Message>> out =
      state.speeds->receive(m, first_unstarted(comm));
  if (!out) return out.error();
  send(comm, *out);
  change_event(comm);
  // Not from inside a transport callback: the loop starts the held op.
  if (state.speeds->may_start()) hooks_.resume(comm);
  return {};
}

void NodeSpeeds::send(Comm& comm, const std::vector<SpeedAgreement::Message>& messages) {
  const NodeSpan& span = *comm.span();
  for (const SpeedAgreement::Message& m : messages) {
    const uint64_t peer = hooks_.reach(comm, m.node);
    const uint64_t op_seq = wire::speed_op_seq(m.generation);
    const auto step = static_cast<uint32_t>(m.kind);
    bool sent = false;
    if (m.kind != SpeedAgreement::Kind::kCommit) {
      sent = links_.send_marker(peer, span.comm_id, op_seq, step, m.seq, 0, [] {});
    } else {
      wire::SpeedCommit commit{m.seq, static_cast<uint64_t>(m.reference), {}, m.reason};
      for (double speed : m.speeds) {
        commit.speeds.push_back(
            static_cast<uint16_t>(std::lround(speed * SpeedAgreement::kSpeedSteps)));
      }
      auto bytes = std::make_shared<std::vector<std::byte>>(wire::encode_speed_commit(commit));
      const std::span<const std::byte> data(*bytes);
      sent = links_.send_message(peer, span.comm_id, op_seq, step, data, bytes, [] {});
    }
    if (!sent) hooks_.defer_failure(comm, "no data connection to node " + node_name(comm, m.node));
  }
}

void NodeSpeeds::change_event(Comm& comm) {
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

void NodeSpeeds::measure(const std::unordered_map<uint64_t, std::shared_ptr<Comm>>& comms) {
  const auto now = std::chrono::steady_clock::now();
  if (now - measured_at_ < kMeasureEvery) return;
  measured_at_ = now;
  const double own = measures_ ? links_.own_bandwidth() : 0.0;
  std::vector<double> bandwidth;
  for (const auto& [id, comm] : comms) {
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
      hooks_.defer_failure(*comm, "a change of the nodes' speeds was not agreed within " +
                                      std::to_string(kHoldLimit.count()) +
                                      " ms (waiting for node " + nodes + ")");
      continue;
    }
    // Only a leader that measures proposes, and not once a node's ranks have left: its
    // answer may never come.
    if (!measures_ || !state.speeds->leader() || !comm->remote_departure.empty()) continue;
    bandwidth.clear();
    for (size_t node = 0; node < span.node_ids.size(); ++node) {
      bandwidth.push_back(static_cast<int>(node) == span.topology.my_node
                              ? own
                              : links_.peer_bandwidth(span.node_ids[node], now));
    }
    send(*comm,
         state.speeds->measured(bandwidth, span.topology.node_names, first_unstarted(*comm), now));
  }
}

}  // namespace plexus::daemon
