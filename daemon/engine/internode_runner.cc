// Collectives between daemons: frames from peer daemons routed to the running op (or held
// for a later one), ops started in order and finished from the loop, and failures told to
// every node so that nobody waits for a node that gave up.
#include "daemon/engine/internode_runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "daemon/internode/plan_shape.h"
#include "shm/dtype.h"
#include "transports/wire/frame_views.h"

namespace plexus::daemon {

namespace wire = transports::wire;

uint64_t first_unstarted(const Comm& comm) {
  const InternodeState& state = *comm.internode;
  return state.active ? state.active_seq + 1 : comm.first_seq;
}

int InternodeRunner::node_of(const Comm& comm, uint64_t instance) {
  const auto& ids = comm.span()->node_ids;
  auto it = std::find(ids.begin(), ids.end(), instance);
  return it == ids.end() ? -1 : static_cast<int>(it - ids.begin());
}

InternodeRunner::InternodeRunner(const EngineConfig& config, Hooks hooks, LinkEvents link_events,
                                 OpWatch& watch, GpuStaging& gpu, monitor::EventLog& events)
    : name_(config.node_name),
      hooks_(std::move(hooks)),
      link_events_(std::move(link_events)),
      watch_(watch),
      gpu_(gpu),
      events_(events),
      links_(NodeLinks::Handler{
                 [this](uint64_t peer, const wire::DataFrameHeader& h,
                        std::span<const std::byte> payload) {
                   return on_peer_frame(peer, h, payload);
                 },
                 [this](uint64_t peer, const wire::DataFrameHeader& h) {
                   return place_peer_frame(peer, h);
                 },
                 [this](uint64_t peer, const wire::DataFrameHeader& h) {
                   return on_peer_frame_placed(peer, h);
                 },
                 [this](uint64_t peer, const std::string& name, const std::string& reason) {
                   on_peer_lost(peer, name, reason);
                 },
                 [this](uint64_t peer, const std::string& nic, const std::string& remote,
                        const std::string& rail_key, bool latency, bool pathless) {
                   if (link_events_.path_lost) {
                     link_events_.path_lost(peer, nic, remote, rail_key, latency, pathless);
                   }
                 },
                 [this](const std::string& nic) {
                   if (link_events_.nic_up) link_events_.nic_up(nic);
                 },
                 [this](uint32_t flow, uint64_t bytes, std::chrono::nanoseconds waited) {
                   jobs_.scheduled(flow, bytes, waited);
                 },
                 [this](uint64_t peer) { on_peer_linked(peer); },
                 [this](uint64_t peer) { return waits_on(peer); },
                 // Closed while idle: the control thread forgets its rails (nothing fails).
                 [this](uint64_t peer) {
                   if (link_events_.retired) link_events_.retired(peer);
                 },
                 [this](uint64_t peer, const std::vector<std::string>& addresses) {
                   if (!link_events_.wanted) return;
                   // A link the peer opened first was never wanted here: its addresses are
                   // in the spans of the communicators it is a member of.
                   link_events_.wanted(peer, addresses.empty() ? addresses_of(peer) : addresses);
                 }},
             NodeLinks::kDefaultChunkBytes, config.channel,
             config.telemetry
                 ? NodeLinks::Telemetry{config.telemetry_window, config.telemetry_windows,
                                        config.telemetry_path_windows}
                 : NodeLinks::Telemetry{},
             config.retirement),
      jobs_(links_, config.jobs),
      speeds_(
          config.slow_node_below, links_, events,
          NodeSpeeds::Hooks{
              .defer_failure = [this](Comm& comm,
                                      const std::string& reason) { defer_failure(comm, reason); },
              .resume =
                  [this](Comm& comm) { resume_.push_back(comm_by_id_[comm.span()->comm_id]); },
              .reach = [this](const Comm& comm, int node) { return reach(comm, node); }}),
      weights_(links_,
               WeightRelay::Hooks{
                   .arrived =
                       [this](uint64_t relay_id, std::shared_ptr<const weights::Version> v) {
                         if (link_events_.weights_arrived) {
                           link_events_.weights_arrived(relay_id, std::move(v));
                         }
                       },
                   // A relay's next node may take as long to be linked as any new
                   // connection (--connect-timeout-ms) before the chain skips it.
                   .reach =
                       [this, open_within = config.retirement.reopen_within](
                           const WeightRelay::NodeRef& node) {
                         if (links_.has(node.instance)) return;
                         const auto deadline = std::chrono::steady_clock::now() + open_within;
                         if (links_.want(node.instance, node.name, deadline, node.addresses) &&
                             link_events_.wanted) {
                           link_events_.wanted(node.instance, node.addresses);
                         }
                       }},
               // A sender quiet while the node before it is passed over (its link tried
               // for up to --connect-timeout-ms) is not stalled yet; nor is one quiet for
               // less than 30 s, however short that timeout.
               std::max<std::chrono::milliseconds>(3 * config.retirement.reopen_within,
                                                   std::chrono::seconds(30))) {
  if (config.follow_nics) {
    const std::string error = links_.watch_nics();
    if (!error.empty()) {
      spdlog::warn(
          "cannot follow NIC state ({}): a path over a NIC that goes down fails only "
          "after --path-timeout-ms",
          error);
    }
  }
}

bool InternodeRunner::poll() {
  bool progress = false;
  if (links_.active()) {
    progress |= links_.poll(0);
    jobs_.update_shares(std::chrono::steady_clock::now());
  }
  weights_.poll();
  if (!progress_.empty()) {
    run_progress();
    progress = true;
  }
  if (!resume_.empty()) {
    resume_held();
    progress = true;
  }
  if (!comm_by_id_.empty()) speeds_.measure(comm_by_id_);
  return progress;
}

void InternodeRunner::add(const std::shared_ptr<Comm>& comm) {
  comm->internode = std::make_unique<InternodeState>();
  const NodeSpan& span = *comm->span();
  speeds_.join(*comm);
  comm_by_id_[span.comm_id] = comm;
  // Frames that arrived before this node knew the communicator.
  auto held = unknown_frames_.find(span.comm_id);
  if (held == unknown_frames_.end()) return;
  auto frames = std::move(held->second);
  unknown_frames_.erase(held);
  for (auto& [peer, frame] : frames) {
    unknown_bytes_ -= frame.payload.size();
    const int node = node_of(*comm, peer);
    if (node < 0) continue;
    const wire::DataFamily family = wire::data_family(frame.op_seq);
    if (family == wire::DataFamily::kSpeed) {
      const std::string error =
          speeds_.on_frame(*comm, node, frame.op_seq, frame.message, frame.offset, frame.payload);
      if (!error.empty()) defer_failure(*comm, "node " + node_name(*comm, node) + " sent " + error);
      continue;
    }
    if (family == wire::DataFamily::kPointToPoint) {
      wire::DataFrameHeader h;
      h.comm_id = span.comm_id;
      h.op_seq = frame.op_seq;
      h.step = frame.message;
      h.chunk = frame.chunk;
      h.offset = frame.offset;
      h.length = static_cast<uint32_t>(frame.payload.size());
      const std::string error = on_p2p_frame(*comm, node, h, frame.payload);
      if (!error.empty()) defer_failure(*comm, "node " + node_name(*comm, node) + " sent " + error);
      continue;
    }
    frame.node = node;
    comm->internode->early_bytes += frame.payload.size();
    comm->internode->early.push_back(std::move(frame));
  }
}

void InternodeRunner::retire(Comm& comm) {
  const uint64_t id = comm.span()->comm_id;
  speeds_.leave(comm);
  comm_by_id_.erase(id);
  links_.forget_comm(id);
  retired_ids_.push_back(id);
  if (retired_ids_.size() > 4096) retired_ids_.erase(retired_ids_.begin());
  if (comm.internode) {
    stop_active_op(comm);
    comm.internode->early.clear();
  }
}

void InternodeRunner::stop_active_op(Comm& comm) {
  InternodeState& state = *comm.internode;
  if (state.active && state.active->borrows_rank_memory()) {
    for (const void* owner : state.active->placement_owners()) links_.abandon_placements(owner);
  }
  state.active.reset();
}

void InternodeRunner::start_op(Comm& comm, PendingCollective& op) {
  InternodeState& state = *comm.internode;
  // A speed change is being agreed: the op starts once it is (resume_held).
  if (state.speeds && !state.speeds->may_start()) return;
  const uint64_t seq = comm.first_seq;
  const NodeSpan& span = *comm.span();
  std::vector<Contribution> local;
  for (int rank : span.topology.local_ranks()) local.push_back(op.parts[static_cast<size_t>(rank)]);
  const auto& first = local.front().entry;
  CollectiveArgs args{first.opcode, first.dtype, first.redop, first.count, first.peer};
  algo::Shape shape = plan_shape(span.topology, args);
  algo::LinkCost cost = span.cost;
  if (state.speeds) {
    shape.speeds = state.speeds->speeds_for(seq);
    // While a node is slow, bytes cost what the nodes measured (the same on every node).
    const double reference = state.speeds->reference_for(seq);
    if (!shape.speeds.empty() && reference > 0) cost.beta_s_per_byte = 1.0 / reference;
  }
  const algo::Algorithm algorithm = algo::choose_algorithm(shape, cost, span.forced);
  spdlog::debug("communicator {} collective #{}: {} of {} x {} bytes by {} across {} nodes",
                token_prefix(comm.token()), seq,
                shm::opcode_name(static_cast<uint8_t>(args.opcode)), args.count,
                shm::dtype_size(args.dtype), algo::algorithm_name(algorithm),
                span.topology.nodes());
  std::weak_ptr<Comm> weak_comm = comm_by_id_[span.comm_id];
  auto post_send = [this, weak_comm, seq](int node, uint32_t message,
                                          std::span<const std::byte> data,
                                          std::shared_ptr<void> keep_alive) {
    auto comm_ptr = weak_comm.lock();
    if (!comm_ptr || !comm_ptr->internode) return;
    Comm& c = *comm_ptr;
    std::weak_ptr<InternodeOp> weak_op = c.internode->active;
    const uint64_t peer = reach(c, node);
    const bool queued =
        links_.send_message(peer, c.span()->comm_id, seq, message, data, std::move(keep_alive),
                            [this, weak_comm, weak_op, node, message] {
                              auto op_ptr = weak_op.lock();
                              auto cp = weak_comm.lock();
                              if (!op_ptr || !cp) return;
                              op_ptr->send_done(node, message);
                              if (!op_ptr->failure().empty()) defer_failure(*cp, op_ptr->failure());
                              if (op_ptr->network_done()) progress_.push_back(cp);
                            });
    if (!queued) {
      defer_failure(c, "no data connection to node " + node_name(c, node) + " (it was lost)");
    }
  };
  // One rank here with both buffers in its host pool: the op may run in the rank's memory,
  // the session (which maps the pool) kept alive by whatever the transport holds.
  std::shared_ptr<void> rank_memory_owner;
  if (local.size() == 1 && local.front().entry.send.region == shm::kHostPoolRegion &&
      local.front().entry.recv.region == shm::kHostPoolRegion) {
    rank_memory_owner = hooks_.shared_session(local.front().session);
  }
  state.active = std::make_shared<InternodeOp>(
      span.topology, args, std::move(local), algorithm, state.scratch, post_send,
      SliceOptions{.timed = watch_.timing(), .speeds = shape.speeds}, std::move(rank_memory_owner));
  state.active_seq = seq;
  state.active_algorithm = algo::algorithm_name(algorithm);
  std::shared_ptr<InternodeOp> op_ptr = state.active;
  const std::shared_ptr<std::string> input_failure = gpu_.stage_slices(*op_ptr);
  // Every node it exchanges with has a link from now on, receive-only ones included: a node
  // that only receives hears of a failure over it (notices go only to linked nodes).
  for (int node : op_ptr->peers()) reach(comm, node);
  op_ptr->start();
  if (input_failure && !input_failure->empty()) {
    // A GPU input of this node could not be copied in: a local fault, not a peer's.
    hooks_.fail_comm(comm, PLEXUS_ERR_SYSTEM,
                     "collective #" + std::to_string(seq) + ": " + *input_failure);
    return;
  }
  if (!op_ptr->failure().empty()) {
    defer_failure(comm, "collective #" + std::to_string(seq) + ": " + op_ptr->failure());
  }
  if (op_ptr->waiting_for_input()) {
    gpu_.wait_for_input(comm_by_id_[span.comm_id], op_ptr, input_failure);
  }
  // Frames for this op that came early.
  for (auto it = state.early.begin(); it != state.early.end() && state.active == op_ptr;) {
    if (it->op_seq != seq) {
      ++it;
      continue;
    }
    HeldFrame frame = std::move(*it);
    it = state.early.erase(it);
    state.early_bytes -= frame.payload.size();
    std::string error = op_ptr->deliver(frame.node, frame.message, frame.offset, frame.payload);
    if (!error.empty()) {
      defer_failure(comm, "node " + node_name(comm, frame.node) + " sent data that does not fit " +
                              "collective #" + std::to_string(seq) + ": " + error);
      break;
    }
  }
  progress_.push_back(comm_by_id_[span.comm_id]);
}

void InternodeRunner::finish_op(Comm& comm) {
  InternodeState& state = *comm.internode;
  std::shared_ptr<InternodeOp> op = std::move(state.active);
  const uint64_t bytes = op->bytes_written();
  watch_.count_completed(comm, bytes, op->local_parts().front().entry);
  if (watch_.timing()) {
    watch_.record_finished(comm, comm.collectives.front(), comm.first_seq, state.active_algorithm,
                           PLEXUS_SUCCESS, op->stage_times());
  }
  for (const Contribution& part : op->local_parts()) {
    hooks_.complete(part.session, part.entry.user_data, PLEXUS_SUCCESS, {});
  }
  comm.collectives.pop_front();
  ++comm.first_seq;
  hooks_.run_ready(comm);
}

void InternodeRunner::run_progress() {
  std::vector<std::shared_ptr<Comm>> comms;
  comms.swap(progress_);
  for (const auto& comm : comms) {
    if (!comm->internode) continue;
    InternodeState& state = *comm->internode;
    if (!state.failure.empty()) {
      std::string reason = std::move(state.failure);
      state.failure.clear();
      hooks_.fail_comm(*comm, state.failure_status, reason);
      continue;
    }
    if (comm->broken()) continue;
    // Several ops may finish in a row when their frames were all held.
    for (int guard = 0; guard < 1024 && state.active && state.active->network_done(); ++guard) {
      finish_op(*comm);
    }
  }
}

void InternodeRunner::defer_failure(Comm& comm, const std::string& reason, plexus_result_t status) {
  if (!comm.internode || comm.broken()) return;
  if (comm.internode->failure.empty()) {
    comm.internode->failure = reason;
    comm.internode->failure_status = status;
  }
  auto it = comm_by_id_.find(comm.span()->comm_id);
  if (it != comm_by_id_.end()) progress_.push_back(it->second);
}

Comm* InternodeRunner::find(uint64_t comm_id) const {
  auto it = comm_by_id_.find(comm_id);
  return it == comm_by_id_.end() ? nullptr : it->second.get();
}

void InternodeRunner::comm_failed(Comm& comm, bool first, const std::string& reason) {
  if (!comm.internode) return;
  // The op's network part stops here; the scratch stays alive for queued sends. Its
  // clients are told now and may reuse their buffers at once, so frames still being
  // read into a rank's buffer must finish elsewhere.
  fail_remote_p2p(comm);
  stop_active_op(comm);
  comm.internode->early.clear();
  comm.internode->early_bytes = 0;
  if (first) tell_peers_failed(comm, reason);
}

uint64_t InternodeRunner::reach(const Comm& comm, int node) {
  const NodeSpan& span = *comm.span();
  const auto n = static_cast<size_t>(node);
  const uint64_t peer = span.node_ids[n];
  if (links_.has(peer)) return peer;  // the common case: one lookup per send
  const auto deadline = std::chrono::steady_clock::now() + span.open_timeout;
  std::vector<std::string> addresses =
      n < span.node_addresses.size() ? span.node_addresses[n] : std::vector<std::string>{};
  if (links_.want(peer, span.topology.node_names[n], deadline, addresses) && link_events_.wanted) {
    link_events_.wanted(peer, addresses);
  }
  return peer;
}

std::string InternodeRunner::on_peer_frame(uint64_t peer, const wire::DataFrameHeader& h,
                                           std::span<const std::byte> payload) {
  if (wire::is_channel_control(h)) return {};
  if (h.type == wire::FrameType::kData &&
      wire::data_family(h.op_seq) == wire::DataFamily::kWeights) {
    return weights_.on_frame(peer, h, payload);
  }
  auto it = comm_by_id_.find(h.comm_id);
  if (it == comm_by_id_.end()) {
    if (std::find(retired_ids_.begin(), retired_ids_.end(), h.comm_id) != retired_ids_.end()) {
      // A communicator this node already left: stray data is dropped, and a node that sends
      // some may not have heard (notices reach only linked nodes): it is told, once.
      if (h.type == wire::FrameType::kData &&
          wire::data_family(h.op_seq) != wire::DataFamily::kSpeed &&
          std::find(told_retired_.begin(), told_retired_.end(), std::pair{h.comm_id, peer}) ==
              told_retired_.end()) {
        told_retired_.emplace_back(h.comm_id, peer);
        if (told_retired_.size() > 4096) told_retired_.erase(told_retired_.begin());
        links_.send_abort(peer, h.comm_id,
                          "node " + name_ + ": every rank of that node left the communicator");
      }
      return {};
    }
    if (h.type != wire::FrameType::kData) return {};
    if (unknown_bytes_ + payload.size() > kMaxUnknownCommBytes) {
      return "more than 256 MiB of data for communicators this node has not formed";
    }
    unknown_bytes_ += payload.size();
    unknown_frames_[h.comm_id].emplace_back(
        peer, HeldFrame{0, h.op_seq, h.step, h.offset, {payload.begin(), payload.end()}, h.chunk});
    return {};
  }
  Comm& comm = *it->second;
  const int node = node_of(comm, peer);
  if (node < 0) return "a frame for a communicator that node is not part of";
  if (comm.broken()) {
    if (h.type == wire::FrameType::kData) tell_late_node(comm, node);
    return {};
  }
  InternodeState& state = *comm.internode;
  // Only control frames carry text; a data frame's payload is not copied.
  auto text = [&payload] {
    return std::string(reinterpret_cast<const char*>(payload.data()), payload.size());
  };
  switch (h.type) {
    case wire::FrameType::kAbort:
      // A peer's field: only a revoke is taken from it; anything else is a lost peer.
      defer_failure(comm, text(),
                    h.step == PLEXUS_ERR_REVOKED ? PLEXUS_ERR_REVOKED : PLEXUS_ERR_PEER_LOST);
      return {};
    case wire::FrameType::kDeparted: {
      const wire::Departed departed = wire::read_departed(h);
      remote_rank_departed(comm, node, static_cast<int>(departed.rank), departed.collectives,
                           text());
      return {};
    }
    default:
      break;
  }
  const wire::DataFamily family = wire::data_family(h.op_seq);
  if (family == wire::DataFamily::kPointToPoint) return on_p2p_frame(comm, node, h, payload);
  if (family == wire::DataFamily::kSpeed) {
    const std::string error = speeds_.on_frame(comm, node, h.op_seq, h.step, h.offset, payload);
    if (!error.empty()) defer_failure(comm, "node " + node_name(comm, node) + " sent " + error);
    return {};
  }
  ++state.frames_in;
  if (state.active && h.op_seq == state.active_seq) {
    std::string error = state.active->deliver(node, h.step, h.offset, payload);
    if (!error.empty()) {
      defer_failure(comm, "node " + node_name(comm, node) + " sent data that does not fit " +
                              "collective #" + std::to_string(h.op_seq) + ": " + error +
                              " (do the ranks of every node call the same collectives with the "
                              "same counts?)");
    } else if (state.active->network_done()) {
      progress_.push_back(it->second);
    }
    return {};
  }
  const uint64_t next = first_unstarted(comm);
  if (h.op_seq < next) {
    defer_failure(comm, "node " + node_name(comm, node) + " sent data for collective #" +
                            std::to_string(h.op_seq) + ", which already finished here");
    return {};
  }
  if (state.early_bytes + payload.size() > kMaxEarlyBytesPerComm) {
    defer_failure(comm, "node " + node_name(comm, node) + " ran more than 1 GiB of data ahead");
    return {};
  }
  state.early_bytes += payload.size();
  state.early.push_back(
      HeldFrame{node, h.op_seq, h.step, h.offset, {payload.begin(), payload.end()}});
  return {};
}

void InternodeRunner::resume_held() {
  std::vector<std::weak_ptr<Comm>> comms;
  comms.swap(resume_);
  for (const auto& weak : comms) {
    auto comm = weak.lock();
    if (!comm || !comm->internode || comm->broken() || comm->internode->active) continue;
    hooks_.run_ready(*comm);
  }
}

transports::Placement InternodeRunner::place_peer_frame(uint64_t peer,
                                                        const wire::DataFrameHeader& h) {
  const wire::DataFamily family = wire::data_family(h.op_seq);
  if (family == wire::DataFamily::kWeights) return weights_.place(peer, h);
  if (family == wire::DataFamily::kPointToPoint) return {};
  auto it = comm_by_id_.find(h.comm_id);
  if (it == comm_by_id_.end() || it->second->broken()) return {};
  Comm& comm = *it->second;
  InternodeState& state = *comm.internode;
  if (!state.active || h.op_seq != state.active_seq) return {};
  const int node = node_of(comm, peer);
  if (node < 0) return {};
  InternodeOp::Placement p = state.active->placement(node, h.step, h.offset, h.length);
  return {p.destination, std::move(p.keep_alive)};
}

std::string InternodeRunner::on_peer_frame_placed(uint64_t peer, const wire::DataFrameHeader& h) {
  if (wire::data_family(h.op_seq) == wire::DataFamily::kWeights) return weights_.on_placed(peer, h);
  auto it = comm_by_id_.find(h.comm_id);
  // The op it was placed for failed meanwhile: the bytes went to scratch nobody reads.
  if (it == comm_by_id_.end() || it->second->broken()) return {};
  Comm& comm = *it->second;
  InternodeState& state = *comm.internode;
  if (!state.active || h.op_seq != state.active_seq) return {};
  ++state.frames_in;
  state.active->deliver_placed(node_of(comm, peer), h.step, h.offset, h.length);
  if (!state.active->failure().empty()) defer_failure(comm, state.active->failure());
  if (state.active->network_done()) progress_.push_back(it->second);
  return {};
}

void InternodeRunner::on_peer_lost(uint64_t peer, const std::string& name,
                                   const std::string& reason) {
  events_.emit("peer_lost", "error", "data connection to node " + name + " lost: " + reason,
               {{"peer", name}, {"peer_instance", peer}, {"reason", reason}});
  weights_.peer_lost(peer);
  for (auto& [id, comm] : comm_by_id_) {
    if (node_of(*comm, peer) < 0 || comm->broken()) continue;
    defer_failure(*comm, "lost the data connection to node " + name + " (" + reason +
                             "); its daemon stopped, or the network between the nodes failed");
  }
  // Held frames from it for communicators not formed here yet stay: they fail on their own.
  if (link_events_.lost) link_events_.lost(peer);
}

}  // namespace plexus::daemon
