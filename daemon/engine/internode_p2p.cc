// Send/recv between ranks on different nodes. A send goes out at once from the sender's
// buffer, kept mapped until the links release every chunk (the peer acknowledged it; with
// --channel-acks off, once it is in its transport's hands), and completes when the end marker
// behind them is released likewise (acknowledgements are cumulative). The end marker carries
// the tag, so it is not fenced as an empty frame is and may overtake the chunks on another
// path: the receiving daemon gathers the message until both its end and all its bytes came,
// and hands it to matching (CommMatcher::deliver_remote) whole and in the pair's order.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "daemon/engine/internode_runner.h"
#include "shm/dtype.h"
#include "transports/wire/frame_views.h"

namespace plexus::daemon {

namespace wire = transports::wire;

void InternodeRunner::submit_p2p(Comm& comm, Contribution part) {
  const auto n = static_cast<uint64_t>(comm.nranks());
  const auto self = static_cast<uint64_t>(part.rank);
  const auto peer = static_cast<uint64_t>(part.entry.peer);
  if (const std::string* departure = comm.departure(part.entry.peer)) {
    hooks_.complete(part.session, part.entry.user_data, PLEXUS_ERR_PEER_LOST, *departure);
    return;
  }
  InternodeState& state = *comm.internode;
  const NodeSpan& span = *comm.span();
  const uint64_t key = self * n + peer;
  const uint64_t message = state.p2p_sent[key]++;
  const int node = span.topology.rank_node[peer];
  const uint64_t instance = span.node_ids[static_cast<size_t>(node)];
  const uint64_t op_seq = wire::point_to_point_op_seq(message);
  const uint32_t step =
      wire::point_to_point_step(static_cast<uint32_t>(self), static_cast<uint32_t>(peer));
  const uint64_t bytes = part.entry.send.bytes;
  const std::span<const std::byte> data(part.send, bytes);
  const std::array<std::byte, wire::kPointToPointEndBytes> end =
      wire::encode_point_to_point_end(part.entry.tag);
  const uint64_t id = state.next_send_id++;
  const Session* session = part.session;
  const uint64_t user_data = part.entry.user_data;
  state.sends_in_flight.emplace(id, std::move(part));
  std::weak_ptr<Comm> weak = comm_by_id_[span.comm_id];
  auto done = [this, weak, id] {
    auto c = weak.lock();
    if (!c || !c->internode) return;
    auto it = c->internode->sends_in_flight.find(id);
    if (it == c->internode->sends_in_flight.end()) return;  // failed meanwhile
    const Contribution sent = std::move(it->second);
    c->internode->sends_in_flight.erase(it);
    watch_.count_completed(*c, sent.entry.send.bytes, sent.entry, nullptr, /*op_ends_here=*/false);
    hooks_.complete(sent.session, sent.entry.user_data, PLEXUS_SUCCESS, {});
  };
  // The sender's pool stays mapped while the links may still read it (until they release each
  // chunk: NodeLinks::send_message), and so does the host copy of a GPU buffer: the op may
  // fail and be forgotten before the link is done.
  std::shared_ptr<void> keep_alive = hooks_.shared_session(session);
  if (auto staged = session->staged_ops.find(user_data); staged != session->staged_ops.end()) {
    keep_alive = std::make_shared<std::pair<std::shared_ptr<void>, std::shared_ptr<void>>>(
        std::move(keep_alive), staged->second);
  }
  reach(comm, node);
  bool queued =
      links_.send_message(instance, span.comm_id, op_seq, step, data, keep_alive, nullptr);
  if (queued) {
    // The end marker: a frame whose offset is the message's size and whose payload is its tag.
    queued = links_.send_marker(instance, span.comm_id, op_seq, step, bytes,
                                wire::kPointToPointEndChunk, std::move(done), end);
  }
  if (!queued) {
    defer_failure(comm, "no data connection to node " + node_name(comm, node) + " (it was lost)");
  }
}

std::string InternodeRunner::on_p2p_frame(Comm& comm, int node, const wire::DataFrameHeader& h,
                                          std::span<const std::byte> payload) {
  InternodeState& state = *comm.internode;
  const auto n = static_cast<uint64_t>(comm.nranks());
  const wire::PointToPointTag tag = wire::read_point_to_point(h);
  const uint64_t source = tag.source;
  const uint64_t destination = tag.destination;
  const NodeSpan& span = *comm.span();
  if (source >= n || destination >= n || span.topology.rank_node[source] != node ||
      span.topology.rank_node[destination] != span.topology.my_node) {
    return "a send/recv frame between ranks " + std::to_string(source) + " and " +
           std::to_string(destination) + " that do not live on its node and this one";
  }
  // A zero-byte message's one empty frame carries nothing its end marker does not say (and it
  // is fenced, so it may come after the marker, once the message is gone).
  if (h.chunk != wire::kPointToPointEndChunk && payload.empty()) return {};
  const uint64_t key = source * n + destination;
  const uint64_t message = tag.message;
  if (message < state.p2p_delivered[key]) return "a send/recv frame for a message already received";
  if (h.chunk == wire::kPointToPointEndChunk && payload.size() != wire::kPointToPointEndBytes) {
    return "a send/recv end marker with " + std::to_string(payload.size()) +
           " bytes of payload, not its " + std::to_string(wire::kPointToPointEndBytes) +
           "-byte tag";
  }
  auto& messages = state.inbound[key];
  auto found = messages.find(message);
  if (found == messages.end()) {
    if (state.inbound_messages >= kMaxInboundMessagesPerComm) {
      defer_failure(comm, "more than " + std::to_string(kMaxInboundMessagesPerComm) +
                              " sends from other nodes arrive at once");
      return {};
    }
    found = messages.emplace(message, InboundMessage{}).first;
    ++state.inbound_messages;
  }
  InboundMessage& in = found->second;
  if (in.complete) return "a send/recv frame after its message ended";
  // A message's chunks cover [0, size) once each. The end marker, which carries a payload (the
  // tag), is not fenced behind them as an empty frame is: on several paths it may come first.
  auto beyond_end = [&](uint64_t bytes_at) {
    defer_failure(comm, "node " + node_name(comm, node) + " ended a message from rank " +
                            std::to_string(source) + " at " + std::to_string(in.size) +
                            " bytes, but it carries " + std::to_string(bytes_at));
  };
  if (h.chunk == wire::kPointToPointEndChunk) {
    if (in.ended) return "a second end marker for one send/recv message";
    in.ended = true;
    in.size = h.offset;
    in.tag = wire::decode_point_to_point_end(payload.first<wire::kPointToPointEndBytes>());
    if (in.received > in.size || in.data.size() > in.size) {
      beyond_end(std::max<uint64_t>(in.received, in.data.size()));
      return {};
    }
    if (in.received == in.size) complete_inbound(comm, key, in);
    return {};
  }
  // What the message's buffer grows by is what is counted: a hostile offset must not make it
  // allocate more than the bound.
  if (h.offset > kMaxEarlyBytesPerComm || payload.size() > kMaxEarlyBytesPerComm - h.offset) {
    return "a send/recv frame at offset " + std::to_string(h.offset) + " beyond 1 GiB";
  }
  const uint64_t end = h.offset + payload.size();
  if (in.ended && end > in.size) {
    beyond_end(end);
    return {};
  }
  const uint64_t grows = end > in.data.size() ? end - in.data.size() : 0;
  if (state.inbound_bytes + comm.p2p.held_bytes() + grows > kMaxEarlyBytesPerComm) {
    defer_failure(comm, "more than 1 GiB of sends from other nodes wait for their recvs");
    return {};
  }
  if (grows > 0) {
    in.data.resize(end);
    state.inbound_bytes += grows;
  }
  std::memcpy(in.data.data() + h.offset, payload.data(), payload.size());
  in.received += payload.size();
  if (in.ended && in.received == in.size) complete_inbound(comm, key, in);
  return {};
}

void InternodeRunner::complete_inbound(Comm& comm, uint64_t key, InboundMessage& in) {
  // Every byte came once (the channel drops copies) and none past the end: [0, size) is whole.
  // Only a peer that sent overlapping chunks leaves it shorter: the rest reads as zeros.
  if (in.data.size() != in.size) {
    comm.internode->inbound_bytes += in.size - in.data.size();
    in.data.resize(in.size);
  }
  in.complete = true;
  deliver_inbound(comm, key);
}

void InternodeRunner::deliver_inbound(Comm& comm, uint64_t key) {
  InternodeState& state = *comm.internode;
  const auto n = static_cast<uint64_t>(comm.nranks());
  auto pair = state.inbound.find(key);
  if (pair == state.inbound.end()) return;
  auto& messages = pair->second;
  for (auto it = messages.find(state.p2p_delivered[key]);
       it != messages.end() && it->second.complete; it = messages.find(state.p2p_delivered[key])) {
    InboundMessage in = std::move(it->second);
    messages.erase(it);
    ++state.p2p_delivered[key];
    --state.inbound_messages;
    state.inbound_bytes -= in.data.size();
    hooks_.deliver_p2p(
        comm, static_cast<int>(key % n),
        P2pMessage{static_cast<int>(key / n), in.tag, std::nullopt, std::move(in.data)});
    if (comm.broken()) return;
  }
  if (messages.empty()) state.inbound.erase(pair);
}

void InternodeRunner::fail_remote_p2p(Comm& comm) {
  InternodeState& state = *comm.internode;
  for (auto& [id, part] : state.sends_in_flight) {
    hooks_.complete(part.session, part.entry.user_data, comm.broken_status(), comm.broken_reason());
  }
  state.sends_in_flight.clear();
  state.inbound.clear();
  state.inbound_bytes = 0;
  state.inbound_messages = 0;
}

}  // namespace plexus::daemon
