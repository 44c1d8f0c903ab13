// Sends and recvs matched by tag, and recvs from any source, within a node and between
// nodes (plexusd processes on loopback): a recv takes the oldest message from its source
// with its tag, skipping other tags; one sender's messages with one tag keep their order; a
// recv from any source says who sent; and it fails instead of hanging once nobody is left.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/integration/collective_cases.h"
#include "tests/integration/loopback_nodes.h"
#include "tests/integration/rank_processes.h"

namespace plexus::test {
namespace {

constexpr size_t kCount = 3000;  // floats: several chunks' worth is not needed, exactness is

std::vector<float> message(float value) {
  std::vector<float> v(kCount);
  for (size_t j = 0; j < kCount; ++j) v[j] = value + static_cast<float>(j % 97);
  return v;
}

// "" when `got` is message(value).
std::string check(const std::vector<float>& got, float value, const std::string& what) {
  if (got == message(value)) return "";
  return what + " received " + std::to_string(got[0]) + "..., not the message " +
         std::to_string(value);
}

// Rank `rank` sends (value, tag) pairs to rank 0, in order, and waits for all of them.
std::string send_all(int rank, plexus_comm_t comm,
                     const std::vector<std::pair<float, int>>& sends) {
  std::vector<std::vector<float>> data;
  std::vector<plexus_request_t> requests(sends.size());
  for (size_t i = 0; i < sends.size(); ++i) {
    data.push_back(message(sends[i].first));
    plexus_result_t r = plexus_send_tagged(data.back().data(), kCount, PLEXUS_FLOAT32, 0,
                                           sends[i].second, comm, &requests[i]);
    if (r != PLEXUS_SUCCESS) return "rank " + std::to_string(rank) + ": " + call_failed("send", r);
  }
  for (auto& req : requests) {
    if (plexus_result_t r = plexus_wait(&req); r != PLEXUS_SUCCESS) return call_failed("wait", r);
  }
  return "";
}

// Receives one message from `source` (or any) with `tag`; "" when it is message(value) from
// `want_source`.
std::string receive(plexus_comm_t comm, int source, int tag, float value, int want_source) {
  std::vector<float> got(kCount);
  int from = -2;
  plexus_request_t req = nullptr;
  const std::string what =
      "recv(source " + std::to_string(source) + ", tag " + std::to_string(tag) + ")";
  if (std::string e = wait_for(
          plexus_recv_tagged(got.data(), kCount, PLEXUS_FLOAT32, source, tag, &from, comm, &req),
          &req, what.c_str());
      !e.empty()) {
    return e;
  }
  if (from != want_source) {
    return what + " says it came from rank " + std::to_string(from) + ", not " +
           std::to_string(want_source);
  }
  return check(got, value, what);
}

// Starts a node per index in `rank_node` and runs `body` on each rank with its communicator
// (which the body destroys); every rank must return "".
void run_placed(const std::vector<int>& rank_node,
                const std::function<std::string(int rank, plexus_comm_t comm)>& body) {
  auto nodes = start_nodes(*std::max_element(rank_node.begin(), rank_node.end()) + 1);
  auto results = run_ranks_across(
      sockets_for(nodes, rank_node),
      [&](int rank, int nranks, const plexus_unique_id_t& id) -> std::string {
        plexus_comm_t comm = nullptr;
        if (plexus_result_t r = plexus_comm_init_rank(&comm, nranks, id, rank);
            r != PLEXUS_SUCCESS) {
          return call_failed("init", r);
        }
        return body(rank, comm);
      },
      std::chrono::seconds(60));
  EXPECT_EQ(failures(results), "") << logs(nodes);
}

// "aab": ranks 0 and 1 on node a, rank 2 on node b.
std::string placement_name(const ::testing::TestParamInfo<std::vector<int>>& param) {
  std::string name;
  for (int n : param.param) name += static_cast<char>('a' + n);
  return name;
}

class TaggedP2pTest : public ::testing::TestWithParam<std::vector<int>> {};

// Ranks 1 and 2 send to rank 0 in one order; rank 0 receives in another, by tag.
TEST_P(TaggedP2pTest, RecvsTakeMessagesByTagAndSourceInEachSendersOrder) {
  run_placed(GetParam(), [&](int rank, plexus_comm_t comm) -> std::string {
    std::string error;
    if (rank == 1) {
      error = send_all(rank, comm, {{107, 7}, {105, 5}, {131, 3}, {132, 3}, {191, 9}});
    } else if (rank == 2) {
      error = send_all(rank, comm, {{205, 5}, {207, 7}, {231, 3}, {232, 3}, {292, 9}});
    } else {
      struct Want {
        int source, tag;
        float value;
        int from;
      };
      for (const Want& w : std::vector<Want>{{1, 5, 105, 1},
                                             {2, 7, 207, 2},
                                             {1, 3, 131, 1},
                                             {2, 3, 231, 2},
                                             {1, 3, 132, 1},
                                             {2, 3, 232, 2},
                                             {PLEXUS_ANY_SOURCE, 7, 107, 1},
                                             {PLEXUS_ANY_SOURCE, 5, 205, 2}}) {
        error = receive(comm, w.source, w.tag, w.value, w.from);
        if (!error.empty()) break;
      }
      // Tag 9 from both: in whichever order they came, each says who sent it.
      std::set<int> senders;
      for (int i = 0; i < 2 && error.empty(); ++i) {
        std::vector<float> got(kCount);
        int from = -2;
        plexus_request_t req = nullptr;
        error = wait_for(plexus_recv_tagged(got.data(), kCount, PLEXUS_FLOAT32, PLEXUS_ANY_SOURCE,
                                            9, &from, comm, &req),
                         &req, "recv from any source, tag 9");
        if (error.empty() && (from < 1 || from > 2)) {
          error = "a recv from any source says rank " + std::to_string(from) + " sent it";
        }
        if (error.empty()) error = check(got, from == 1 ? 191 : 292, "tag 9");
        senders.insert(from);
      }
      if (error.empty() && senders.size() != 2) error = "both tag 9 recvs named one sender";
    }
    if (!error.empty()) return error;
    return plexus_comm_destroy(comm) == PLEXUS_SUCCESS ? "" : "destroy failed";
  });
}

// Ranks 0 and 1 on one node, rank 2 on another; and the three ranks on three nodes.
INSTANTIATE_TEST_SUITE_P(Placements, TaggedP2pTest,
                         ::testing::Values(std::vector<int>{0, 0, 1}, std::vector<int>{0, 1, 2}),
                         placement_name);

class AnySourceOrphanTest : public ::testing::TestWithParam<std::vector<int>> {};

// Sends `value` tagged `tag` to `peer` and waits; "" or why not.
std::string send_one(plexus_comm_t comm, int peer, int tag, float value) {
  std::vector<float> data = message(value);
  plexus_request_t req = nullptr;
  return wait_for(plexus_send_tagged(data.data(), kCount, PLEXUS_FLOAT32, peer, tag, comm, &req),
                  &req, "send");
}

// Receives one message from `peer` tagged `tag`; "" or why not.
std::string recv_one(plexus_comm_t comm, int peer, int tag) {
  std::vector<float> got(kCount);
  plexus_request_t req = nullptr;
  return wait_for(
      plexus_recv_tagged(got.data(), kCount, PLEXUS_FLOAT32, peer, tag, nullptr, comm, &req), &req,
      "recv");
}

// "" when the request failed with PEER_LOST and an error containing `text`.
std::string failed_peer_lost(plexus_request_t* req, const std::string& text) {
  const plexus_result_t r = plexus_wait(req);
  if (r != PLEXUS_ERR_PEER_LOST) return describe("recv", r);
  const std::string e = plexus_get_last_error();
  return e.find(text) != std::string::npos ? "" : "the error says: " + e;
}

// Rank 0 waits to receive from any rank. Rank 2 leaves: the recv goes on waiting and takes
// rank 1's message. Then rank 0 waits again and rank 1 leaves too: with nobody left to send,
// that recv fails naming the reason, and one posted afterwards fails at once. Each departure
// comes after the recv was posted (the leaver first receives a message rank 0 sends after
// posting it).
TEST_P(AnySourceOrphanTest, ARecvFromAnySourceWaitsWhileAnyRankMayStillSendAndFailsAfter) {
  run_placed(GetParam(), [&](int rank, plexus_comm_t comm) -> std::string {
    auto leave = [&] {
      return plexus_comm_destroy(comm) == PLEXUS_SUCCESS ? "" : "destroy failed";
    };
    if (rank == 2) {
      if (std::string e = recv_one(comm, 0, 5); !e.empty()) return e;
      return leave();
    }
    if (rank == 1) {
      if (std::string e = recv_one(comm, 0, 6); !e.empty()) return e;
      if (std::string e = send_one(comm, 0, 4, 1); !e.empty()) return e;
      if (std::string e = recv_one(comm, 0, 7); !e.empty()) return e;
      return leave();
    }
    std::vector<float> got(kCount);
    int from = -2;
    plexus_request_t first = nullptr;
    if (plexus_result_t r = plexus_recv_tagged(got.data(), kCount, PLEXUS_FLOAT32,
                                               PLEXUS_ANY_SOURCE, 4, &from, comm, &first);
        r != PLEXUS_SUCCESS) {
      return call_failed("recv from any source", r);
    }
    if (std::string e = send_one(comm, 2, 5, 0); !e.empty()) return "to rank 2: " + e;
    // A recv naming rank 2 fails once it has left: it has then.
    plexus_request_t named = nullptr;
    if (plexus_result_t r =
            plexus_recv_tagged(got.data(), kCount, PLEXUS_FLOAT32, 2, 9, nullptr, comm, &named);
        r != PLEXUS_SUCCESS) {
      return call_failed("recv from rank 2", r);
    }
    if (std::string e = failed_peer_lost(&named, "rank 2"); !e.empty()) {
      return "a recv from rank 2 after it left: " + e;
    }
    if (std::string e = send_one(comm, 1, 6, 0); !e.empty()) return "to rank 1: " + e;
    if (std::string e = wait_for(PLEXUS_SUCCESS, &first, "recv from any source"); !e.empty()) {
      return e + " (rank 1 was still there)";
    }
    if (from != 1) return "the recv from any source says rank " + std::to_string(from);
    if (std::string e = check(got, 1, "recv from any source"); !e.empty()) return e;
    plexus_request_t second = nullptr;
    if (plexus_result_t r = plexus_recv_tagged(got.data(), kCount, PLEXUS_FLOAT32,
                                               PLEXUS_ANY_SOURCE, 4, &from, comm, &second);
        r != PLEXUS_SUCCESS) {
      return call_failed("recv from any source", r);
    }
    if (std::string e = send_one(comm, 1, 7, 0); !e.empty()) return "to rank 1: " + e;
    if (std::string e = failed_peer_lost(&second, "every other rank"); !e.empty()) {
      return "a waiting recv from any source after every other rank left: " + e;
    }
    plexus_request_t third = nullptr;
    plexus_result_t r = plexus_recv_tagged(got.data(), kCount, PLEXUS_FLOAT32, PLEXUS_ANY_SOURCE, 4,
                                           &from, comm, &third);
    if (r == PLEXUS_SUCCESS) {
      if (std::string e = failed_peer_lost(&third, "every other rank"); !e.empty()) {
        return "a recv from any source posted after every other rank left: " + e;
      }
    } else if (r != PLEXUS_ERR_PEER_LOST) {
      return describe("recv", r);
    }
    plexus_comm_destroy(comm);
    return "";
  });
}

INSTANTIATE_TEST_SUITE_P(Placements, AnySourceOrphanTest,
                         ::testing::Values(std::vector<int>{0, 0, 0}, std::vector<int>{0, 1, 2}),
                         placement_name);

}  // namespace
}  // namespace plexus::test
