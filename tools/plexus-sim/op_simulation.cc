#include "tools/plexus-sim/op_simulation.h"

#include <algorithm>

namespace plexus::sim {
namespace {

using daemon::algo::Plan;
using daemon::algo::Step;
using daemon::algo::StepKind;

bool is_receive(const Step& s) {
  return s.kind == StepKind::kRecv || s.kind == StepKind::kRecvReduce;
}

uint64_t key(int peer, uint32_t number) {
  return static_cast<uint64_t>(static_cast<uint32_t>(peer)) << 32 | number;
}

std::vector<double> capacities(const ClusterModel& cluster) {
  std::vector<double> all;
  for (int i = 0; i < cluster.nodes; ++i) all.push_back(cluster.capacity(i));
  return all;
}

}  // namespace

OpSimulation::OpSimulation(const ClusterModel& cluster, std::vector<SlicedPlan> plans,
                           uint32_t in_flight)
    : cluster_(cluster),
      in_flight_(std::max<uint32_t>(in_flight, 1)),
      network_(capacities(cluster), events_, kDone),
      nodes_(plans.size()) {
  for (size_t i = 0; i < plans.size(); ++i) {
    nodes_[i].plans = plans[i];
    nodes_[i].full_receives = receives_of(plans[i].full);
    nodes_[i].last_receives = receives_of(plans[i].last);
  }
  timing_.slices_done.assign(plans.empty() ? 0 : plans.front().slices, 0.0);
}

OpSimulation::Receives OpSimulation::receives_of(const Plan* plan) {
  Receives out;
  if (plan == nullptr) return out;
  for (uint32_t i = 0; i < plan->steps.size(); ++i) {
    const Step& s = plan->steps[i];
    if (is_receive(s)) out.emplace_back(key(s.peer, s.message), i);
  }
  std::sort(out.begin(), out.end());
  return out;
}

OpTiming OpSimulation::run() {
  for (int n = 0; n < static_cast<int>(nodes_.size()); ++n) pump(n);
  while (!events_.empty() && timing_.failure.empty()) {
    const Event e = events_.pop();
    now_ = e.time;
    switch (e.kind) {
      case kStart: {
        const Message& m = messages_[e.id];
        const uint32_t flow = network_.start(m.src, m.dst, m.bytes, now_);
        if (flow_message_.size() <= flow) flow_message_.resize(flow + 1);
        flow_message_[flow] = e.id;
        break;
      }
      case kDone:
        if (network_.finish(e.id, e.version, now_)) {
          const uint32_t id = flow_message_[e.id];
          send_done(Message(messages_[id]));  // a copy: sends it posts may grow messages_
          events_.push(now_ + cluster_.latency_s, kArrive, id);
        }
        break;
      case kArrive:
        arrive(Message(messages_[e.id]));
        free_messages_.push_back(e.id);
        break;
      default:
        break;
    }
  }
  for (size_t n = 0; n < nodes_.size() && timing_.failure.empty(); ++n) {
    if (nodes_[n].next < nodes_[n].plans.slices || !nodes_[n].running.empty()) {
      fail("node " + std::to_string(n) + " never finished slice " +
           std::to_string(nodes_[n].running.empty() ? nodes_[n].next
                                                    : nodes_[n].running.front()->slice) +
           " (its plan waits for a message no node sends)");
    }
  }
  return timing_;
}

void OpSimulation::fail(std::string why) {
  if (timing_.failure.empty()) timing_.failure = std::move(why);
}

OpSimulation::Running* OpSimulation::running(int node, uint64_t slice) {
  for (auto& r : nodes_[static_cast<size_t>(node)].running) {
    if (r->slice == slice) return r.get();
  }
  return nullptr;
}

void OpSimulation::start_slice(int node, uint64_t slice) {
  Node& n = nodes_[static_cast<size_t>(node)];
  auto r = std::make_unique<Running>();
  r->slice = slice;
  r->plan = &n.plans.of(slice);
  r->receives = r->plan == n.plans.full ? &n.full_receives : &n.last_receives;
  r->state.assign(r->plan->steps.size(), 0);
  Running& ref = *r;
  n.running.push_back(std::move(r));
  // Messages that came before the slice started, as InternodeOp hands its held pieces on.
  if (auto it = n.early.find(slice); it != n.early.end()) {
    for (const auto& [peer, number] : it->second) {
      if (!mark_arrived(node, ref, peer, number)) return;
    }
    n.early.erase(it);
  }
  advance(node, ref);
}

void OpSimulation::pump(int node) {
  Node& n = nodes_[static_cast<size_t>(node)];
  for (bool changed = true; changed && timing_.failure.empty();) {
    changed = false;
    for (size_t i = 0; i < n.running.size();) {
      const Running& r = *n.running[i];
      if (r.round < r.plan->rounds() || !r.pending.empty()) {
        ++i;
        continue;
      }
      double& done = timing_.slices_done[r.slice];
      done = std::max(done, now_);
      timing_.seconds = std::max(timing_.seconds, now_);
      n.running.erase(n.running.begin() + static_cast<std::ptrdiff_t>(i));
      changed = true;
    }
    while (n.running.size() < in_flight_ && n.next < n.plans.slices && timing_.failure.empty()) {
      start_slice(node, n.next++);
      changed = true;
    }
  }
}

bool OpSimulation::read_by_pending(const Running& r, uint64_t offset, uint64_t bytes) const {
  for (uint32_t i : r.pending) {
    const Step& send = r.plan->steps[i];
    if (send.buffer != daemon::algo::BufferId::kWork) continue;
    if (offset < send.offset + send.bytes && send.offset < offset + bytes) return true;
  }
  return false;
}

// PlanRunner::advance, in time: begin the round once its copies may write, apply the
// receives that are in and whose bytes no pending send reads, end the round once all are.
void OpSimulation::advance(int node, Running& r) {
  const Plan& plan = *r.plan;
  while (r.round < plan.rounds()) {
    const uint32_t begin = plan.round_begin(r.round);
    const uint32_t end = plan.round_ends[r.round];
    if (!r.begun) {
      for (uint32_t i = begin; i < end; ++i) {
        const Step& s = plan.steps[i];
        if (s.kind == StepKind::kCopy && read_by_pending(r, s.dst_offset, s.bytes)) return;
      }
      r.begun = true;
      for (uint32_t i = begin; i < end; ++i) {
        if (plan.steps[i].kind == StepKind::kSend) post(node, r, i);
      }
    }
    bool complete = true;
    for (uint32_t i = begin; i < end; ++i) {
      const Step& s = plan.steps[i];
      if (!is_receive(s)) continue;
      if (r.state[i] == 1 && !read_by_pending(r, s.offset, s.bytes)) r.state[i] = 2;
      complete = complete && r.state[i] == 2;
    }
    if (!complete) return;
    ++r.round;
    r.begun = false;
  }
}

void OpSimulation::post(int node, Running& r, uint32_t step) {
  const Step& s = r.plan->steps[step];
  uint32_t id = 0;
  if (free_messages_.empty()) {
    id = static_cast<uint32_t>(messages_.size());
    messages_.emplace_back();
  } else {
    id = free_messages_.back();
    free_messages_.pop_back();
  }
  messages_[id] = Message{node, s.peer, r.slice, s.message, step, s.bytes};
  r.state[step] = 1;
  r.pending.push_back(step);
  ++timing_.messages;
  events_.push(now_ + cluster_.overhead_s, kStart, id);
}

void OpSimulation::send_done(const Message& m) {
  Running* r = running(m.src, m.slice);
  if (r == nullptr) {
    fail("node " + std::to_string(m.src) + " finished slice " + std::to_string(m.slice) +
         " before its send to node " + std::to_string(m.dst) + " was done");
    return;
  }
  r->state[m.step] = 2;
  auto it = std::find(r->pending.begin(), r->pending.end(), m.step);
  if (it != r->pending.end()) {
    *it = r->pending.back();
    r->pending.pop_back();
  }
  advance(m.src, *r);
  pump(m.src);
}

void OpSimulation::arrive(const Message& m) {
  Node& n = nodes_[static_cast<size_t>(m.dst)];
  Running* r = running(m.dst, m.slice);
  if (r == nullptr) {
    if (m.slice >= n.next) {
      n.early[m.slice].emplace_back(m.src, m.number);
    } else {
      fail("node " + std::to_string(m.dst) + " got message " + std::to_string(m.number) +
           " of slice " + std::to_string(m.slice) + " from node " + std::to_string(m.src) +
           " after it finished that slice");
    }
    return;
  }
  if (!mark_arrived(m.dst, *r, m.src, m.number)) return;
  advance(m.dst, *r);
  pump(m.dst);
}

bool OpSimulation::mark_arrived(int node, Running& r, int peer, uint32_t number) {
  const Receives& table = *r.receives;
  const auto it =
      std::lower_bound(table.begin(), table.end(), std::make_pair(key(peer, number), uint32_t{0}));
  if (it == table.end() || it->first != key(peer, number) || r.state[it->second] != 0) {
    fail("node " + std::to_string(node) + " got message " + std::to_string(number) + " of slice " +
         std::to_string(r.slice) + " from node " + std::to_string(peer) +
         ", which its plan does not expect (or got it twice)");
    return false;
  }
  r.state[it->second] = 1;
  return true;
}

}  // namespace plexus::sim
