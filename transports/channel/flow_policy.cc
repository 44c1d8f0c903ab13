#include "transports/channel/flow_policy.h"

namespace plexus::transports {

const char* traffic_class_name(TrafficClass c) {
  switch (c) {
    case TrafficClass::kLatency:
      return "latency";
    case TrafficClass::kBulk:
      return "bulk";
    case TrafficClass::kBackground:
      return "background";
  }
  return "?";
}

std::optional<TrafficClass> parse_traffic_class(std::string_view name) {
  for (TrafficClass c : {TrafficClass::kLatency, TrafficClass::kBulk, TrafficClass::kBackground}) {
    if (name == traffic_class_name(c)) return c;
  }
  return std::nullopt;
}

std::string check_traffic_class(std::string_view name) {
  if (parse_traffic_class(name)) return {};
  return "class '" + std::string(name.substr(0, 64)) + "' is not one of latency, bulk, background";
}

std::string check_weight(int64_t weight) {
  if (weight >= kMinWeight && weight <= kMaxWeight) return {};
  return "weight " + std::to_string(weight) + " is out of range (a whole number from " +
         std::to_string(kMinWeight) + " to " + std::to_string(kMaxWeight) + ")";
}

void FlowPolicies::set(uint32_t flow, FlowPolicy policy) {
  if (flow >= policies_.size()) policies_.resize(flow + 1, default_);
  policies_[flow] = policy;
  ++version_;
}

}  // namespace plexus::transports
