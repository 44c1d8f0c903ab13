#include "daemon/control/comm_successor.h"

#include <algorithm>
#include <cstring>

namespace plexus::daemon {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool kept(const std::vector<int>& excluded, int rank) {
  return !std::binary_search(excluded.begin(), excluded.end(), rank);
}

// Two lanes, each over the parent's both words, a tag and every value.
CommToken derive(const CommToken& parent, uint64_t tag, const std::vector<uint64_t>& values) {
  uint64_t words[2];
  std::memcpy(words, parent.data(), sizeof(words));
  uint64_t lanes[2] = {mix(words[0] ^ tag ^ 1), mix(words[1] ^ tag ^ 2)};
  for (uint64_t& lane : lanes) {
    lane = mix(lane ^ words[0]);
    lane = mix(lane ^ words[1]);
    lane = mix(lane ^ values.size());
    for (uint64_t v : values) lane = mix(lane ^ v);
  }
  CommToken out;
  std::memcpy(out.data(), lanes, sizeof(lanes));
  return out;
}

}  // namespace

CommToken successor_token(const CommToken& parent, const std::vector<int>& excluded) {
  std::vector<uint64_t> values;
  for (int r : excluded) values.push_back(static_cast<uint32_t>(r));
  return derive(parent, 0x736872696e6b0000ull /* "shrink" */, values);
}

CommToken growth_token(const CommToken& parent, uint32_t sequence) {
  return derive(parent, 0x67726f7774680000ull /* "growth" */, {sequence});
}

std::string exclude_problem(const std::vector<int>& excluded, int nranks, int caller) {
  if (static_cast<int>(excluded.size()) >= nranks) {
    return std::to_string(excluded.size()) + " ranks excluded of " + std::to_string(nranks) +
           ": none would be left";
  }
  for (size_t i = 0; i < excluded.size(); ++i) {
    const int r = excluded[i];
    if (r < 0 || r >= nranks) {
      return "rank " + std::to_string(r) + " to exclude is outside 0.." +
             std::to_string(nranks - 1);
    }
    if (i > 0 && excluded[i - 1] >= r) return "the ranks to exclude are not ascending and distinct";
    if (r == caller) return "rank " + std::to_string(r) + " excludes itself";
  }
  return {};
}

int successor_rank(const std::vector<int>& excluded, int rank) {
  return rank - static_cast<int>(std::lower_bound(excluded.begin(), excluded.end(), rank) -
                                 excluded.begin());
}

NodeRendezvous::Successor successor_of(const Comm& parent, const std::vector<int>& excluded) {
  NodeRendezvous::Successor out;
  out.parent = parent.token();
  out.excluded = excluded;
  const NodeSpan& span = *parent.span();
  for (int r = 0; r < parent.nranks(); ++r) {
    if (!kept(excluded, r)) continue;
    const auto node = static_cast<size_t>(span.topology.rank_node[static_cast<size_t>(r)]);
    auto& entry = out.expected[span.node_ids[node]];
    entry.name = span.topology.node_names[node];
    entry.parent_ranks.push_back(r);
    entry.ranks.push_back(successor_rank(excluded, r));
  }
  return out;
}

common::Result<NodeRendezvous::Successor> successor_for(const Comm* parent,
                                                        const CommToken& parent_token,
                                                        const std::vector<int>& excluded,
                                                        const CommToken& token, int nranks,
                                                        const std::string& here) {
  const std::string of = "the shrink of communicator " + token_prefix(parent_token);
  if (parent == nullptr || !parent->span()) {
    return common::fail("node " + here + " holds no communicator " + token_prefix(parent_token) +
                        " (the root of " + of + " is the node of its lowest kept rank)");
  }
  if (std::string problem = exclude_problem(excluded, parent->nranks(), -1); !problem.empty()) {
    return common::fail(of + ": " + problem);
  }
  if (successor_token(parent_token, excluded) != token ||
      nranks != parent->nranks() - static_cast<int>(excluded.size())) {
    return common::fail(of + ": its token or size does not follow from the ranks excluded");
  }
  return successor_of(*parent, excluded);
}

size_t successor_root(const Comm& parent, const std::vector<int>& excluded) {
  int first = 0;
  while (!kept(excluded, first)) ++first;  // exclude_problem: one is kept
  return static_cast<size_t>(parent.span()->topology.rank_node[static_cast<size_t>(first)]);
}

}  // namespace plexus::daemon
