#include "daemon/session.h"

namespace plexus::daemon {

std::string Session::describe() const {
  std::string text = "pid " + std::to_string(creds_.pid);
  if (!process_name.empty()) text += " (" + process_name + ")";
  return text;
}

}  // namespace plexus::daemon
