#include "daemon/engine/session.h"

namespace plexus::daemon {

std::string job_label(std::string_view name) {
  std::string label;
  for (char c : name.substr(0, 64)) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '_' || c == '.' || c == ':' || c == '-';
    label += plain ? c : '_';
  }
  return label.empty() ? "unnamed" : label;
}

std::string Session::describe() const {
  std::string text = "pid " + std::to_string(creds_.pid);
  if (!identity_.process_name.empty()) text += " (" + identity_.process_name + ")";
  return text;
}

}  // namespace plexus::daemon
