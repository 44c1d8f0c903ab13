// Sends and recvs matched by tag, and recvs from any source, within a node and between
// nodes (plexusd processes on loopback): a recv takes the oldest message from its source
// with its tag, skipping other tags; one sender's messages with one tag keep their order; a
// recv from any source says who sent; and it fails instead of hanging once nobody is left.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
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

class TaggedP2pTest : public ::testing::TestWithParam<std::vector<int>> {};

// Ranks 1 and 2 send to rank 0 in one order; rank 0 receives in another, by tag.
TEST_P(TaggedP2pTest, RecvsTakeMessagesByTagAndSourceInEachSendersOrder) {
  const std::vector<int>& rank_node = GetParam();
  auto nodes = start_nodes(*std::max_element(rank_node.begin(), rank_node.end()) + 1);
  auto results = run_ranks_across(
      sockets_for(nodes, rank_node),
      [&](int rank, int nranks, const plexus_unique_id_t& id) -> std::string {
        plexus_comm_t comm = nullptr;
        if (plexus_result_t r = plexus_comm_init_rank(&comm, nranks, id, rank);
            r != PLEXUS_SUCCESS) {
          return call_failed("init", r);
        }
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
            error = wait_for(plexus_recv_tagged(got.data(), kCount, PLEXUS_FLOAT32,
                                                PLEXUS_ANY_SOURCE, 9, &from, comm, &req),
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
      },
      std::chrono::seconds(60));
  EXPECT_EQ(failures(results), "") << logs(nodes);
}

// Ranks 0 and 1 on one node, rank 2 on another; and the three ranks on three nodes.
INSTANTIATE_TEST_SUITE_P(Placements, TaggedP2pTest,
                         ::testing::Values(std::vector<int>{0, 0, 1}, std::vector<int>{0, 1, 2}),
                         [](const ::testing::TestParamInfo<std::vector<int>>& param) {
                           std::string name;
                           for (int n : param.param) name += static_cast<char>('a' + n);
                           return name;
                         });

class AnySourceOrphanTest : public ::testing::TestWithParam<std::vector<int>> {};

// Rank 1 leaves (destroys its communicator): rank 0's recv from any source can never
// complete and fails with PEER_LOST saying so, whether it was posted before or after.
TEST_P(AnySourceOrphanTest, ARecvFromAnySourceFailsOnceEveryOtherRankLeft) {
  const std::vector<int>& rank_node = GetParam();
  auto nodes = start_nodes(*std::max_element(rank_node.begin(), rank_node.end()) + 1);
  auto results = run_ranks_across(
      sockets_for(nodes, rank_node),
      [&](int rank, int nranks, const plexus_unique_id_t& id) -> std::string {
        plexus_comm_t comm = nullptr;
        if (plexus_result_t r = plexus_comm_init_rank(&comm, nranks, id, rank);
            r != PLEXUS_SUCCESS) {
          return call_failed("init", r);
        }
        if (rank == 1) {
          // One message first, so that rank 0 knows it is up; then it leaves.
          std::vector<float> one = message(1);
          plexus_request_t req = nullptr;
          if (std::string e =
                  wait_for(plexus_send_tagged(one.data(), kCount, PLEXUS_FLOAT32, 0, 4, comm, &req),
                           &req, "send");
              !e.empty()) {
            return e;
          }
          return plexus_comm_destroy(comm) == PLEXUS_SUCCESS ? "" : "destroy failed";
        }
        if (std::string e = receive(comm, PLEXUS_ANY_SOURCE, 4, 1, 1); !e.empty()) return e;
        std::vector<float> got(kCount);
        int from = -2;
        plexus_request_t req = nullptr;
        plexus_result_t r = plexus_recv_tagged(got.data(), kCount, PLEXUS_FLOAT32,
                                               PLEXUS_ANY_SOURCE, 4, &from, comm, &req);
        if (r == PLEXUS_SUCCESS) r = plexus_wait(&req);
        if (r != PLEXUS_ERR_PEER_LOST) {
          return "a recv from any source after every other rank left: " + describe("recv", r);
        }
        const std::string e = plexus_get_last_error();
        if (e.find("every other rank") == std::string::npos) return "the error says: " + e;
        if (from != PLEXUS_ANY_SOURCE) {
          return "a failed recv set its source to " + std::to_string(from);
        }
        plexus_comm_destroy(comm);
        return "";
      },
      std::chrono::seconds(30));
  EXPECT_EQ(failures(results), "") << logs(nodes);
}

INSTANTIATE_TEST_SUITE_P(Placements, AnySourceOrphanTest,
                         ::testing::Values(std::vector<int>{0, 0}, std::vector<int>{0, 1}),
                         [](const ::testing::TestParamInfo<std::vector<int>>& param) {
                           std::string name;
                           for (int n : param.param) name += static_cast<char>('a' + n);
                           return name;
                         });

}  // namespace
}  // namespace plexus::test
