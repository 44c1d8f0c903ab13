// Slow-node offload allreduce (issue 21): one participant, the slow one (Shape::slow), only
// sends its input once and receives the result once; the others reduce everything among
// themselves. The vector goes in chunks, pipelined so that the slow node's link is busy in
// both directions: in its round t it sends chunk t (a piece to each healthy participant)
// and receives chunk t-1's result (a piece from each). Each healthy participant runs a ring
// reduce-scatter over the healthy ones per chunk, folding in the slow node's piece in its
// last round, then the ring allgather, sending its finished piece to the slow node in the
// allgather's first round. For p participants, one at x of the others' bandwidth B and
// N bytes, that is max(1/x, 2 - 1/(p-1)) N/B with perfect pipelining: the lower bound when
// the slow node reduces nothing.
#include <algorithm>

#include "daemon/algorithms/algorithm.h"

namespace plexus::daemon::algo {
namespace {

// A chunk's pieces are about this large, so the pipeline has enough chunks to hide its
// start and end (about 1 / chunks of the slow node's time) without a round per few bytes.
constexpr uint64_t kChunkBytes = 1 << 20;
constexpr uint64_t kMaxChunks = 64;

int wrap(int i, int q) { return ((i % q) + q) % q; }

}  // namespace

int offload_slow_participant(const Shape& s) {
  return s.slow >= 0 && s.slow < s.participants ? s.slow : s.participants - 1;
}

Plan plan_offload(const Shape& s) {
  PlanBuilder plan("offload");
  const int p = s.participants;
  if (p <= 1 || s.count == 0) return plan.finish();
  const int slow = offload_slow_participant(s);
  const int q = p - 1;  // healthy participants
  // Healthy index h <-> participant.
  auto participant = [&](int h) { return h < slow ? h : h + 1; };
  const uint64_t elem = s.elem_bytes;
  // Shape::pipeline_elems, when set, is the chunk size (tests use small ones).
  const uint64_t wanted = s.pipeline_elems > 0 ? (s.count + s.pipeline_elems - 1) / s.pipeline_elems
                                               : s.count * elem / kChunkBytes;
  const uint64_t chunks = std::clamp<uint64_t>(wanted, 1, std::min<uint64_t>(kMaxChunks, s.count));
  const std::vector<uint64_t> chunk_offsets =
      prefix_offsets(split_evenly(s.count, static_cast<int>(chunks)));
  // Piece h of chunk c, in bytes of the work buffer.
  auto pieces_of = [&](uint64_t c) {
    std::vector<uint64_t> offsets =
        prefix_offsets(split_evenly(chunk_offsets[c + 1] - chunk_offsets[c], q));
    for (uint64_t& o : offsets) o = (o + chunk_offsets[c]) * elem;
    return offsets;
  };
  auto piece_bytes = [](const std::vector<uint64_t>& o, int h) {
    return o[static_cast<size_t>(h) + 1] - o[static_cast<size_t>(h)];
  };
  if (s.me == slow) {
    for (uint64_t t = 0; t <= chunks; ++t) {
      if (t < chunks) {
        const auto o = pieces_of(t);
        for (int h = 0; h < q; ++h)
          plan.send(participant(h), o[static_cast<size_t>(h)], piece_bytes(o, h));
      }
      if (t > 0) {
        const auto o = pieces_of(t - 1);
        for (int h = 0; h < q; ++h)
          plan.recv(participant(h), o[static_cast<size_t>(h)], piece_bytes(o, h));
      }
      plan.end_round();
    }
    return plan.finish();
  }
  const int me = s.me < slow ? s.me : s.me - 1;
  const int next = participant(wrap(me + 1, q));
  const int prev = participant(wrap(me - 1, q));
  for (uint64_t c = 0; c < chunks; ++c) {
    const auto o = pieces_of(c);
    auto at = [&](int h) { return o[static_cast<size_t>(wrap(h, q))]; };
    auto bytes = [&](int h) { return piece_bytes(o, wrap(h, q)); };
    // Reduce-scatter over the healthy ring: after q-1 rounds piece `me` is reduced over
    // them; the slow node's piece is folded in with the last round (or alone, q = 1).
    for (int round = 0; round < std::max(q - 1, 1); ++round) {
      if (q > 1) {
        plan.send(next, at(me - round - 1), bytes(me - round - 1));
        plan.recv_reduce(prev, at(me - round - 2), bytes(me - round - 2));
      }
      if (round == std::max(q - 1, 1) - 1) plan.recv_reduce(slow, at(me), bytes(me));
      plan.end_round();
    }
    // Allgather over the healthy ring; the finished piece goes to the slow node at once.
    plan.send(slow, at(me), bytes(me));
    for (int round = 0; round < std::max(q - 1, 1); ++round) {
      if (q > 1) {
        plan.send(next, at(me - round), bytes(me - round));
        plan.recv(prev, at(me - round - 1), bytes(me - round - 1));
      }
      plan.end_round();
    }
  }
  return plan.finish();
}

}  // namespace plexus::daemon::algo
