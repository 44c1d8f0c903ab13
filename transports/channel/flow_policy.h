// How the frames of one flow (a job, to the daemon) share a channel with other flows: a
// traffic class, served in strict priority with a floor for the lower classes, and a weight
// for deficit round robin within the class (transports/channel/send_scheduler.h). Flows are
// small integers that the owner assigns; the table maps them to policies and may change at
// run time (the scheduler reads it at every decision). Single-threaded, like the channels
// that read it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace plexus::transports {

// In priority order: a class is served only when the ones before it have nothing waiting,
// but for its floor (SendScheduler::Settings::floor).
enum class TrafficClass : uint8_t { kLatency = 0, kBulk = 1, kBackground = 2 };
inline constexpr size_t kTrafficClasses = 3;

// "latency", "bulk", "background".
const char* traffic_class_name(TrafficClass c);
std::optional<TrafficClass> parse_traffic_class(std::string_view name);
// "" or why `name` is not a class (names the three).
std::string check_traffic_class(std::string_view name);

struct FlowPolicy {
  TrafficClass traffic_class = TrafficClass::kBulk;
  uint32_t weight = 1;  // kMinWeight..kMaxWeight
  bool operator==(const FlowPolicy&) const = default;
};

inline constexpr uint32_t kMinWeight = 1;
inline constexpr uint32_t kMaxWeight = 1000;

// "" or why `weight` is not one (names the bounds).
std::string check_weight(int64_t weight);

class FlowPolicies {
 public:
  // Flows never set have the default policy.
  const FlowPolicy& of(uint32_t flow) const {
    return flow < policies_.size() ? policies_[flow] : default_;
  }
  void set(uint32_t flow, FlowPolicy policy);
  // Changes with every set(): schedulers refile their flows when it moves.
  uint64_t version() const { return version_; }

 private:
  FlowPolicy default_{};
  uint64_t version_ = 0;
  std::vector<FlowPolicy> policies_;  // by flow
};

}  // namespace plexus::transports
