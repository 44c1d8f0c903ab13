// Slow-node offload allreduce (measured in docs/BENCHMARKS.md): one participant, the slow
// one, sends its input and receives the result once, and reduces only a share of the vector
// (offload_split: none when it is slow enough); the others reduce the rest among themselves.
// The vector goes in chunks, pipelined so that the slow node's link is busy in both directions:
// in its round t it sends chunk t's healthy pieces to their owners and receives the healthy
// participants' parts of chunk t's slow piece, and it receives chunk t-1's results and sends
// back chunk t-1's slow piece, reduced. Each healthy participant runs a ring reduce-scatter
// over the healthy ones per chunk, folding in the slow node's part of its piece in the last
// round, then the ring allgather, sending its finished piece to the slow node in the
// allgather's first round. For p participants, the slow one at x of the others' bandwidth B, N
// bytes and slow share f, the slow link carries (1 + (p-2) f) N each way and a healthy one
// ((2q-1)/q (1-f) + f) N (q = p-1): with f = 0, max(1/x, 2 - 1/(p-1)) N/B, the lower bound when
// the slow node reduces nothing, and with f balanced, the time at which both finish. The slow
// piece's parts are reduced in the order they arrive: its bits may differ from run to run
// (never between nodes: one node reduces it and sends it to all).
#include <algorithm>

#include "daemon/algorithms/algorithm.h"

namespace plexus::daemon::algo {

double balanced_slow_share(int participants, double x) {
  const double p = participants;
  if (participants <= 2 || !(x > 0.0)) return 0.0;  // two: the slow link carries N whatever f is
  if (x >= 1.0) return 1.0 / p;
  // Equal times: (1 + (p-2) f) / x = (2q-1)/q (1-f) + f, q = p-1.
  const double q = p - 1.0;
  const double healthy_alone = (2.0 * q - 1.0) / q;
  const double f = (healthy_alone - 1.0 / x) / ((p - 2.0) / x + healthy_alone - 1.0);
  return std::clamp(f, 0.0, 1.0 / p);
}

OffloadSplit offload_split(const Shape& s) {
  if (s.speeds.empty() || static_cast<int>(s.speeds.size()) != s.participants) {
    return {s.slow >= 0 && s.slow < s.participants ? s.slow : s.participants - 1, s.slow_share};
  }
  const auto slowest = std::min_element(s.speeds.begin(), s.speeds.end());
  const int slow = static_cast<int>(slowest - s.speeds.begin());
  // Its share follows its speed against the fastest of the rest (speeds are of the median
  // node, so that is 1 but where most nodes are slow): taking the slowest of the rest gave
  // the slow node shares it could not carry when a healthy node's measure read low.
  double others = 0.0;
  for (int i = 0; i < s.participants; ++i) {
    if (i != slow) others = std::max(others, s.speeds[static_cast<size_t>(i)]);
  }
  return {slow, balanced_slow_share(s.participants, *slowest / others)};
}

Plan plan_offload(const Shape& s) {
  PlanBuilder plan("offload");
  const int p = s.participants;
  if (p <= 1 || s.count == 0) return plan.finish();
  // Plain names, not structured bindings: the lambdas below capture them (Clang < 16
  // cannot capture a structured binding).
  const OffloadSplit split = offload_split(s);
  const int slow = split.slow;
  const double share = split.share;
  const int q = p - 1;  // healthy participants
  // Healthy index h <-> participant.
  auto participant = [&](int h) { return h < slow ? h : h + 1; };
  const uint64_t elem = s.elem_bytes;
  // Shape::pipeline_elems, when set, is the chunk size (tests use small ones).
  const uint64_t wanted = s.pipeline_elems > 0 ? (s.count + s.pipeline_elems - 1) / s.pipeline_elems
                                               : s.count * elem / kOffloadChunkBytes;
  const uint64_t chunks =
      std::clamp<uint64_t>(wanted, 1, std::min<uint64_t>(kOffloadMaxChunks, s.count));
  const std::vector<uint64_t> chunk_offsets =
      prefix_offsets(split_evenly(s.count, static_cast<int>(chunks)));
  // Chunk c in bytes of the work buffer: healthy piece h is [o[h], o[h+1]) and the slow
  // node's piece [o[q], o[q+1]) (its share, at the chunk's end).
  auto pieces_of = [&](uint64_t c) {
    const uint64_t elems = chunk_offsets[c + 1] - chunk_offsets[c];
    const auto slow_elems = static_cast<uint64_t>(static_cast<double>(elems) * share);
    std::vector<uint64_t> offsets = prefix_offsets(split_evenly(elems - slow_elems, q));
    offsets.push_back(elems);
    for (uint64_t& o : offsets) o = (o + chunk_offsets[c]) * elem;
    return offsets;
  };
  auto piece_bytes = [](const std::vector<uint64_t>& o, int h) {
    return o[static_cast<size_t>(h) + 1] - o[static_cast<size_t>(h)];
  };
  // Messages between a pair go in one order on both sides: the slow node sends chunk t-1's
  // slow piece before chunk t's healthy piece, and receives chunk t-1's result before
  // chunk t's part of its piece.
  if (s.me == slow) {
    for (uint64_t t = 0; t <= chunks; ++t) {
      if (t > 0) {
        const auto o = pieces_of(t - 1);
        for (int h = 0; h < q; ++h) {
          plan.recv(participant(h), o[static_cast<size_t>(h)], piece_bytes(o, h));
          plan.send(participant(h), o[static_cast<size_t>(q)], piece_bytes(o, q));
        }
      }
      if (t < chunks) {
        const auto o = pieces_of(t);
        for (int h = 0; h < q; ++h) {
          plan.send(participant(h), o[static_cast<size_t>(h)], piece_bytes(o, h));
          plan.recv_reduce(participant(h), o[static_cast<size_t>(q)], piece_bytes(o, q));
        }
      }
      plan.end_round();
    }
    return plan.finish();
  }
  const int me = s.me < slow ? s.me : s.me - 1;
  const int next = participant(wrap(me + 1, q));
  const int prev = participant(wrap(me - 1, q));
  const int rs_rounds = std::max(q - 1, 1);
  for (uint64_t c = 0; c < chunks; ++c) {
    const auto o = pieces_of(c);
    auto at = [&](int h) { return o[static_cast<size_t>(wrap(h, q))]; };
    auto bytes = [&](int h) { return piece_bytes(o, wrap(h, q)); };
    // Reduce-scatter over the healthy ring: after q-1 rounds piece `me` is reduced over
    // them; the slow node's part is folded in with the last round (or alone, q = 1). The
    // first round also sends this node's part of the slow piece and takes back the last
    // chunk's, reduced.
    for (int round = 0; round < rs_rounds; ++round) {
      if (q > 1) {
        plan.send(next, at(me - round - 1), bytes(me - round - 1));
        plan.recv_reduce(prev, at(me - round - 2), bytes(me - round - 2));
      }
      if (round == 0) {
        if (c > 0) {
          const auto last = pieces_of(c - 1);
          plan.recv(slow, last[static_cast<size_t>(q)], piece_bytes(last, q));
        }
        plan.send(slow, o[static_cast<size_t>(q)], piece_bytes(o, q));
      }
      if (round == rs_rounds - 1) plan.recv_reduce(slow, at(me), bytes(me));
      plan.end_round();
    }
    // Allgather over the healthy ring; the finished piece goes to the slow node at once.
    plan.send(slow, at(me), bytes(me));
    for (int round = 0; round < rs_rounds; ++round) {
      if (q > 1) {
        plan.send(next, at(me - round), bytes(me - round));
        plan.recv(prev, at(me - round - 1), bytes(me - round - 1));
      }
      plan.end_round();
    }
  }
  const auto last = pieces_of(chunks - 1);
  plan.recv(slow, last[static_cast<size_t>(q)], piece_bytes(last, q));
  plan.end_round();
  return plan.finish();
}

}  // namespace plexus::daemon::algo
