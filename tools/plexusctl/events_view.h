// plexusctl events: the daemon's event lines, as a table or as the JSON lines themselves.
#pragma once

#include <string>

namespace plexus::ctl {

// One event line (a JSON object) as "TIME SEVERITY KIND MESSAGE"; a line that is not
// valid JSON is printed as it is.
void print_event(const std::string& line, bool as_json);
void print_events_header();

}  // namespace plexus::ctl
