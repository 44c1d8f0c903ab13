// Slow-node offload allgather (measured in docs/BENCHMARKS.md): the slow participant sends
// its block once, split among the healthy ones, and receives every other block straight from
// its owner; the healthy ones gather their own blocks in a ring among themselves, then pass the
// slow block's pieces around the same ring, chunk by chunk as they arrive. The slow link
// carries its own block out and the rest in, N/p and (p-1)/p N for p even blocks of N bytes in
// all, where the ring makes it send (p-1)/p N: with the slow node at x of the others' bandwidth
// B, max(1/(p x), 1/p + (q-1)/q) N/B (q = p-1: a healthy node's own block to the slow node, q-1
// ring hops of its block and a piece of the slow one) against the ring's (p-1)/p N/(x B) when
// the slow node's sending is what is slow. Where the slow node is as slow receiving as sending,
// it must take in (p-1)/p N either way and the two run alike. No reduction: every byte lands
// where it is received, so the result is the ring's, bit for bit.
#include <algorithm>
#include <utility>

#include "daemon/algorithms/algorithm.h"

namespace plexus::daemon::algo {

Plan plan_offload_allgather(const Shape& s) {
  PlanBuilder plan("offload");
  const int p = s.participants;
  if (p <= 1) return plan.finish();
  const int slow = offload_split(s).slow;
  const int q = p - 1;  // healthy participants
  auto participant = [&](int h) { return h < slow ? h : h + 1; };
  const uint64_t elem = s.elem_bytes;
  const std::vector<uint64_t> blocks = prefix_offsets(s.segments);  // elements
  auto block_at = [&](int i) { return blocks[static_cast<size_t>(i)] * elem; };
  auto block_bytes = [&](int i) {
    return (blocks[static_cast<size_t>(i) + 1] - blocks[static_cast<size_t>(i)]) * elem;
  };
  // The slow block in chunks (kOffloadChunkBytes: the healthy ring forwards the first ones
  // while the slow link still sends the rest), each split into q pieces: piece (h, c) is
  // healthy h's.
  const uint64_t slow_elems = s.segments[static_cast<size_t>(slow)];
  const uint64_t wanted = s.pipeline_elems > 0
                              ? (slow_elems + s.pipeline_elems - 1) / s.pipeline_elems
                              : slow_elems * elem / kOffloadChunkBytes;
  const auto chunks = static_cast<int>(std::clamp<uint64_t>(
      wanted, 1, std::max<uint64_t>(1, std::min(kOffloadMaxChunks, slow_elems))));
  const std::vector<uint64_t> chunk_offsets = prefix_offsets(split_evenly(slow_elems, chunks));
  struct Piece {
    uint64_t offset = 0;
    uint64_t bytes = 0;
  };
  // piece_offsets[c][h]: piece (h, c)'s first element within the slow block.
  std::vector<std::vector<uint64_t>> piece_offsets;
  for (int c = 0; c < chunks; ++c) {
    const uint64_t begin = chunk_offsets[static_cast<size_t>(c)];
    std::vector<uint64_t> o =
        prefix_offsets(split_evenly(chunk_offsets[static_cast<size_t>(c) + 1] - begin, q));
    for (uint64_t& offset : o) offset += begin;
    piece_offsets.push_back(std::move(o));
  }
  auto piece = [&](int h, int c) {
    const std::vector<uint64_t>& o = piece_offsets[static_cast<size_t>(c)];
    const auto i = static_cast<size_t>(wrap(h, q));
    return Piece{block_at(slow) + o[i] * elem, (o[i + 1] - o[i]) * elem};
  };
  if (s.me == slow) {
    // One round: every piece out, chunk by chunk, and every other block in.
    for (int c = 0; c < chunks; ++c) {
      for (int h = 0; h < q; ++h) {
        const Piece out = piece(h, c);
        plan.send(participant(h), out.offset, out.bytes);
      }
    }
    for (int h = 0; h < q; ++h) {
      plan.recv(participant(h), block_at(participant(h)), block_bytes(participant(h)));
    }
    plan.end_round();
    return plan.finish();
  }
  const int me = s.me < slow ? s.me : s.me - 1;
  const int next = participant(wrap(me + 1, q));
  const int prev = participant(wrap(me - 1, q));
  // The healthy blocks around the healthy ring (q-1 rounds); this node's own block goes to
  // the slow node at once.
  plan.send(slow, block_at(s.me), block_bytes(s.me));
  for (int round = 0; round < q - 1; ++round) {
    const int out = participant(wrap(me - round, q));
    const int in = participant(wrap(me - round - 1, q));
    plan.send(next, block_at(out), block_bytes(out));
    plan.recv(prev, block_at(in), block_bytes(in));
    plan.end_round();
  }
  // The slow block's pieces: round k takes chunk k's piece from the slow node and moves
  // each earlier chunk one hop on (chunk c's hop j in round c + j), so a chunk is
  // everywhere q-1 rounds after it arrived.
  for (int k = 0; k < chunks + q - 1; ++k) {
    if (k < chunks) {
      const Piece in = piece(me, k);
      plan.recv(slow, in.offset, in.bytes);
    }
    for (int hop = 1; hop < q; ++hop) {
      const int c = k - hop;
      if (c < 0 || c >= chunks) continue;
      const Piece out = piece(me - hop + 1, c);
      const Piece in = piece(me - hop, c);
      plan.send(next, out.offset, out.bytes);
      plan.recv(prev, in.offset, in.bytes);
    }
    plan.end_round();
  }
  return plan.finish();
}

}  // namespace plexus::daemon::algo
