#include "tools/plexusctl/events_view.h"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace plexus::ctl {

void print_events_header() {
  std::printf("%-24s %-8s %-12s %s\n", "TIME (UTC)", "SEVERITY", "KIND", "MESSAGE");
}

void print_event(const std::string& line, bool as_json) {
  if (as_json) {
    std::printf("%s\n", line.c_str());
    return;
  }
  const nlohmann::json event = nlohmann::json::parse(line, nullptr, false);
  if (event.is_discarded() || !event.is_object()) {
    std::printf("%s\n", line.c_str());
    return;
  }
  std::printf("%-24s %-8s %-12s %s\n", event.value("time", "").c_str(),
              event.value("severity", "").c_str(), event.value("kind", "").c_str(),
              event.value("message", "").c_str());
}

}  // namespace plexus::ctl
