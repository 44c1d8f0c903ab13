// The leader's proposals, the other nodes' answers and holds, and the change in force per op.
#include "daemon/engine/speed_agreement.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/upper_median.h"

namespace plexus::daemon {
namespace {

const std::vector<double> kAlike;

std::string figure(double x, const char* format) {
  char text[32];
  std::snprintf(text, sizeof(text), format, x);
  return text;
}

}  // namespace

SpeedAgreement::SpeedAgreement(int nodes, int my_node, Settings settings)
    : nodes_(nodes), my_node_(my_node), settings_(settings) {}

std::vector<int> SpeedAgreement::waiting_for() const {
  if (!holding_) return {};
  if (!leader()) return {0};
  std::vector<int> nodes;
  for (int node = 1; node < nodes_; ++node) {
    if (!ready_[static_cast<size_t>(node)]) nodes.push_back(node);
  }
  return nodes;
}

double SpeedAgreement::reference_of(std::span<const double> bandwidth) {
  return upper_median_of_positive(bandwidth);
}

std::vector<double> SpeedAgreement::speeds_of(std::span<const double> bandwidth) const {
  const double reference = reference_of(bandwidth);
  if (reference <= 0) return {};
  const std::vector<double>& current = agreed_.empty() ? kAlike : agreed_.back().speeds;
  std::vector<double> speeds;
  bool any_slow = false;
  for (size_t i = 0; i < bandwidth.size(); ++i) {
    const double b = bandwidth[i];
    const double ratio = b > 0 ? b / reference : 1.0;
    const bool slow_now = i < current.size() && current[i] < 1.0;
    if (ratio >= (slow_now ? recovered_above() : settings_.alike_above)) {
      speeds.push_back(1.0);
      continue;
    }
    const double steps = std::max(1.0, std::floor(ratio * kSpeedSteps));
    speeds.push_back(steps / kSpeedSteps);
    any_slow = true;
  }
  if (!any_slow) speeds.clear();
  return speeds;
}

bool SpeedAgreement::differs(const std::vector<double>& a, const std::vector<double>& b) const {
  for (size_t i = 0; i < static_cast<size_t>(nodes_); ++i) {
    const double x = i < a.size() ? a[i] : 1.0;
    const double y = i < b.size() ? b[i] : 1.0;
    if (std::abs(x - y) >= settings_.change_at_least) return true;
  }
  return false;
}

std::vector<SpeedAgreement::Message> SpeedAgreement::measured(std::span<const double> bandwidth,
                                                              std::span<const std::string> names,
                                                              uint64_t first_unstarted,
                                                              TimePoint now) {
  if (!leader() || proposing_ || nodes_ < 2 || bandwidth.size() != static_cast<size_t>(nodes_)) {
    return {};
  }
  std::vector<double> speeds = speeds_of(bandwidth);
  const std::vector<double>& current = agreed_.empty() ? kAlike : agreed_.back().speeds;
  if (!differs(speeds, current)) {
    candidate_since_ = {};
    return {};
  }
  if (candidate_since_ == TimePoint{} || differs(speeds, candidate_)) {
    candidate_ = std::move(speeds);
    candidate_since_ = now;
    return {};
  }
  if (now - candidate_since_ < settings_.steady_for) return {};
  candidate_ = std::move(speeds);  // steady: the latest measure, not the first one seen
  // The slowest node and the reference figure, for the nodes' events.
  const double reference = reference_of(bandwidth);
  std::string reason;
  if (candidate_.empty()) {
    reason = "every node's bandwidth is within " +
             figure(100.0 * (1.0 - settings_.alike_above), "%.0f") + " % of the median (" +
             figure(reference / 1e6, "%.1f") + " MB/s) again";
  } else {
    const auto slowest = std::min_element(candidate_.begin(), candidate_.end());
    const auto node = static_cast<size_t>(slowest - candidate_.begin());
    reason = "node " + (node < names.size() ? names[node] : std::to_string(node)) + " runs at " +
             figure(bandwidth[node] / 1e6, "%.1f") + " MB/s, " +
             figure(bandwidth[node] / reference, "%.2f") + " of the median node's " +
             figure(reference / 1e6, "%.1f") + " MB/s";
  }
  proposing_ = true;
  holding_ = true;
  ++generation_;
  proposed_ = std::move(candidate_);
  // Whole bytes/s, as the commit carries it: the leader plans with what the others get.
  proposed_reference_ = std::floor(std::min(reference, kMaxBandwidth));
  proposed_reason_ = std::move(reason);
  candidate_since_ = {};
  ready_.assign(static_cast<size_t>(nodes_), false);
  ready_[0] = true;
  ready_seq_ = first_unstarted;
  std::vector<Message> out;
  for (int node = 1; node < nodes_; ++node) {
    out.push_back(Message{node, Kind::kPropose, generation_, 0, {}, {}});
  }
  return out;
}

common::Result<std::vector<SpeedAgreement::Message>> SpeedAgreement::receive(
    const Message& m, uint64_t first_unstarted) {
  switch (m.kind) {
    case Kind::kPropose:
      if (leader() || m.node != 0) {
        return common::fail("a speed proposal from a node that does not lead the communicator");
      }
      holding_ = true;
      generation_ = m.generation;
      return std::vector<Message>{Message{0, Kind::kReady, generation_, first_unstarted, {}, {}}};
    case Kind::kReady: {
      if (!leader() || !proposing_ || m.generation != generation_ || m.node <= 0 ||
          m.node >= nodes_) {
        return common::fail("an answer to no speed proposal of this node");
      }
      ready_[static_cast<size_t>(m.node)] = true;
      ready_seq_ = std::max(ready_seq_, m.seq);
      if (std::find(ready_.begin(), ready_.end(), false) != ready_.end())
        return std::vector<Message>{};
      const uint64_t from = std::max(ready_seq_, first_unstarted);
      std::vector<Message> out;
      for (int node = 1; node < nodes_; ++node) {
        out.push_back(Message{node, Kind::kCommit, generation_, from, proposed_, proposed_reason_,
                              proposed_reference_});
      }
      commit(from, std::move(proposed_), proposed_reference_, std::move(proposed_reason_));
      proposing_ = false;
      holding_ = false;
      return out;
    }
    case Kind::kCommit:
      if (leader() || m.node != 0 || !holding_ || m.generation != generation_) {
        return common::fail("a speed change this node was not asked about");
      }
      if (m.seq < first_unstarted) {
        return common::fail("a speed change from collective #" + std::to_string(m.seq) +
                            ", which this node already started");
      }
      if (!m.speeds.empty() && m.speeds.size() != static_cast<size_t>(nodes_)) {
        return common::fail("a speed change for " + std::to_string(m.speeds.size()) +
                            " nodes, not " + std::to_string(nodes_));
      }
      for (double speed : m.speeds) {
        if (!(speed > 0.0 && speed <= 1.0)) {
          return common::fail("a speed change with a speed outside (0, 1]");
        }
      }
      if (!(m.reference >= 0 && m.reference <= kMaxBandwidth)) {
        return common::fail("a speed change with a bandwidth outside 0 .. 1e13 bytes/s");
      }
      commit(m.seq, m.speeds, m.reference, m.reason);
      holding_ = false;
      return std::vector<Message>{};
  }
  return common::fail("a speed message of unknown kind " +
                      std::to_string(static_cast<uint32_t>(m.kind)));
}

void SpeedAgreement::commit(uint64_t from_seq, std::vector<double> speeds, double reference,
                            std::string reason) {
  committed_ =
      Message{my_node_, Kind::kCommit, generation_, from_seq, speeds, std::move(reason), reference};
  agreed_.push_back(Agreed{from_seq, std::move(speeds), reference});
}

const SpeedAgreement::Agreed* SpeedAgreement::in_force(uint64_t seq) {
  while (agreed_.size() >= 2 && agreed_[1].from <= seq) agreed_.erase(agreed_.begin());
  if (agreed_.empty() || agreed_.front().from > seq) return nullptr;
  return &agreed_.front();
}

const std::vector<double>& SpeedAgreement::speeds_for(uint64_t seq) {
  const Agreed* agreed = in_force(seq);
  return agreed != nullptr ? agreed->speeds : kAlike;
}

double SpeedAgreement::reference_for(uint64_t seq) {
  const Agreed* agreed = in_force(seq);
  return agreed != nullptr ? agreed->reference : 0;
}

std::optional<SpeedAgreement::Message> SpeedAgreement::take_committed() {
  std::optional<Message> out = std::move(committed_);
  committed_.reset();
  return out;
}

}  // namespace plexus::daemon
