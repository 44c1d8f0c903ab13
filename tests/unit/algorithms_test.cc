// Every inter-node algorithm, run by the plan runner for 1..17 participants over an
// in-memory transport (tests/unit/in_memory_network.h): results must be exact.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "daemon/algorithms/algorithm.h"
#include "daemon/algorithms/cost_model.h"
#include "daemon/algorithms/plan_runner.h"
#include "tests/unit/in_memory_network.h"

namespace plexus::daemon::algo {
namespace {

using Word = uint32_t;  // wrapping sums are exact whatever the order
constexpr uint32_t kElem = sizeof(Word);

Word input(int participant, uint64_t index) {
  uint64_t x = (static_cast<uint64_t>(participant) + 1) * 0x9E3779B97F4A7C15ull + index * 31;
  x ^= x >> 29;
  return static_cast<Word>(x * 0xBF58476D1CE4E5B9ull >> 32);
}

void add_words(std::byte* inout, const std::byte* in, size_t bytes) {
  for (size_t i = 0; i < bytes; i += kElem) {
    Word a;
    Word b;
    std::memcpy(&a, inout + i, kElem);
    std::memcpy(&b, in + i, kElem);
    a += b;
    std::memcpy(inout + i, &a, kElem);
  }
}

class Endpoint : public PlanTransport {
 public:
  Endpoint(test::InMemoryNetwork* net, int me) : net_(net), me_(me) {}
  void post_send(int peer, uint32_t message, std::span<const std::byte> data) override {
    net_->post(me_, peer, message, data);
  }

 private:
  test::InMemoryNetwork* net_;
  int me_;
};

struct Participant {
  std::vector<Word> work;
  std::vector<Word> send;
};

std::span<std::byte> bytes_of(std::vector<Word>& v) {
  return {reinterpret_cast<std::byte*>(v.data()), v.size() * kElem};
}

// Runs every participant's plan for shapes made by `shape_for(me)`; fills `people` with
// the inputs first and returns the first failure.
std::string run_collective(Algorithm algorithm, int p, uint32_t seed,
                           const std::function<Shape(int)>& shape_for,
                           std::vector<Participant>& people) {
  std::vector<Plan> plans;
  std::vector<Shape> shapes;
  for (int me = 0; me < p; ++me) {
    shapes.push_back(shape_for(me));
    const std::string bad = check_shape(shapes.back());
    if (!bad.empty()) return "bad shape: " + bad;
    plans.push_back(make_plan(algorithm, shapes.back()));
  }
  test::InMemoryNetwork net(seed, kElem);
  std::vector<Endpoint> endpoints;
  endpoints.reserve(static_cast<size_t>(p));
  std::vector<std::unique_ptr<PlanRunner>> runners;
  std::vector<PlanRunner*> raw;
  for (int me = 0; me < p; ++me) {
    endpoints.emplace_back(&net, me);
    Participant& person = people[static_cast<size_t>(me)];
    auto work = bytes_of(person.work);
    auto send = bytes_of(person.send);
    PlanBuffers buffers{work.data(), work.size(), send.data(), send.size(), kElem};
    const std::string fits = check_plan_fits(plans[static_cast<size_t>(me)], buffers);
    if (!fits.empty()) return "participant " + std::to_string(me) + ": " + fits;
    runners.push_back(std::make_unique<PlanRunner>(plans[static_cast<size_t>(me)], buffers,
                                                   add_words, endpoints.back()));
    raw.push_back(runners.back().get());
  }
  for (PlanRunner* r : raw) r->start();
  std::string error = net.run(
      [&](int to, int from, uint32_t message, uint64_t offset, std::span<const std::byte> data) {
        return raw[static_cast<size_t>(to)]->deliver(from, message, offset, data);
      },
      [&](int from, int to, uint32_t message) {
        raw[static_cast<size_t>(from)]->send_done(to, message);
      });
  if (!error.empty()) return error;
  for (int me = 0; me < p; ++me) {
    const PlanRunner& r = *runners[static_cast<size_t>(me)];
    if (!r.done()) {
      return "participant " + std::to_string(me) + " stuck in round " + std::to_string(r.round()) +
             " of " + std::to_string(plans[static_cast<size_t>(me)].rounds());
    }
  }
  return {};
}

std::string expect_words(const std::vector<Word>& got, size_t at, size_t n,
                         const std::function<Word(size_t)>& want, int who) {
  for (size_t j = 0; j < n; ++j) {
    if (got[at + j] != want(j)) {
      return "participant " + std::to_string(who) + " element " + std::to_string(at + j) +
             ": got " + std::to_string(got[at + j]) + ", want " + std::to_string(want(j));
    }
  }
  return {};
}

Word sum_over(int p, uint64_t index) {
  Word s = 0;
  for (int i = 0; i < p; ++i) s += input(i, index);
  return s;
}

// Segment sizes of various kinds: all equal, all different with empties, a lone big one.
std::vector<uint64_t> segments_for(int p, int variant) {
  std::vector<uint64_t> seg(static_cast<size_t>(p));
  for (int i = 0; i < p; ++i) {
    const auto u = static_cast<uint64_t>(i);
    seg[u] = variant == 0 ? 13 : variant == 1 ? (u * 7 + 3) % 11 : (i == p / 2 ? 301 : 0);
  }
  return seg;
}

// Participant `me` of `p`, over `count` words.
Shape base_shape(Collective collective, int p, int me, uint64_t count) {
  Shape s;
  s.collective = collective;
  s.participants = p;
  s.me = me;
  s.elem_bytes = kElem;
  s.count = count;
  return s;
}

std::string check_case(Algorithm algorithm, Collective collective, int p, uint64_t count,
                       int variant, uint32_t seed) {
  const int root =
      static_cast<int>((count + static_cast<uint64_t>(variant)) % static_cast<uint64_t>(p));
  const std::vector<uint64_t> seg = segments_for(p, variant);
  const std::vector<uint64_t> seg_at = prefix_offsets(seg);
  const uint64_t seg_total = seg_at.back();
  // alltoall: participant i sends m(i, j) elements to j.
  auto m = [&](int i, int j) {
    return static_cast<uint64_t>((i * 5 + j * 3 + variant) % 7) * (count % 5 + 1);
  };
  auto shape_for = [&](int me) {
    Shape s = base_shape(collective, p, me, count);
    s.root = root;
    s.pipeline_elems = variant == 0 ? 0 : 7;
    if (collective == Collective::kAllgather || collective == Collective::kReduceScatter) {
      s.segments = seg;
    }
    if (collective == Collective::kAlltoall) {
      for (int j = 0; j < p; ++j) {
        s.send_counts.push_back(m(me, j));
        s.recv_counts.push_back(m(j, me));
      }
    }
    return s;
  };
  std::vector<Participant> people(static_cast<size_t>(p));
  for (int me = 0; me < p; ++me) {
    Participant& person = people[static_cast<size_t>(me)];
    switch (collective) {
      case Collective::kAllreduce:
      case Collective::kReduce:
      case Collective::kBroadcast:
        person.work.resize(count);
        for (uint64_t j = 0; j < count; ++j) person.work[j] = input(me, j);
        break;
      case Collective::kReduceScatter:
        person.work.resize(seg_total);
        for (uint64_t j = 0; j < seg_total; ++j) person.work[j] = input(me, j);
        break;
      case Collective::kAllgather:
        person.work.assign(seg_total, 0xDEADBEEF);
        for (uint64_t j = 0; j < seg[static_cast<size_t>(me)]; ++j) {
          person.work[seg_at[static_cast<size_t>(me)] + j] = input(me, j);
        }
        break;
      case Collective::kAlltoall: {
        uint64_t out = 0;
        uint64_t in = 0;
        for (int j = 0; j < p; ++j) {
          out += m(me, j);
          in += m(j, me);
        }
        person.send.resize(out);
        for (uint64_t j = 0; j < out; ++j) person.send[j] = input(me, j);
        person.work.assign(in, 0xDEADBEEF);
        break;
      }
    }
  }
  std::string error = run_collective(algorithm, p, seed, shape_for, people);
  if (!error.empty()) return error;
  for (int me = 0; me < p && error.empty(); ++me) {
    const auto& w = people[static_cast<size_t>(me)].work;
    const auto u = static_cast<size_t>(me);
    switch (collective) {
      case Collective::kAllreduce:
        error = expect_words(
            w, 0, count, [&](size_t j) { return sum_over(p, j); }, me);
        break;
      case Collective::kReduce:
        if (me == root) {
          error = expect_words(
              w, 0, count, [&](size_t j) { return sum_over(p, j); }, me);
        }
        break;
      case Collective::kBroadcast:
        error = expect_words(
            w, 0, count, [&](size_t j) { return input(root, j); }, me);
        break;
      case Collective::kReduceScatter:
        error = expect_words(
            w, seg_at[u], seg[u], [&](size_t j) { return sum_over(p, seg_at[u] + j); }, me);
        break;
      case Collective::kAllgather:
        for (int i = 0; i < p && error.empty(); ++i) {
          const auto ui = static_cast<size_t>(i);
          error = expect_words(
              w, seg_at[ui], seg[ui], [&](size_t j) { return input(i, j); }, me);
        }
        break;
      case Collective::kAlltoall: {
        uint64_t at = 0;
        for (int i = 0; i < p && error.empty(); ++i) {
          uint64_t from_at = 0;  // where i's block for me starts in i's send buffer
          for (int j = 0; j < me; ++j) from_at += m(i, j);
          error = expect_words(
              w, at, m(i, me), [&](size_t j) { return input(i, from_at + j); }, me);
          at += m(i, me);
        }
        break;
      }
    }
  }
  return error;
}

struct AlgoCase {
  Algorithm algorithm;
  Collective collective;
};

class AlgorithmTest : public ::testing::TestWithParam<AlgoCase> {};

TEST_P(AlgorithmTest, ExactForOneToSeventeenParticipantsAndOddSizes) {
  const auto [algorithm, collective] = GetParam();
  uint32_t seed = 1;
  int cases = 0;
  for (int p = 1; p <= 17; ++p) {
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{5}, uint64_t{97}, uint64_t{1031}}) {
      for (int variant = 0; variant < 3; ++variant) {
        // Segment variants only matter where segments exist; counts only where they do.
        const bool segmented =
            collective == Collective::kAllgather || collective == Collective::kReduceScatter;
        if (segmented && count != 1) continue;
        if (!segmented && collective != Collective::kAlltoall && variant == 2) continue;
        const std::string error = check_case(algorithm, collective, p, count, variant, ++seed);
        ASSERT_EQ(error, "") << algorithm_name(algorithm) << " " << collective_name(collective)
                             << " p=" << p << " count=" << count << " variant=" << variant;
        ++cases;
      }
    }
  }
  EXPECT_GT(cases, 17);
}

std::vector<AlgoCase> all_algo_cases() {
  std::vector<AlgoCase> cases;
  for (Collective c : {Collective::kAllreduce, Collective::kReduceScatter, Collective::kAllgather,
                       Collective::kBroadcast, Collective::kReduce, Collective::kAlltoall}) {
    for (Algorithm a : algorithms_for(c)) cases.push_back({a, c});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Every, AlgorithmTest, ::testing::ValuesIn(all_algo_cases()),
                         [](const auto& param_info) {
                           return std::string(collective_name(param_info.param.collective)) + "_" +
                                  algorithm_name(param_info.param.algorithm);
                         });

uint64_t bytes_sent(const Plan& plan) {
  uint64_t total = 0;
  for (const Step& s : plan.steps) {
    if (s.kind == StepKind::kSend) total += s.bytes;
  }
  return total;
}

// The offload allreduce with its slow participant anywhere, in 1..many chunks, reducing no
// share or some: exact, and the slow one sends (1 + (p-2) f) of its input, the others
// ((2q-1)/q (1-f) + f) of it (q = p-1).
TEST(OffloadTest, ExactWithTheSlowParticipantAnywhereAndInManyChunks) {
  uint32_t seed = 1000;
  for (int p = 2; p <= 17; ++p) {
    for (int slow : {0, p / 2, p - 1}) {
      for (double share : {0.0, 0.5 / p, 1.0 / p}) {
        for (uint64_t count : {uint64_t{1}, uint64_t{97}, uint64_t{1031}}) {
          for (uint64_t chunk : {uint64_t{0}, uint64_t{7}, uint64_t{100}}) {
            auto shape_for = [&](int me) {
              Shape s = base_shape(Collective::kAllreduce, p, me, count);
              s.pipeline_elems = chunk;
              s.slow = slow;
              s.slow_share = share;
              return s;
            };
            std::vector<Participant> people(static_cast<size_t>(p));
            for (int me = 0; me < p; ++me) {
              people[static_cast<size_t>(me)].work.resize(count);
              for (uint64_t j = 0; j < count; ++j)
                people[static_cast<size_t>(me)].work[j] = input(me, j);
            }
            const std::string where = "p=" + std::to_string(p) + " slow=" + std::to_string(slow) +
                                      " share=" + std::to_string(share) +
                                      " count=" + std::to_string(count) +
                                      " chunk=" + std::to_string(chunk);
            ASSERT_EQ(run_collective(Algorithm::kOffload, p, ++seed, shape_for, people), "")
                << where;
            for (int me = 0; me < p; ++me) {
              ASSERT_EQ(expect_words(
                            people[static_cast<size_t>(me)].work, 0, count,
                            [&](size_t j) { return sum_over(p, j); }, me),
                        "")
                  << where;
            }
            // Pieces round to elements: within a few elements per chunk (at most 64) of the
            // ideal volumes.
            const double n = static_cast<double>(count * kElem);
            const double f = share;
            const double q = p - 1;
            const double slack = 64.0 * 2 * p * kElem;
            EXPECT_NEAR(
                static_cast<double>(bytes_sent(make_plan(Algorithm::kOffload, shape_for(slow)))),
                (1.0 + (p - 2) * f) * n, slack)
                << where;
            const int healthy = slow == 0 ? 1 : 0;
            EXPECT_NEAR(
                static_cast<double>(bytes_sent(make_plan(Algorithm::kOffload, shape_for(healthy)))),
                ((2.0 * q - 1.0) / q * (1.0 - f) + f) * n, slack)
                << where;
            if (share == 0.0 && chunk == 0) {
              // Reducing nothing, the slow one sends exactly its input.
              EXPECT_EQ(bytes_sent(make_plan(Algorithm::kOffload, shape_for(slow))), count * kElem)
                  << where;
            }
          }
        }
      }
    }
  }
}

// The offload allgather with its slow participant anywhere, blocks even, uneven and empty,
// the slow block in 1..many chunks: exact, and the slow one sends exactly its own block.
TEST(OffloadTest, AllgatherExactWithTheSlowParticipantAnywhereSendingItsBlockOnce) {
  uint32_t seed = 3000;
  for (int p = 2; p <= 17; ++p) {
    for (int slow : {0, p / 2, p - 1}) {
      for (int variant = 0; variant < 3; ++variant) {
        for (uint64_t chunk : {uint64_t{0}, uint64_t{2}, uint64_t{5}}) {
          std::vector<uint64_t> seg = segments_for(p, variant);
          if (variant == 0) seg.assign(static_cast<size_t>(p), 61);
          const std::vector<uint64_t> seg_at = prefix_offsets(seg);
          auto shape_for = [&](int me) {
            Shape s = base_shape(Collective::kAllgather, p, me, 1);
            s.segments = seg;
            s.pipeline_elems = chunk;
            s.slow = slow;
            return s;
          };
          std::vector<Participant> people(static_cast<size_t>(p));
          for (int me = 0; me < p; ++me) {
            auto& work = people[static_cast<size_t>(me)].work;
            work.assign(seg_at.back(), 0xDEADBEEF);
            for (uint64_t j = 0; j < seg[static_cast<size_t>(me)]; ++j) {
              work[seg_at[static_cast<size_t>(me)] + j] = input(me, j);
            }
          }
          const std::string where = "p=" + std::to_string(p) + " slow=" + std::to_string(slow) +
                                    " variant=" + std::to_string(variant) +
                                    " chunk=" + std::to_string(chunk);
          ASSERT_EQ(run_collective(Algorithm::kOffload, p, ++seed, shape_for, people), "") << where;
          for (int me = 0; me < p; ++me) {
            for (int i = 0; i < p; ++i) {
              ASSERT_EQ(expect_words(
                            people[static_cast<size_t>(me)].work, seg_at[static_cast<size_t>(i)],
                            seg[static_cast<size_t>(i)], [&](size_t j) { return input(i, j); }, me),
                        "")
                  << where << " block " << i;
            }
          }
          EXPECT_EQ(bytes_sent(make_plan(Algorithm::kOffload, shape_for(slow))),
                    seg[static_cast<size_t>(slow)] * kElem)
              << where;
        }
      }
    }
  }
}

TEST(OffloadTest, TheSlowestByItsSpeedReducesABalancedShare) {
  Shape s = base_shape(Collective::kAllreduce, 4, 0, 1024);
  s.speeds = {1.0, 0.5, 1.0, 0.5};
  EXPECT_EQ(offload_split(s).slow, 1);  // the lowest index among equals
  // Against the fastest of the rest: x = 1/2.
  EXPECT_DOUBLE_EQ(offload_split(s).share, 0.0);
  s.speeds = {1.0, 0.5, 1.0, 1.0};
  EXPECT_EQ(offload_split(s).share, 0.0);  // x = 1/2 <= 3/5: it reduces nothing
  s.speeds = {1.0, 0.9, 1.0, 1.0};
  const double f = offload_split(s).share;
  EXPECT_GT(f, 0.0);
  EXPECT_LT(f, 0.25);
  // Its link and the others' finish together.
  EXPECT_NEAR((1.0 + 2.0 * f) / 0.9, 5.0 / 3.0 * (1.0 - f) + f, 1e-9);
  EXPECT_DOUBLE_EQ(balanced_slow_share(4, 1.0), 0.25);
  EXPECT_DOUBLE_EQ(balanced_slow_share(4, 0.6), 0.0);
  EXPECT_DOUBLE_EQ(balanced_slow_share(2, 0.9), 0.0);
  // Speeds relative to the fastest of the rest: 0.72 against 0.8 is x = 0.9.
  s.speeds = {0.8, 0.72, 0.8, 0.8};
  EXPECT_NEAR(offload_split(s).share, f, 1e-9);
  s.speeds = {1.0, 1.2, 1.0, 1.0};
  EXPECT_NE(check_shape(s), "");
  s.speeds = {1.0, 1.0};
  EXPECT_NE(check_shape(s), "");
}

// Plans run by real PlanRunners over a network whose nodes each send at their own rate
// (one message at a time, in the order posted; receiving is free, as on a NIC shaped on
// its way out): the simulated time of a collective.
class TimedNetwork {
 public:
  explicit TimedNetwork(std::vector<double> bytes_per_s) : rate_(std::move(bytes_per_s)) {
    free_at_.assign(rate_.size(), 0.0);
  }
  void post(int from, int to, uint32_t message, std::span<const std::byte> data) {
    const auto f = static_cast<size_t>(from);
    // The link takes it once it is free; it arrives when its last byte is out.
    const double start = std::max(free_at_[f], now_);
    free_at_[f] = start + static_cast<double>(data.size()) / rate_[f];
    events_.push_back(
        Event{free_at_[f], from, to, message, {data.begin(), data.end()}, next_order_++});
  }
  // Runs to quiet; returns the time of the last arrival, or a negative value after `error`.
  double run(
      const std::function<std::string(int, int, uint32_t, std::span<const std::byte>)>& deliver,
      const std::function<void(int, int, uint32_t)>& send_done, std::string* error) {
    for (size_t guard = 0; !events_.empty(); ++guard) {
      if (guard > 10'000'000) {
        *error = "did not go quiet";
        return -1;
      }
      auto first =
          std::min_element(events_.begin(), events_.end(), [](const Event& a, const Event& b) {
            return a.at != b.at ? a.at < b.at : a.order < b.order;
          });
      Event e = std::move(*first);
      events_.erase(first);
      now_ = e.at;
      *error = deliver(e.to, e.from, e.message, e.data);
      if (!error->empty()) return -1;
      send_done(e.from, e.to, e.message);
    }
    return now_;
  }

 private:
  struct Event {
    double at;
    int from;
    int to;
    uint32_t message;
    std::vector<std::byte> data;
    uint64_t order;
  };
  std::vector<double> rate_;
  std::vector<double> free_at_;
  std::vector<Event> events_;
  double now_ = 0;
  uint64_t next_order_ = 0;
};

class TimedEndpoint : public PlanTransport {
 public:
  TimedEndpoint(TimedNetwork* net, int me) : net_(net), me_(me) {}
  void post_send(int peer, uint32_t message, std::span<const std::byte> data) override {
    net_->post(me_, peer, message, data);
  }

 private:
  TimedNetwork* net_;
  int me_;
};

// Runs every participant's plan over a TimedNetwork with those send rates, in place on
// `work`; the simulated seconds, or a negative value after `error` (a piece that does not
// fit, a participant that does not finish).
double run_timed(const std::vector<Plan>& plans, std::vector<std::vector<Word>>& work,
                 const std::vector<double>& speeds, std::string* error) {
  const size_t p = plans.size();
  TimedNetwork net(speeds);
  std::vector<TimedEndpoint> endpoints;
  endpoints.reserve(p);
  std::vector<std::unique_ptr<PlanRunner>> runners;
  for (size_t me = 0; me < p; ++me) {
    endpoints.emplace_back(&net, static_cast<int>(me));
    auto bytes = bytes_of(work[me]);
    runners.push_back(std::make_unique<PlanRunner>(
        plans[me], PlanBuffers{bytes.data(), bytes.size(), nullptr, 0, kElem}, add_words,
        endpoints.back()));
  }
  for (auto& r : runners) r->start();
  const double seconds = net.run(
      [&](int to, int from, uint32_t message, std::span<const std::byte> data) {
        return runners[static_cast<size_t>(to)]->deliver(from, message, 0, data);
      },
      [&](int from, int to, uint32_t message) {
        runners[static_cast<size_t>(from)]->send_done(to, message);
      },
      error);
  if (seconds < 0) return seconds;
  for (size_t me = 0; me < p; ++me) {
    if (!runners[me]->done()) {
      *error = "participant " + std::to_string(me) + " did not finish";
      return -1;
    }
  }
  return seconds;
}

// Seconds `algorithm` takes for an allreduce of `count` words with node `slow` at x of the
// others' 1 byte/s, checking the result exactly; negative after a failure (in `error`).
double timed_allreduce(Algorithm algorithm, int p, int slow, double x, uint64_t count,
                       std::string* error) {
  std::vector<double> speeds(static_cast<size_t>(p), 1.0);
  speeds[static_cast<size_t>(slow)] = x;
  std::vector<Plan> plans;
  std::vector<std::vector<Word>> work(static_cast<size_t>(p));
  for (int me = 0; me < p; ++me) {
    Shape s = base_shape(Collective::kAllreduce, p, me, count);
    s.speeds = speeds;
    s.pipeline_elems = count / 64;
    plans.push_back(make_plan(algorithm, s));
    work[static_cast<size_t>(me)].resize(count);
    for (uint64_t j = 0; j < count; ++j) work[static_cast<size_t>(me)][j] = input(me, j);
  }
  const double seconds = run_timed(plans, work, speeds, error);
  if (seconds < 0) return seconds;
  for (int me = 0; me < p; ++me) {
    *error = expect_words(
        work[static_cast<size_t>(me)], 0, count, [&](size_t j) { return sum_over(p, j); }, me);
    if (!error->empty()) return -1;
  }
  return seconds;
}

// With one node at x of the others' rate, for 2..17 nodes and x from 0.1 to 1: offload
// (its share balanced from the speeds) is exact and within 3 % of the lower bound
// (N/B) max(1/x, 2 - 1/(p-1)) (below it where the slow node takes a share; the 3 % is the
// pipeline's fill), within 3 % of the ring at x = 1, and well ahead of it when x is small.
// (Measured here: 1.002-1.017 of the bound for x <= 0.6; 0.89-0.99 above.)
TEST(OffloadTest, NearTheLowerBoundWithOneSlowNodeOnTimedLinks) {
  for (int p : {2, 3, 4, 5, 8, 17}) {
    for (double x : {0.1, 0.25, 0.5, 0.6, 0.75, 0.9, 1.0}) {
      const uint64_t count = 64ull * 61 * static_cast<uint64_t>(p);  // odd-sized pieces
      const double n = static_cast<double>(count * kElem);
      const int slow = p / 2;
      std::string error;
      const double offload = timed_allreduce(Algorithm::kOffload, p, slow, x, count, &error);
      const std::string where = "p=" + std::to_string(p) + " x=" + std::to_string(x);
      ASSERT_GE(offload, 0) << where << ": " << error;
      const double ring = timed_allreduce(Algorithm::kRing, p, slow, x, count, &error);
      ASSERT_GE(ring, 0) << where << ": " << error;
      const double bound = n * std::max(1.0 / x, 2.0 - 1.0 / std::max(p - 1, 1));
      EXPECT_LE(offload, 1.03 * bound) << where << " ring " << ring;
      if (p > 2) {
        EXPECT_LE(offload, 1.03 * ring) << where;
      }
      // The ring runs at the slow node's pace: 2 (p-1)/p N / x.
      EXPECT_NEAR(ring, 2.0 * (p - 1) / p * n / x, 0.02 * ring) << where;
      if (x <= 0.5 && p >= 4) {
        EXPECT_LT(offload, 0.8 * ring) << where;
      }
    }
  }
}

// Seconds `algorithm` takes for an allgather of `block` words from each of p nodes with
// node `slow` sending at x of the others' 1 byte/s, checking the result; negative after a
// failure (in `error`).
double timed_allgather(Algorithm algorithm, int p, int slow, double x, uint64_t block,
                       std::string* error) {
  std::vector<double> speeds(static_cast<size_t>(p), 1.0);
  speeds[static_cast<size_t>(slow)] = x;
  const std::vector<uint64_t> seg(static_cast<size_t>(p), block);
  std::vector<Plan> plans;
  std::vector<std::vector<Word>> work(static_cast<size_t>(p));
  for (int me = 0; me < p; ++me) {
    Shape s = base_shape(Collective::kAllgather, p, me, 1);
    s.segments = seg;
    s.speeds = speeds;
    s.pipeline_elems = block / 16;
    plans.push_back(make_plan(algorithm, s));
    work[static_cast<size_t>(me)].assign(block * static_cast<uint64_t>(p), 0xDEADBEEF);
    for (uint64_t j = 0; j < block; ++j) {
      work[static_cast<size_t>(me)][static_cast<uint64_t>(me) * block + j] = input(me, j);
    }
  }
  const double seconds = run_timed(plans, work, speeds, error);
  if (seconds < 0) return seconds;
  for (int me = 0; me < p; ++me) {
    for (int i = 0; i < p && error->empty(); ++i) {
      *error = expect_words(
          work[static_cast<size_t>(me)], static_cast<uint64_t>(i) * block, block,
          [&](size_t j) { return input(i, j); }, me);
    }
    if (!error->empty()) return -1;
  }
  return seconds;
}

// With one node sending at x of the others' rate, for 2..17 nodes and x from 0.1 to 1: the
// offload allgather is exact and within 5 % of its bound max(N/(p x), 1/p + (q-1)/q) N
// (the slow node's block out once; a healthy node's block to the slow node and q-1 ring
// hops of a block and a slow piece), where the ring runs at (p-1)/p N/x. (Measured here:
// 1.000-1.019 of the bound; 0.11-0.61 of the ring for x <= 1/2, p >= 4.)
TEST(OffloadTest, AllgatherNearItsBoundWithOneSlowSenderOnTimedLinks) {
  for (int p : {2, 3, 4, 5, 8, 17}) {
    for (double x : {0.1, 0.25, 0.5, 0.75, 1.0}) {
      const uint64_t block = 64ull * 61;
      const double pd = p;
      const double n = static_cast<double>(block * kElem) * pd;
      const int slow = p / 2;
      std::string error;
      const std::string where = "p=" + std::to_string(p) + " x=" + std::to_string(x);
      const double offload = timed_allgather(Algorithm::kOffload, p, slow, x, block, &error);
      ASSERT_GE(offload, 0) << where << ": " << error;
      const double ring = timed_allgather(Algorithm::kRing, p, slow, x, block, &error);
      ASSERT_GE(ring, 0) << where << ": " << error;
      const double q = pd - 1.0;
      const double bound = std::max(n / pd / x, (1.0 / pd + (q - 1.0) / q) * n);
      EXPECT_LE(offload, 1.05 * bound) << where << " ring " << ring;
      EXPECT_NEAR(ring, (pd - 1.0) / pd * n / x, 0.02 * ring) << where;
      if (x <= 0.5 && p >= 4) {
        EXPECT_LT(offload, 0.7 * ring) << where;
      }
    }
  }
}

// Correct but wasteful plans would pass the exactness tests: pin the volume too.
TEST(AlgorithmVolumeTest, RingAndRabenseifnerSendTwiceTheVectorTimesPMinusOneOverP) {
  for (int p : {2, 4, 8, 16}) {
    Shape s;
    s.participants = p;
    s.elem_bytes = 4;
    s.count = 1024 * static_cast<uint64_t>(p);
    const uint64_t expected = 2 * (static_cast<uint64_t>(p) - 1) * 1024 * 4;
    for (int me = 0; me < p; ++me) {
      s.me = me;
      EXPECT_EQ(bytes_sent(plan_ring(s)), expected) << "ring p=" << p;
      EXPECT_EQ(bytes_sent(plan_recursive_halving_doubling(s)), expected) << "rhd p=" << p;
    }
  }
}

TEST(AlgorithmVolumeTest, RoundCountsAreLogarithmicWhereTheyShouldBe) {
  Shape s;
  s.participants = 16;
  s.elem_bytes = 4;
  s.count = 64;
  EXPECT_EQ(plan_recursive_doubling(s).rounds(), 4u);
  EXPECT_EQ(plan_recursive_halving_doubling(s).rounds(), 8u);
  s.collective = Collective::kAllgather;
  s.segments.assign(16, 4);
  EXPECT_EQ(plan_bruck(s).rounds(), 4u);
  EXPECT_EQ(plan_ring(s).rounds(), 15u);
  s.participants = 17;
  s.me = 0;
  s.segments.assign(17, 4);
  EXPECT_EQ(plan_bruck(s).rounds(), 5u);
}

TEST(CostModelTest, SmallMessagesPickFewRoundsLargeOnesPickBandwidthOptimal) {
  const LinkCost tcp{30e-6, 1.0 / 1.0e9};
  Shape s;
  s.participants = 8;
  s.elem_bytes = 4;
  s.count = 2;
  EXPECT_EQ(choose_algorithm(s, tcp), Algorithm::kRecursiveDoubling);
  s.count = 16 << 20;
  const Algorithm big = choose_algorithm(s, tcp);
  EXPECT_TRUE(big == Algorithm::kRing || big == Algorithm::kRecursiveHalvingDoubling)
      << algorithm_name(big);
  EXPECT_EQ(choose_algorithm(s, tcp, Algorithm::kRecursiveDoubling), Algorithm::kRecursiveDoubling);
  // A forced algorithm that cannot run the collective is ignored, not obeyed.
  EXPECT_NE(choose_algorithm(s, tcp, Algorithm::kBruck), Algorithm::kBruck);
  s.collective = Collective::kBroadcast;
  s.count = 2;
  EXPECT_EQ(choose_algorithm(s, tcp), Algorithm::kBinomial);
  s.count = 64 << 20;
  EXPECT_EQ(choose_algorithm(s, tcp), Algorithm::kChain);
}

// With a slow node (Shape::speeds, as the nodes agreed on them) a large allreduce takes the
// offload schedule; with alike nodes, or a collective it cannot run, it never does.
TEST(CostModelTest, OffloadOnlyWhereANodeIsSlowerAndTheOpIsLarge) {
  const LinkCost link{50e-6, 1.0 / 47e6};  // 400 Mbit/s
  Shape s;
  s.participants = 4;
  s.elem_bytes = 4;
  s.count = 8 << 20;  // 32 MiB
  EXPECT_NE(choose_algorithm(s, link), Algorithm::kOffload);
  s.speeds = {1.0, 1.0, 1.0, 0.5};
  EXPECT_EQ(choose_algorithm(s, link), Algorithm::kOffload);
  s.speeds = {1.0, 0.25, 1.0, 1.0};
  EXPECT_EQ(choose_algorithm(s, link), Algorithm::kOffload);
  s.speeds = {1.0, 1.0, 0.8, 1.0};  // a share for the slow node: still ahead of the ring
  EXPECT_EQ(choose_algorithm(s, link), Algorithm::kOffload);
  // Its estimate follows the schedule: about max(1/x, 2 - 1/(p-1)) N/B at x = 1/2.
  s.speeds = {1.0, 1.0, 1.0, 0.5};
  const double n_over_b = 32.0 * (1 << 20) / 47e6;
  EXPECT_NEAR(estimate_seconds(Algorithm::kOffload, s, link), 2.0 * n_over_b, 0.05 * n_over_b);
  EXPECT_NEAR(estimate_seconds(Algorithm::kRing, s, link), 3.0 * n_over_b, 0.05 * n_over_b);
  s.count = 2;  // a tiny one: rounds cost more than bytes
  EXPECT_NE(choose_algorithm(s, link), Algorithm::kOffload);
  s.count = 8 << 20;
  s.collective = Collective::kReduceScatter;
  s.segments.assign(4, 2 << 20);
  EXPECT_NE(choose_algorithm(s, link), Algorithm::kOffload);
  // Allgather: offload with a slow node (about max(1/(p x), 1/p + (q-1)/q) N/B = 0.92 N/B
  // against the ring's 1.5 N/B at x = 1/2), never with every node alike or two nodes.
  s.collective = Collective::kAllgather;
  EXPECT_EQ(choose_algorithm(s, link), Algorithm::kOffload);
  EXPECT_NEAR(estimate_seconds(Algorithm::kOffload, s, link), 11.0 / 12.0 * n_over_b,
              0.05 * n_over_b);
  s.speeds.clear();
  EXPECT_NE(choose_algorithm(s, link), Algorithm::kOffload);
  s.participants = 2;
  s.segments.assign(2, 4 << 20);
  s.speeds = {1.0, 0.5};
  EXPECT_NE(choose_algorithm(s, link), Algorithm::kOffload);
}

TEST(AlgorithmNamesTest, EveryNameParsesBack) {
  for (Algorithm a : kAllAlgorithms) EXPECT_EQ(parse_algorithm(algorithm_name(a)), a);
  EXPECT_EQ(parse_algorithm("tree-of-life"), std::nullopt);
}

class NullTransport : public PlanTransport {
 public:
  void post_send(int, uint32_t, std::span<const std::byte>) override {}
};

TEST(PlanRunnerTest, PiecesThatDoNotFitThePlanAreRefusedWithAReason) {
  Shape s;
  s.participants = 2;
  s.me = 1;
  s.elem_bytes = 4;
  s.count = 8;
  const Plan plan = plan_recursive_doubling(s);  // one exchange of 32 bytes with participant 0
  std::vector<Word> work(8);
  NullTransport transport;
  PlanRunner runner(plan, {reinterpret_cast<std::byte*>(work.data()), 32, nullptr, 0, 4}, add_words,
                    transport);
  runner.start();
  std::vector<std::byte> piece(64);
  using ::testing::HasSubstr;
  EXPECT_THAT(runner.deliver(0, 7, 0, {piece.data(), 4}), HasSubstr("unexpected message 7"));
  EXPECT_THAT(runner.deliver(5, 0, 0, {piece.data(), 4}), HasSubstr("participant 5"));
  EXPECT_THAT(runner.deliver(0, 0, 30, {piece.data(), 4}), HasSubstr("outside its 32 bytes"));
  EXPECT_THAT(runner.deliver(0, 0, 0, {piece.data(), 6}), HasSubstr("splits an element"));
  EXPECT_EQ(runner.deliver(0, 0, 0, {piece.data(), 16}), "");
  EXPECT_THAT(runner.deliver(0, 0, 0, {piece.data(), 20}), HasSubstr("more than its 32 bytes"));
  EXPECT_EQ(runner.waiting_for(), std::vector<int>{0});
  EXPECT_FALSE(runner.done());
}

// The op watch asks what a runner waits for at any moment. Once every receive is in but a
// send is not acknowledged (its peer's node went away), the answer is that peer; asking
// then must not read past the last round (it did: a segfault in a failover test).
TEST(PlanRunnerTest, WaitingForNamesAPeerThatHasNotAcknowledgedTheLastSend) {
  Shape s;  // an allgather: the segment received is not the one sent, so it lands at once
  s.collective = Collective::kAllgather;
  s.participants = 2;
  s.me = 1;
  s.elem_bytes = 4;
  s.segments = {4, 4};
  const Plan plan = make_plan(Algorithm::kRing, s);
  ASSERT_EQ(plan.rounds(), 1u);
  std::vector<Word> work(8);
  NullTransport transport;  // never reports a send done
  PlanRunner runner(plan, {reinterpret_cast<std::byte*>(work.data()), 32, nullptr, 0, 4}, add_words,
                    transport);
  runner.start();
  std::vector<std::byte> piece(16);
  ASSERT_EQ(runner.deliver(0, 0, 0, {piece.data(), 16}), "");
  EXPECT_EQ(runner.round(), plan.rounds());  // every round's receives are in
  EXPECT_FALSE(runner.done());
  EXPECT_EQ(runner.waiting_for(), std::vector<int>{0});
  EXPECT_FALSE(runner.expects_from(0));
  runner.send_done(0, 0);
  EXPECT_TRUE(runner.done());
  EXPECT_TRUE(runner.waiting_for().empty());
}

// A transport that finishes every send inside post_send (a socket that takes all bytes at
// once does): the runner must not move to the next round while it starts this one.
class InstantTransport : public PlanTransport {
 public:
  PlanRunner* runner = nullptr;
  int sends = 0;
  void post_send(int peer, uint32_t message, std::span<const std::byte>) override {
    ++sends;
    runner->send_done(peer, message);
  }
};

TEST(PlanRunnerTest, SendsThatCompleteInsidePostSendFinishTheRoundsInOrder) {
  for (int me : {0, 1, 2}) {
    Shape s;
    s.collective = Collective::kReduce;
    s.participants = 3;
    s.me = me;
    s.root = 2;
    s.elem_bytes = 4;
    s.count = 8;
    const Plan plan = make_plan(Algorithm::kBinomial, s);
    std::vector<Word> work(8);
    InstantTransport transport;
    PlanRunner runner(plan, {reinterpret_cast<std::byte*>(work.data()), 32, nullptr, 0, 4},
                      add_words, transport);
    transport.runner = &runner;
    runner.start();
    // The root only receives; the others send once and are done.
    EXPECT_EQ(runner.done(), me != 2) << "participant " << me;
    EXPECT_EQ(transport.sends, me == 2 ? 0 : 1) << "participant " << me;
  }
}

// A channel over several paths delivers a message's pieces in any order, some read straight
// into place while others are copied, and a resent piece may be placed twice at once.
TEST(PlanRunnerTest, PiecesPlacedAndCopiedInAnyOrderCompleteTheReceive) {
  PlanBuilder builder("test");
  builder.recv(1, 0, 96);
  builder.end_round();
  const Plan plan = builder.finish();
  std::vector<std::byte> work(96, std::byte{0});
  InstantTransport transport;
  PlanRunner runner(plan, {work.data(), 96, nullptr, 0, 4}, add_words, transport);
  transport.runner = &runner;
  runner.start();
  std::vector<std::byte> piece(32, std::byte{7});
  // Piece 0 is being placed when piece 2 arrives whole and is copied; piece 1 is placed by
  // two copies (a resend), the second abandoned when the first ends.
  std::byte* first = runner.placement(1, 0, 0, 32);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(runner.deliver(1, 0, 64, piece), "");
  std::byte* second = runner.placement(1, 0, 32, 32);
  std::byte* second_copy = runner.placement(1, 0, 32, 32);
  ASSERT_NE(second, nullptr);
  ASSERT_EQ(second, second_copy);
  std::memset(first, 7, 32);
  runner.deliver_placed(1, 0, 0, 32);
  EXPECT_FALSE(runner.done());
  std::memset(second, 7, 32);
  runner.deliver_placed(1, 0, 32, 32);
  EXPECT_TRUE(runner.done());
  EXPECT_EQ(work, std::vector<std::byte>(96, std::byte{7}));
}

}  // namespace
}  // namespace plexus::daemon::algo
