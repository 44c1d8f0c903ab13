// How a weight relay's chains recover (weight_relay.h): lost nodes (a forward goes on past
// them, a forward ended before its node was lost goes past it again, and they are tried last
// in later chains) and arrivals nothing comes for (given up). Engine thread only.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "daemon/engine/weight_relay.h"

namespace plexus::daemon {

void WeightRelay::lost_nodes_last(Forward& f) {
  auto lost = [this](const NodeRef& n) { return unreachable_.count(n.instance) != 0; };
  const auto rest = f.chain.begin() + static_cast<std::ptrdiff_t>(f.next);
  if (rest == f.chain.end() || !lost(*rest) || std::all_of(rest, f.chain.end(), lost)) return;
  spdlog::debug("weights: version {}: node {} was lost lately, so it is tried after the others",
                f.version->number, rest->name);
  std::stable_partition(rest, f.chain.end(), [&](const NodeRef& n) { return !lost(n); });
}

void WeightRelay::poll() {
  while (!lost_.empty()) {
    const uint64_t peer = lost_.back();
    lost_.pop_back();
    if (unreachable_.count(peer) == 0 && unreachable_.size() >= kMaxUnreachable) {
      uint64_t oldest = peer;
      uint64_t noted = unreachable_noted_ + 1;
      for (const auto& [instance, when] : unreachable_) {
        if (when < noted) std::tie(oldest, noted) = std::tie(instance, when);
      }
      unreachable_.erase(oldest);
    }
    unreachable_[peer] = ++unreachable_noted_;
    move_past(peer);
  }
  drop_silent_arrivals();
}

void WeightRelay::heard_from(uint64_t peer) {
  const auto now = std::chrono::steady_clock::now();
  for (auto& [key, in] : arrivals_) {
    if (in.from == peer) in.heard = now;
  }
}

void WeightRelay::drop_silent_arrivals() {
  const auto now = std::chrono::steady_clock::now();
  if (arrivals_.empty() || now < next_idle_look_) return;
  next_idle_look_ =
      now + std::min<std::chrono::steady_clock::duration>(arrival_idle_, std::chrono::seconds(1));
  for (auto it = arrivals_.begin(); it != arrivals_.end();) {
    const Arrival& in = it->second;
    if (now - in.heard < arrival_idle_) {
      ++it;
      continue;
    }
    spdlog::warn(
        "weights: version {} (relay {:016x}) from {:016x}: nothing came for {} ms with its link "
        "up; given up, its memory back to the store (sent again, it starts afresh)",
        it->first.second, it->first.first, in.from, arrival_idle_.count());
    forwards_.erase(in.forward);
    // A frame being placed into its buffers holds them: it writes there no more.
    if (in.version) {
      for (const auto& part : in.version->parts) links_.abandon_placements(part->buffer.get());
    }
    end_arrival(it++);
  }
}

void WeightRelay::move_past(uint64_t peer) {
  std::vector<uint64_t> moved;
  for (auto& [id, f] : forwards_) {
    if (f.next < f.chain.size() && f.chain[f.next].instance == peer) moved.push_back(id);
  }
  for (uint64_t id : moved) {
    auto it = forwards_.find(id);
    if (it == forwards_.end()) continue;
    spdlog::warn("weights: node {} lost while version {} went to it: on to the next in the chain",
                 it->second.chain[it->second.next].name, it->second.version->number);
    ++it->second.next;
    start_forward(id, it->second);
  }
  // What a lost node was sending here comes again from the node before it, from the start,
  // and is passed on again from then: the forward it fed goes with it.
  for (auto it = arrivals_.begin(); it != arrivals_.end();) {
    if (it->second.from != peer) {
      ++it;
      continue;
    }
    forwards_.erase(it->second.forward);
    end_arrival(it++);
  }
  std::erase_if(placing_, [peer](const auto& entry) { return std::get<0>(entry.first) == peer; });
  // A forward ends once every range is released to its next node (written, or acknowledged),
  // which may be before that node passed them all on: the nodes after it may lack the
  // version. The newest such version of each relay goes past it again from here, unless this
  // node knows a newer one; the first node that has it whole says so (a refusal) and the
  // forward stops there, as the chain after that node is its own.
  std::map<uint64_t, Finished> again;  // by relay id
  for (auto it = finished_.begin(); it != finished_.end();) {
    if (it->to != peer) {
      ++it;
      continue;
    }
    const auto version = it->version.lock();
    auto& newest = again[it->relay_id];
    const auto kept = newest.version.lock();
    if (version && (!kept || kept->number < version->number)) newest = std::move(*it);
    it = finished_.erase(it);
  }
  for (auto& [relay_id, f] : again) {
    std::shared_ptr<const weights::Version> version = f.version.lock();
    if (!version || f.after.empty() || newest_known(relay_id) > version->number) continue;
    spdlog::warn(
        "weights: node {} lost after version {} went to it: the nodes after it get it "
        "again from here",
        f.to_name, version->number);
    push(relay_id, std::move(version), std::move(f.after));
  }
}

uint64_t WeightRelay::newest_known(uint64_t relay_id) const {
  uint64_t newest = 0;
  for (const auto& [id, f] : forwards_) {
    if (f.relay_id == relay_id) newest = std::max(newest, f.version->number);
  }
  for (const Finished& f : finished_) {
    if (const auto v = f.version.lock(); v && f.relay_id == relay_id) {
      newest = std::max(newest, v->number);
    }
  }
  for (const auto& [key, in] : arrivals_) {
    if (key.first == relay_id) newest = std::max(newest, key.second);
  }
  for (const Key& key : done_) {
    if (key.first == relay_id) newest = std::max(newest, key.second);
  }
  return newest;
}

}  // namespace plexus::daemon
