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

std::string describe_process(pid_t pid, const std::string& process_name) {
  std::string text = "pid " + std::to_string(pid);
  if (!process_name.empty()) text += " (" + process_name + ")";
  return text;
}

std::string Session::describe() const { return describe_process(creds_.pid, process_name()); }

}  // namespace plexus::daemon
