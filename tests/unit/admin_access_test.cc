// Who a local connection is, as access decisions read it: credentials that cannot be read
// are a reason to refuse, never root's.
#include "daemon/control/admin_access.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/unique_fd.h"

namespace plexus::daemon {
namespace {

using ::testing::HasSubstr;

// A uid that is neither root nor this process's.
uid_t stranger() { return ::geteuid() == 0 ? 65534 : ::geteuid() + 1; }

TEST(AdminAccessTest, ALocalSocketsPeerIsThisProcessByItsCredentials) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  common::UniqueFd a(fds[0]), b(fds[1]);
  const common::Result<PeerCredentials> creds = read_peer_credentials(a.get());
  ASSERT_EQ(creds.error(), "");
  EXPECT_EQ(creds->pid, ::getpid());
  EXPECT_EQ(creds->uid, ::geteuid());  // the effective ids, as the kernel records them
  EXPECT_EQ(creds->gid, ::getegid());
}

TEST(AdminAccessTest, CredentialsThatCannotBeReadAreAReasonAndNeverRoot) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);  // not a socket: SO_PEERCRED fails (ENOTSOCK)
  common::UniqueFd r(fds[0]), w(fds[1]);
  const common::Result<PeerCredentials> creds = read_peer_credentials(r.get());
  EXPECT_THAT(creds.error(), HasSubstr("SO_PEERCRED"));
  // No credentials come with the reason: nothing here may read as uid 0.
  EXPECT_FALSE(creds.ok());
}

TEST(AdminAccessTest, RootAndThisUserAreAdminsOthersAreNot) {
  EXPECT_TRUE(is_admin(AdminPolicy{}, PeerCredentials{1, 0, 0}));
  EXPECT_TRUE(is_admin(AdminPolicy{}, PeerCredentials{1, ::geteuid(), 0}));
  EXPECT_FALSE(is_admin(AdminPolicy{}, PeerCredentials{1, stranger(), 65534}));
}

}  // namespace
}  // namespace plexus::daemon
