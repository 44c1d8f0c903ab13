#include "daemon/engine/weight_relay.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "common/frame_codec.h"
#include "daemon/weights/weights_relay.capnp.h"
#include "transports/wire/frame_views.h"

namespace plexus::daemon {

namespace wire = transports::wire;
namespace relay = weights::relay;

namespace {

// A header names at most this many bytes of tensor names and nodes (4096 shards of 65536
// tensors is the store's own bound; a header past this is a corrupt or hostile one).
constexpr uint64_t kMaxHeaderBytes = 64u << 20;
constexpr size_t kMaxChainNodes = 1u << 16;
// Versions being received at once (each holds its buffers under the store's cap).
constexpr size_t kMaxArrivals = 16;

uint64_t shard_bytes(const weights::Shard& shard) {
  uint64_t end = 0;
  for (const weights::Shard::Tensor& t : shard.tensors) end = std::max(end, t.offset + t.bytes);
  return end;
}

uint64_t range_count(uint64_t bytes) {
  return (bytes + wire::kWeightsRangeBytes - 1) / wire::kWeightsRangeBytes;
}

}  // namespace

uint64_t WeightRelay::Received::add(uint64_t start, uint64_t end) {
  // Merge [start, end) into the spans; what it adds is counted.
  auto it = spans.upper_bound(start);
  if (it != spans.begin() && std::prev(it)->second >= start) --it;
  uint64_t merged = 0;  // bytes of the spans the new one joins, already counted
  while (it != spans.end() && it->first <= end) {
    merged += it->second - it->first;
    start = std::min(start, it->first);
    end = std::max(end, it->second);
    it = spans.erase(it);
  }
  spans.emplace(start, end);
  const uint64_t added = (end - start) - merged;
  bytes += added;
  return added;
}

WeightRelay::Ranges::Ranges(const weights::Version& v) {
  for (size_t s = 0; s < v.parts.size(); ++s) {
    first.push_back(steps.size());
    const uint64_t bytes = shard_bytes(*v.parts[s]);
    for (uint64_t r = 0; r < range_count(bytes); ++r) {
      const uint64_t start = r * wire::kWeightsRangeBytes;
      steps.emplace_back(
          wire::weights_range_step(static_cast<uint32_t>(s), static_cast<uint32_t>(r)),
          std::min(wire::kWeightsRangeBytes, bytes - start));
    }
  }
  first.push_back(steps.size());
}

int64_t WeightRelay::Ranges::index(uint32_t step) const {
  const wire::WeightsRange r = wire::read_weights_range(step);
  if (r.shard + 1 >= first.size()) return -1;
  const size_t at = first[r.shard] + r.range;
  return at < first[r.shard + 1] ? static_cast<int64_t>(at) : -1;
}

void WeightRelay::remember_done(const Key& key) {
  done_.push_back(key);
  if (done_.size() > kMaxArrivals * 4) done_.erase(done_.begin());
}

void WeightRelay::push(uint64_t relay_id, std::shared_ptr<const weights::Version> version,
                       std::vector<NodeRef> chain) {
  if (chain.empty()) return;
  const uint64_t id = next_forward_++;
  Forward& f = forwards_[id];
  f.relay_id = relay_id;
  f.ranges = std::make_shared<const Ranges>(*version);
  f.version = std::move(version);
  f.chain = std::move(chain);
  f.have.assign(f.ranges->steps.size(), true);
  start_forward(id, f);
}

void WeightRelay::start_forward(uint64_t id, Forward& f) {
  while (f.next < f.chain.size()) {
    lost_nodes_last(f);
    const NodeRef& node = f.chain[f.next];
    ++f.generation;
    f.header_acked = false;
    f.sent.assign(f.have.size(), false);
    f.unacked = 0;
    f.unsent_from = 0;
    hooks_.reach(node);
    capnp::MallocMessageBuilder message;
    auto header = message.initRoot<relay::Header>();
    header.setVersion(f.version->number);
    auto shards = header.initShards(static_cast<unsigned>(f.version->parts.size()));
    for (unsigned s = 0; s < shards.size(); ++s) {
      const auto& tensors = f.version->parts[s]->tensors;
      auto list = shards[s].initTensors(static_cast<unsigned>(tensors.size()));
      for (unsigned t = 0; t < list.size(); ++t) {
        list[t].setName(tensors[t].name);
        list[t].setBytes(tensors[t].bytes);
      }
    }
    auto next = header.initNext(static_cast<unsigned>(f.chain.size() - f.next - 1));
    for (unsigned n = 0; n < next.size(); ++n) {
      const NodeRef& after = f.chain[f.next + 1 + n];
      next[n].setInstance(after.instance);
      next[n].setName(after.name);
      auto addresses = next[n].initAddresses(static_cast<unsigned>(after.addresses.size()));
      for (unsigned a = 0; a < addresses.size(); ++a) addresses.set(a, after.addresses[a]);
    }
    auto words = std::make_shared<kj::Array<capnp::word>>(capnp::messageToFlatArray(message));
    const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(words->begin()),
                                           words->size() * sizeof(capnp::word));
    const uint64_t op_seq = wire::weights_op_seq(f.version->number);
    const uint64_t generation = f.generation;
    // The ranges go once the end marker is released (the next node has the whole header: a
    // range before it could not be placed). Releases are cumulative, so the marker's comes
    // after the header's own chunks'; with acknowledgements off it may come at once, from
    // inside send_marker.
    const bool sent =
        links_.send_message(node.instance, f.relay_id, op_seq, wire::kWeightsHeaderStep, bytes,
                            words, nullptr) &&
        links_.send_marker(node.instance, f.relay_id, op_seq, wire::kWeightsHeaderStep,
                           bytes.size(), wire::kWeightsEndChunk, [this, id, generation] {
                             auto it = forwards_.find(id);
                             if (it == forwards_.end() || it->second.generation != generation) {
                               return;
                             }
                             it->second.header_acked = true;
                             unreachable_.erase(it->second.chain[it->second.next].instance);
                             send_ranges(id, it->second);
                           });
    if (sent) return;
    spdlog::warn("weights: no link to node {} for version {}: the chain goes on without it",
                 node.name, f.version->number);
    ++f.next;
  }
  forwards_.erase(id);  // the chain's end
}

void WeightRelay::send_ranges(uint64_t id, Forward& f) {
  const NodeRef& node = f.chain[f.next];
  const auto& ranges = f.ranges->steps;
  const uint64_t op_seq = wire::weights_op_seq(f.version->number);
  const uint64_t generation = f.generation;
  f.sending = true;
  while (f.unsent_from < ranges.size() && f.sent[f.unsent_from]) ++f.unsent_from;
  // (A release seen at once, inside a send, makes room in this same loop.)
  for (size_t i = f.unsent_from; i < ranges.size() && f.unacked < kRangesAhead; ++i) {
    if (!f.have[i] || f.sent[i]) continue;
    const wire::WeightsRange r = wire::read_weights_range(ranges[i].first);
    const auto& buffer = f.version->parts[r.shard]->buffer;
    const std::span<const std::byte> data(buffer->data() + r.range * wire::kWeightsRangeBytes,
                                          ranges[i].second);
    f.sent[i] = true;
    ++f.unacked;
    if (!links_.send_message(node.instance, f.relay_id, op_seq, ranges[i].first, data, buffer,
                             [this, id, generation] { forward_done(id, generation); })) {
      f.sending = false;
      return;  // the link is gone: peer_lost moves the chain on
    }
  }
  f.sending = false;
  forward_done(id, 0);  // nothing more to send now: finished if nothing is unacknowledged
}

void WeightRelay::forward_done(uint64_t id, uint64_t generation) {
  auto it = forwards_.find(id);
  if (it == forwards_.end()) return;
  Forward& f = it->second;
  if (generation != 0) {
    if (generation != f.generation) return;
    --f.unacked;
    if (f.sending) return;  // send_ranges goes on, with the room this made
    if (f.header_acked && f.unacked + 1 == kRangesAhead) {
      send_ranges(id, f);  // the window was full: the next range goes (and this looks again)
      return;
    }
  }
  const bool all = std::all_of(f.sent.begin() + static_cast<std::ptrdiff_t>(f.unsent_from),
                               f.sent.end(), [](bool s) { return s; });
  if (f.sending || !f.header_acked || !all || f.unacked != 0) return;
  if (f.next + 1 < f.chain.size()) {
    if (finished_.size() >= kMaxFinished) finished_.erase(finished_.begin());
    const auto past = f.chain.begin() + static_cast<std::ptrdiff_t>(f.next) + 1;
    finished_.push_back({f.relay_id, f.version, f.chain[f.next].instance, f.chain[f.next].name,
                         std::vector<NodeRef>(past, f.chain.end())});
  }
  forwards_.erase(it);
}

void WeightRelay::refuse(uint64_t peer, const Key& key, const std::string& reason, bool logged) {
  auto text = std::make_shared<std::string>(reason.substr(0, wire::kWeightsMaxReasonBytes));
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(text->data()),
                                         text->size());
  if (logged) {
    spdlog::warn("weights: version {} (relay {:016x}) not kept here: {}", key.second, key.first,
                 reason);
  }
  // A lost link passes this node over anyway (move_past on the sender).
  (void)links_.send_message(peer, key.first, wire::weights_op_seq(key.second),
                            wire::kWeightsRefusedStep, bytes, text, nullptr);
}

std::string WeightRelay::refused(uint64_t peer, const Key& key, std::span<const std::byte> reason) {
  if (reason.size() > wire::kWeightsMaxReasonBytes) return "a weights refusal past its bound";
  std::string why(reinterpret_cast<const char*>(reason.data()), reason.size());
  for (char& c : why) {
    if (c < 0x20 || c > 0x7e) c = '?';  // the peer's text, into this node's log
  }
  const bool whole_there = why == wire::kWeightsWholeHere;
  for (auto& [id, f] : forwards_) {
    if (f.relay_id != key.first || f.version->number != key.second || f.next >= f.chain.size() ||
        f.chain[f.next].instance != peer) {
      continue;
    }
    if (whole_there) {  // the chain after it is its own
      spdlog::info("weights: node {} has version {} whole already: the chain goes on from it",
                   f.chain[f.next].name, key.second);
      forwards_.erase(id);
      return {};
    }
    spdlog::warn("weights: node {} will not keep version {} ({}): on to the next in the chain",
                 f.chain[f.next].name, key.second, why);
    ++f.next;
    start_forward(id, f);  // may end it: nothing after this uses `f`
    return {};
  }
  if (whole_there) return {};  // (a forward that ended: nothing more to do)
  for (auto it = finished_.rbegin(); it != finished_.rend(); ++it) {
    std::shared_ptr<const weights::Version> version = it->version.lock();
    if (it->relay_id != key.first || it->to != peer || !version || version->number != key.second) {
      continue;
    }
    spdlog::warn("weights: a node will not keep version {} ({}) after it was sent: on past it",
                 key.second, why);
    std::vector<NodeRef> after = std::move(it->after);
    finished_.erase(std::next(it).base());
    push(key.first, std::move(version), std::move(after));
    return {};
  }
  spdlog::warn(
      "weights: version {} refused by node {:016x}, which this node no longer sends it to or "
      "no longer holds: the nodes after it get a later version",
      key.second, peer);
  return {};
}

void WeightRelay::end_arrival(std::map<Key, Arrival>::iterator it) {
  const uint64_t serial = it->second.serial;
  std::erase_if(placing_, [serial](const auto& entry) { return entry.second == serial; });
  arrivals_.erase(it);
}

bool WeightRelay::busy_with(uint64_t peer) const {
  for (const auto& [id, f] : forwards_) {
    if (f.next < f.chain.size() && f.chain[f.next].instance == peer) return true;
  }
  for (const auto& [key, a] : arrivals_) {
    if (a.from == peer) return true;
  }
  return false;
}

std::string WeightRelay::on_frame(uint64_t peer, const wire::DataFrameHeader& h,
                                  std::span<const std::byte> payload) {
  const Key key{h.comm_id, wire::weights_version(h.op_seq)};
  if (h.step == wire::kWeightsRefusedStep) {
    if (h.offset != 0) return "a weights refusal in pieces";
    return refused(peer, key, payload);
  }
  if (accepted_.count(key.first) == 0) {  // no model here subscribes to it: dropped, once said
    if (h.step == wire::kWeightsHeaderStep && h.chunk == wire::kWeightsEndChunk) {
      refuse(peer, key, "no model on this node subscribes to it");
    }
    return {};
  }
  const bool header_end = h.step == wire::kWeightsHeaderStep && h.chunk == wire::kWeightsEndChunk;
  if (std::find(done_.begin(), done_.end(), key) != done_.end()) {  // whole here
    // Sent again (a chain repaired past a lost node, a late node's push): the sender stops
    // here rather than send every range again; the chain after this node is its own.
    if (header_end) refuse(peer, key, std::string(wire::kWeightsWholeHere), false);
    return {};
  }
  auto it = arrivals_.find(key);
  if (it == arrivals_.end()) {
    if (h.step != wire::kWeightsHeaderStep) return {};   // of a transfer given up: dropped
    if (!memory_ || arrivals_.size() >= kMaxArrivals) {  // said once, at the header's end
      if (header_end) {
        refuse(peer, key,
               memory_ ? "too many versions arriving at once" : "no weight store on this node");
      }
      return {};
    }
    it = arrivals_.emplace(key, Arrival{}).first;
    it->second.serial = next_serial_++;
  }
  Arrival& in = it->second;
  if (h.step == wire::kWeightsHeaderStep && in.from != peer) {  // a node took a lost one's place
    if (!in.version) {  // its header, not a mix of two (their chains may be in other orders)
      in.header.clear();
      in.header_bytes = {};
      in.header_size = 0;
    }
    in.from = peer;
  }
  heard_from(peer);
  if (h.step == wire::kWeightsHeaderStep) return on_header(key, in, h, payload);
  return on_range(key, in, h, payload);
}

std::string WeightRelay::on_header(const Key& key, Arrival& in, const wire::DataFrameHeader& h,
                                   std::span<const std::byte> payload) {
  if (in.version) return {};  // sent again by a node that took a lost one's place
  if (h.chunk == wire::kWeightsEndChunk) {
    if (h.offset == 0 || h.offset > kMaxHeaderBytes || h.offset % sizeof(capnp::word) != 0) {
      return "a weights header of " + std::to_string(h.offset) + " bytes";
    }
    in.header_size = h.offset;
  } else {
    if (h.offset > kMaxHeaderBytes || payload.size() > kMaxHeaderBytes - h.offset) {
      return "a weights header frame beyond " + std::to_string(kMaxHeaderBytes) + " bytes";
    }
    if (in.header.size() < h.offset + payload.size()) in.header.resize(h.offset + payload.size());
    std::memcpy(in.header.data() + h.offset, payload.data(), payload.size());
    in.header_bytes.add(h.offset, h.offset + payload.size());
  }
  if (in.header_size == 0 || in.header_bytes.bytes < in.header_size) return {};
  if (in.header.size() != in.header_size) return "a weights header longer than its end says";
  return take_header(key, in);
}

std::string WeightRelay::take_header(const Key& key, Arrival& in) {
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(in.header_size / sizeof(capnp::word));
  std::memcpy(words.begin(), in.header.data(), in.header_size);
  in.header = {};
  auto version = std::make_shared<weights::Version>();
  std::vector<NodeRef> chain;
  try {
    capnp::FlatArrayMessageReader reader(words, common::untrusted_reader_options());
    auto header = reader.getRoot<relay::Header>();
    if (header.getVersion() != key.second) return "a weights header for another version";
    if (header.getShards().size() > wire::kWeightsMaxShards ||
        header.getNext().size() > kMaxChainNodes) {
      return "a weights header with too many shards or nodes";
    }
    version->number = key.second;
    version->shards = header.getShards().size();
    for (auto shard : header.getShards()) {
      std::vector<weights::TensorSpec> specs;
      if (shard.getTensors().size() > weights::kMaxTensorsPerShard) {
        return "a weights header with too many tensors in a shard";
      }
      for (auto t : shard.getTensors()) {
        if (t.getBytes() > weights::kMaxShardBytes ||
            t.getName().size() > weights::kMaxTensorNameBytes) {
          return "a weights header with a tensor too large or a name too long";
        }
        specs.push_back({.name = t.getName(), .bytes = t.getBytes()});
      }
      const weights::Layout layout = weights::lay_out(specs);
      if (layout.bytes > weights::kMaxShardBytes) return "a weights header with a shard too large";
      auto part = std::make_shared<weights::Shard>();
      for (size_t i = 0; i < specs.size(); ++i) {
        const auto at = static_cast<uint32_t>(version->parts.size());
        if (!version->index.emplace(specs[i].name, std::make_pair(at, static_cast<uint32_t>(i)))
                 .second) {
          return "a weights header naming tensor '" + specs[i].name + "' twice";
        }
        part->tensors.push_back({specs[i].name, layout.offsets[i], specs[i].bytes});
        version->bytes += specs[i].bytes;
      }
      auto buffer = memory_->allocate(layout.bytes);
      if (!buffer) {  // (sent again later, it is tried again: the store may have room then)
        refuse(in.from, key, buffer.error());
        arrivals_.erase(key);
        return {};
      }
      part->buffer = buffer.take();
      version->parts.push_back(std::move(part));
    }
    for (auto node : header.getNext()) {
      NodeRef ref{.instance = node.getInstance(), .name = node.getName(), .addresses = {}};
      for (auto a : node.getAddresses()) ref.addresses.push_back(a);
      chain.push_back(std::move(ref));
    }
  } catch (const kj::Exception& e) {
    return std::string("a malformed weights header: ") + e.getDescription().cStr();
  }
  in.version = version;
  in.table = std::make_shared<const Ranges>(*version);
  in.ranges.resize(in.table->steps.size());
  spdlog::debug("weights: version {} header from {:016x}: {} range(s), {} node(s) after",
                key.second, in.from, in.ranges.size(), chain.size());
  if (!chain.empty()) {
    const uint64_t id = next_forward_++;
    Forward& f = forwards_[id];
    f.relay_id = key.first;
    f.version = version;
    f.ranges = in.table;
    f.chain = std::move(chain);
    f.have.assign(in.ranges.size(), false);
    in.forward = id;
    start_forward(id, f);
  }
  if (in.ranges.empty()) range_in(key, in, 0, 0, 0);  // nothing to wait for
  return {};
}

common::Result<WeightRelay::Spot> WeightRelay::locate(const Arrival& in,
                                                      const wire::DataFrameHeader& h,
                                                      uint64_t bytes) {
  const int64_t found = in.table->index(h.step);
  if (found < 0) return common::fail("a weights frame for a range the version does not have");
  const auto index = static_cast<size_t>(found);
  const uint64_t length = in.table->steps[index].second;
  if (h.offset > length || bytes > length - h.offset) {
    return common::fail("a weights frame beyond its range's " + std::to_string(length) + " bytes");
  }
  const wire::WeightsRange r = wire::read_weights_range(h.step);
  return Spot{index, in.version->parts[r.shard]->buffer->data() +
                         r.range * wire::kWeightsRangeBytes + h.offset};
}

std::string WeightRelay::on_range(const Key& key, Arrival& in, const wire::DataFrameHeader& h,
                                  std::span<const std::byte> payload) {
  if (!in.version) return {};     // its header was refused: dropped
  if (in.table->steps.empty()) {  // nothing to wait for
    range_in(key, in, 0, 0, 0);
    return {};
  }
  common::Result<Spot> spot = locate(in, h, payload.size());
  if (!spot) return spot.error();
  // Not into a range whole already: it may be on its way to the next node from this buffer.
  if (whole(in, spot->index)) return {};
  std::memcpy(spot->to, payload.data(), payload.size());
  range_in(key, in, spot->index, h.offset, payload.size());
  return {};
}

WeightRelay::Arrival* WeightRelay::arrival_of(const wire::DataFrameHeader& h) {
  const Key key{h.comm_id, wire::weights_version(h.op_seq)};
  if (h.step == wire::kWeightsHeaderStep || accepted_.count(key.first) == 0) return nullptr;
  if (std::find(done_.begin(), done_.end(), key) != done_.end()) return nullptr;
  auto it = arrivals_.find(key);
  if (it == arrivals_.end() || !it->second.version || it->second.table->steps.empty()) {
    return nullptr;
  }
  return &it->second;
}

transports::Placement WeightRelay::place(uint64_t peer, const wire::DataFrameHeader& h) {
  Arrival* in = arrival_of(h);
  if (in == nullptr) return {};
  common::Result<Spot> spot = locate(*in, h, h.length);
  // A range whole already is dropped by on_range, and a bad frame refused there.
  if (!spot || whole(*in, spot->index)) return {};
  placing_[{peer, h.comm_id, h.op_seq, h.step, h.offset}] = in->serial;
  heard_from(peer);
  const wire::WeightsRange r = wire::read_weights_range(h.step);
  return {std::span<std::byte>(spot->to, h.length), in->version->parts[r.shard]->buffer};
}

std::string WeightRelay::on_placed(uint64_t peer, const wire::DataFrameHeader& h) {
  // Its version may have been given up (its sender lost) or finished (by another copy of
  // this frame) meanwhile: then the bytes went to a buffer nobody takes them from (or, whole,
  // the same bytes again).
  auto placed = placing_.find({peer, h.comm_id, h.op_seq, h.step, h.offset});
  if (placed == placing_.end()) return {};
  const uint64_t serial = placed->second;
  placing_.erase(placed);
  Arrival* in = arrival_of(h);
  if (in == nullptr || in->serial != serial) return {};
  heard_from(peer);
  common::Result<Spot> spot = locate(*in, h, h.length);
  if (!spot) return spot.error();
  range_in({h.comm_id, wire::weights_version(h.op_seq)}, *in, spot->index, h.offset, h.length);
  return {};
}

void WeightRelay::range_in(const Key& key, Arrival& in, size_t index, uint64_t offset,
                           uint64_t bytes) {
  if (!in.table->steps.empty()) {
    if (whole(in, index)) return;
    in.ranges[index].add(offset, offset + bytes);
    if (!whole(in, index)) return;
    ++in.ranges_whole;
    if (auto f = forwards_.find(in.forward); f != forwards_.end()) {
      f->second.have[index] = true;
      if (f->second.header_acked) send_ranges(in.forward, f->second);
    }
    if (in.ranges_whole < in.ranges.size()) return;
  }
  in.version->completed = weights::Clock::now();
  std::shared_ptr<const weights::Version> whole = in.version;
  remember_done(key);
  end_arrival(arrivals_.find(key));
  if (hooks_.arrived) hooks_.arrived(key.first, std::move(whole));
}

}  // namespace plexus::daemon
