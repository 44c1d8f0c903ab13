#include "tools/plexus-sim/flow_network.h"

#include <algorithm>

namespace plexus::sim {
namespace {

uint64_t pair_key(int src, int dst) {
  return static_cast<uint64_t>(static_cast<uint32_t>(src)) << 32 | static_cast<uint32_t>(dst);
}

}  // namespace

FlowNetwork::FlowNetwork(std::vector<double> capacity, EventQueue& events, uint32_t done_kind)
    : capacity_(std::move(capacity)),
      events_(events),
      done_kind_(done_kind),
      out_(capacity_.size()),
      in_(capacity_.size()) {}

uint32_t FlowNetwork::start(int src, int dst, uint64_t bytes, double now) {
  uint32_t id = 0;
  if (free_.empty()) {
    id = static_cast<uint32_t>(flows_.size());
    flows_.emplace_back();
  } else {
    id = free_.back();
    free_.pop_back();
  }
  Flow& f = flows_[id];
  f.src = src;
  f.dst = dst;
  f.remaining = static_cast<double>(bytes);
  f.rate = 0;
  f.live = false;
  std::deque<uint32_t>& queue = pairs_[pair_key(src, dst)];
  queue.push_back(id);
  if (queue.size() == 1) run(id, now);
  return id;
}

void FlowNetwork::run(uint32_t id, double now) {
  Flow& f = flows_[id];
  f.since = now;
  f.live = true;
  out_[static_cast<size_t>(f.src)].push_back(id);
  in_[static_cast<size_t>(f.dst)].push_back(id);
  reshare(f.src, f.dst, now);
}

bool FlowNetwork::finish(uint32_t flow, uint32_t version, double now) {
  Flow& f = flows_[flow];
  if (!f.live || f.version != version) return false;
  f.live = false;
  ++f.version;
  drop(out_[static_cast<size_t>(f.src)], flow);
  drop(in_[static_cast<size_t>(f.dst)], flow);
  free_.push_back(flow);
  std::deque<uint32_t>& queue = pairs_[pair_key(f.src, f.dst)];
  queue.pop_front();
  if (queue.empty()) {
    reshare(f.src, f.dst, now);
  } else {
    run(queue.front(), now);
  }
  return true;
}

void FlowNetwork::reshare(int src, int dst, double now) {
  for (uint32_t id : out_[static_cast<size_t>(src)]) rerate(id, now);
  for (uint32_t id : in_[static_cast<size_t>(dst)]) {
    if (flows_[id].src != src) rerate(id, now);  // the flows out of src are done
  }
}

void FlowNetwork::rerate(uint32_t id, double now) {
  Flow& f = flows_[id];
  const double moved = std::min(f.remaining, f.rate * (now - f.since));
  f.remaining -= moved;
  f.since = now;
  const auto src = static_cast<size_t>(f.src);
  const auto dst = static_cast<size_t>(f.dst);
  f.rate = std::min(capacity_[src] / static_cast<double>(out_[src].size()),
                    capacity_[dst] / static_cast<double>(in_[dst].size()));
  ++f.version;
  events_.push(now + f.remaining / f.rate, done_kind_, id, f.version);
}

void FlowNetwork::drop(std::vector<uint32_t>& list, uint32_t id) {
  const auto it = std::find(list.begin(), list.end(), id);
  *it = list.back();
  list.pop_back();
}

}  // namespace plexus::sim
