#include "daemon/control/admin_access.h"

#include <grp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace plexus::daemon {

AdminPolicy admin_policy(const std::string& group_name) {
  AdminPolicy policy;
  if (group_name.empty()) return policy;
  const group* g = ::getgrnam(group_name.c_str());
  if (g == nullptr) {
    throw std::runtime_error("--admin-group " + group_name + ": no such group on this host");
  }
  policy.group = g->gr_gid;
  policy.group_name = group_name;
  return policy;
}

std::vector<gid_t> process_groups(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::vector<gid_t> groups;
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Groups:", 0) != 0) continue;
    std::istringstream ids(line.substr(7));
    for (gid_t id = 0; ids >> id;) groups.push_back(id);
    break;
  }
  return groups;
}

bool is_admin(const AdminPolicy& policy, const PeerCredentials& creds) {
  if (creds.uid == 0 || creds.uid == ::geteuid()) return true;
  if (!policy.group) return false;
  if (creds.gid == *policy.group) return true;
  const std::vector<gid_t> groups = process_groups(creds.pid);
  return std::find(groups.begin(), groups.end(), *policy.group) != groups.end();
}

std::string admin_requirement(const AdminPolicy& policy) {
  const std::string own = "plexusd's own user (uid " + std::to_string(::geteuid()) + ")";
  if (!policy.group) return "root or " + own;
  return "root, " + own + " or a member of group " + policy.group_name + " (--admin-group)";
}

common::Result<PeerCredentials> read_peer_credentials(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return common::fail(std::string("getsockopt(SO_PEERCRED): ") + std::strerror(errno));
  }
  if (len != sizeof(cred)) {
    return common::fail("getsockopt(SO_PEERCRED) gave " + std::to_string(len) + " bytes, not " +
                        std::to_string(sizeof(cred)));
  }
  return PeerCredentials{cred.pid, cred.uid, cred.gid};
}

}  // namespace plexus::daemon
