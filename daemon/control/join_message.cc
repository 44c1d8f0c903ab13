#include "daemon/control/join_message.h"

#include <algorithm>
#include <cstring>

#include "daemon/control/node_rendezvous.h"

namespace plexus::daemon {

CommToken token_of(capnp::Data::Reader data) {
  CommToken token{};
  std::memcpy(token.data(), data.begin(), std::min(data.size(), token.size()));
  return token;
}

void write_join(node_control::Join::Builder out, const JoinMessage& join) {
  out.setToken(kj::arrayPtr(join.token.data(), join.token.size()));
  out.setNranks(static_cast<uint32_t>(join.nranks));
  auto ranks = out.initRanks(static_cast<unsigned>(join.ranks.size()));
  for (unsigned i = 0; i < ranks.size(); ++i) ranks.set(i, static_cast<uint32_t>(join.ranks[i]));
  out.setTimeoutMs(join.timeout_ms);
  out.setAlgorithm(join.algorithm);
  if (join.shrink) {
    out.setParent(kj::arrayPtr(join.shrink->parent.data(), join.shrink->parent.size()));
    auto excluded = out.initExcluded(static_cast<unsigned>(join.shrink->excluded.size()));
    for (unsigned i = 0; i < excluded.size(); ++i) {
      excluded.set(i, static_cast<uint32_t>(join.shrink->excluded[i]));
    }
  }
}

common::Result<JoinMessage> read_join(node_control::Join::Reader in) {
  const uint32_t nranks = in.getNranks();
  if (in.getToken().size() != sizeof(CommToken) || nranks == 0 || nranks > kMaxRanks ||
      in.getRanks().size() == 0 || in.getRanks().size() > nranks || in.getAlgorithm().size() > 32) {
    return common::fail("a malformed join");
  }
  JoinMessage join;
  join.token = token_of(in.getToken());
  join.nranks = static_cast<int>(nranks);
  for (uint32_t r : in.getRanks()) join.ranks.push_back(static_cast<int>(r));
  join.timeout_ms = std::min<uint32_t>(in.getTimeoutMs(), kMaxJoinTimeoutMs);
  join.algorithm = in.getAlgorithm().cStr();
  if (in.hasParent()) {
    // Bounded here only: checked against the parent at the root (successor_for).
    if (in.getParent().size() != sizeof(CommToken) || in.getExcluded().size() > kMaxRanks) {
      return common::fail("a malformed shrink join");
    }
    ShrinkOf shrink;
    shrink.parent = token_of(in.getParent());
    // A rank past INT_MAX wraps negative and is refused there.
    for (uint32_t r : in.getExcluded()) shrink.excluded.push_back(static_cast<int>(r));
    join.shrink = std::move(shrink);
  }
  return join;
}

}  // namespace plexus::daemon
