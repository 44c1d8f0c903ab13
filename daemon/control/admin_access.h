// Who may run admin commands (plexusctl nic drain|undrain): root, plexusd's own user, and
// the members of --admin-group (as the process's primary or a supplementary group, read
// from /proc when the request comes). Everything else plexusctl asks is read-only and open
// to every local user.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "daemon/engine/session.h"

namespace plexus::daemon {

struct AdminPolicy {
  std::optional<gid_t> group;
  std::string group_name;
};

// Throws std::runtime_error naming `group_name` when no such group exists; empty: none.
AdminPolicy admin_policy(const std::string& group_name);
bool is_admin(const AdminPolicy& policy, const PeerCredentials& creds);
// "root, plexusd's own user (uid 998) or a member of group plexus-admin (--admin-group)"
std::string admin_requirement(const AdminPolicy& policy);
// The groups process `pid` is in (its "Groups:" line in /proc/PID/status); empty when gone.
std::vector<gid_t> process_groups(pid_t pid);
// Who is at the other end of local socket `fd` (SO_PEERCRED), or the reason they cannot be
// read: the caller must refuse the connection then, as credentials it does not know must
// not pass for root's (a PeerCredentials is uid 0 until filled in).
common::Result<PeerCredentials> read_peer_credentials(int fd);

}  // namespace plexus::daemon
