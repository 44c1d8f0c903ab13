// The weight relay between nodes: a version goes from the publisher's daemon down a chain of
// the subscribed nodes' daemons over the data links (one more data family: frame_views.h).
// Each daemon has what arrives written into buffers of the store's memory (placed there by the
// transport where it can, as collectives' frames are: no copy through the path's own buffer)
// and passes each range (512 KiB) on to the next as soon as it has it whole (while at most
// kRangesAhead are unreleased on that link), so every link carries the bytes once and the
// whole takes about W/B plus a range per hop (docs/BENCHMARKS.md). A version whole here goes
// to the control thread's store (Hooks::arrived). A next hop lost is skipped: the chain goes
// on to the one after it, from this daemon's own copy, and a forward that had ended before its
// node was lost goes past it again (it may not have passed everything on) up to the first node
// that has it whole, which says so (wire::kWeightsWholeHere). So is a node that will not keep
// the version (its store full, no subscription there), which says so at the header
// (kWeightsRefusedStep): once its refusal is in, at most kRangesAhead ranges are still on their
// way to it (and what the link itself held), not the rest of the version; a refusal after
// everything went is taken too. A node whose link was lost lately is tried after every other
// node of a chain: a dead node's link, tried for up to --connect-timeout-ms, holds up no live
// node behind it. A version nothing came for in `arrival_idle` (its sender's own sender lost,
// and no node taking its place) is given up, its buffers back to the store. Recovery lives in
// weight_relay_repair.cc.
//
// Engine thread only (InternodeRunner owns it and feeds it frames and lost peers).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/result.h"
#include "daemon/links/node_links.h"
#include "daemon/weights/weight_memory.h"
#include "daemon/weights/weight_store.h"
#include "transports/channel/frame_path.h"
#include "transports/wire/data_frame.h"

namespace plexus::daemon {

class WeightRelay {
 public:
  struct NodeRef {
    uint64_t instance = 0;
    std::string name;
    std::vector<std::string> addresses;
  };
  struct Hooks {
    // Version `version` of relay `relay_id` is whole on this node.
    std::function<void(uint64_t relay_id, std::shared_ptr<const weights::Version> version)> arrived;
    // A link to `node` is wanted now (opened on first use).
    std::function<void(const NodeRef& node)> reach;
  };

  // `arrival_idle`: longer than a chain's repair may keep a sender quiet (InternodeRunner:
  // three times --connect-timeout-ms, at least 30 s).
  WeightRelay(NodeLinks& links, Hooks hooks, std::chrono::milliseconds arrival_idle)
      : links_(links), hooks_(std::move(hooks)), arrival_idle_(arrival_idle) {}

  // Where received versions' buffers come from (the store's memory, under its cap); none:
  // versions from other nodes are refused.
  void set_memory(std::shared_ptr<weights::WeightMemory> memory) { memory_ = std::move(memory); }
  // Sends `version` of relay `relay_id` down `chain` (this node's own copy: every range is here).
  void push(uint64_t relay_id, std::shared_ptr<const weights::Version> version,
            std::vector<NodeRef> chain);
  // A frame of the weights family from `peer`: "" or why it is refused (the path fails).
  [[nodiscard]] std::string on_frame(uint64_t peer, const transports::wire::DataFrameHeader& h,
                                     std::span<const std::byte> payload);
  // A range frame's header is in: where in its version's buffer the transport may write the
  // payload itself (the buffer kept alive till then), or nowhere: it comes through on_frame
  // (a header, a version not begun or whole, a frame on_frame refuses). Its end: on_placed,
  // "" or why it is refused. A frame of a link that is lost ends in neither, and a version
  // whole before a copy sent again finished has those same bytes written into it.
  transports::Placement place(uint64_t peer, const transports::wire::DataFrameHeader& h);
  [[nodiscard]] std::string on_placed(uint64_t peer, const transports::wire::DataFrameHeader& h);
  // The link to `peer` is gone: chains that went to it go on to the node after it. Taken in
  // poll(), never inside a send (a send's flush can lose a link, and so call this).
  void peer_lost(uint64_t peer) { lost_.push_back(peer); }
  // From the engine loop: the links lost since, and the arrivals silent past arrival_idle.
  void poll();
  // Versions being received now (tests and the links report).
  size_t arriving() const { return arrivals_.size(); }
  // Versions of relay `relay_id` are accepted from other nodes (a model here subscribes to
  // it); frames of any other are dropped.
  void accept(uint64_t relay_id) { accepted_.insert(relay_id); }
  // Whether a transfer to or from `peer` is under way (its link stays open while idle).
  bool busy_with(uint64_t peer) const;

 private:
  using Key = std::pair<uint64_t, uint64_t>;  // relay id, version
  // A version's shards in ranges, flattened: each range's step and bytes, and where each
  // shard's ranges begin (made once a version: a frame finds its range in O(1)).
  struct Ranges {
    std::vector<std::pair<uint32_t, uint64_t>> steps;
    std::vector<size_t> first;  // by shard, and one past the last
    explicit Ranges(const weights::Version& v);
    // The index of the range `step` names, or -1 when the version has none such.
    int64_t index(uint32_t step) const;
  };
  // Bytes of one range received, as intervals: a range sent again (a chain repaired) or
  // chunked otherwise is counted once.
  struct Received {
    std::map<uint64_t, uint64_t> spans;  // start -> end
    uint64_t bytes = 0;
    uint64_t add(uint64_t start, uint64_t end);
  };
  struct Forward {
    uint64_t relay_id = 0;
    std::shared_ptr<const weights::Version> version;
    std::shared_ptr<const Ranges> ranges;
    std::vector<NodeRef> chain;  // the nodes after this one, in order
    size_t next = 0;             // index in chain of the node sent to now
    bool header_acked = false;
    std::vector<bool> have;   // ranges whole here (all of them at the publisher)
    std::vector<bool> sent;   // ranges sent to chain[next]
    uint64_t generation = 0;  // a new next hop makes the old one's acknowledgements stale
    size_t unacked = 0;       // ranges sent to chain[next] and not yet released
    size_t unsent_from = 0;   // every range before it is sent to chain[next]
    bool sending = false;     // in send_ranges: a release it sees at once does not end it there
  };
  struct Arrival {
    uint64_t from = 0;
    std::vector<std::byte> header;
    uint64_t header_size = 0;  // 0 until its end marker came
    Received header_bytes;
    std::shared_ptr<weights::Version> version;  // made once the header is whole
    std::shared_ptr<const Ranges> table;
    std::vector<Received> ranges;
    size_t ranges_whole = 0;
    uint64_t forward = 0;  // its Forward to the next node (0: this node ends the chain)
    uint64_t serial = 0;   // this arrival's own number (another of the same version differs)
    std::chrono::steady_clock::time_point heard;  // its last frame
  };
  // Frames being placed: (peer, relay id, op_seq, step, offset) -> the arrival they were
  // placed for. A placement that ends finds its bytes counted only in that one: never in an
  // arrival of the same version begun since (its buffers are others).
  using PlacingKey = std::tuple<uint64_t, uint64_t, uint64_t, uint32_t, uint64_t>;
  std::map<PlacingKey, uint64_t> placing_;
  uint64_t next_serial_ = 1;
  // An arrival ends (whole, or given up): its placements under way count nowhere.
  void end_arrival(std::map<Key, Arrival>::iterator it);

  std::string on_header(const Key& key, Arrival& in, const transports::wire::DataFrameHeader& h,
                        std::span<const std::byte> payload);
  std::string take_header(const Key& key, Arrival& in);
  std::string on_range(const Key& key, Arrival& in, const transports::wire::DataFrameHeader& h,
                       std::span<const std::byte> payload);
  // Where `bytes` of range frame `h` go in `in`'s buffers, or why they cannot.
  struct Spot {
    size_t index = 0;  // in in.table->steps
    std::byte* to = nullptr;
  };
  static common::Result<Spot> locate(const Arrival& in, const transports::wire::DataFrameHeader& h,
                                     uint64_t bytes);
  // Whether range `index` of `in` is whole here.
  static bool whole(const Arrival& in, size_t index) {
    return in.ranges[index].bytes == in.table->steps[index].second;
  }
  // [offset, offset + bytes) of range `index` is in `in`'s buffer: passed on once the range is
  // whole, and the version handed over once every range is.
  void range_in(const Key& key, Arrival& in, size_t index, uint64_t offset, uint64_t bytes);
  // The arrival a frame of the weights family belongs to, or null (dropped).
  Arrival* arrival_of(const transports::wire::DataFrameHeader& h);
  // Sends the header to chain[next] (and on past nodes it cannot reach); the forward ends
  // when the chain does.
  void start_forward(uint64_t id, Forward& f);
  // The ranges whole here and not yet sent, once the next node has the header, while fewer
  // than kRangesAhead are unreleased.
  void send_ranges(uint64_t id, Forward& f);
  // A range's release (`generation` 0: none, a look after sending): sends the next ranges
  // into the room it made; ends the forward once every range is sent and released.
  void forward_done(uint64_t id, uint64_t generation);
  // Ranges one forward has on its link unreleased, at most: what a next node that refuses
  // the version (it answers the header) still gets once its refusal is in, beyond what was
  // released (written, without acknowledgements) before, rather than the whole version. 32 MiB:
  // enough to keep a link busy from one release to the next at 100 Gbit/s with 2 ms between
  // a range's send and its release (the peer's acknowledgement, with two NICs or more).
  static constexpr size_t kRangesAhead = 64;
  // The link to `peer` is gone (poll): chains that went to it go on past it.
  // A forward that ended before `peer` was lost may have ended before `peer` passed the
  // version on: the newest such version of each relay goes down the chain past it again.
  void move_past(uint64_t peer);
  // The newest version of relay `relay_id` this node sends, sent lately, receives or has.
  uint64_t newest_known(uint64_t relay_id) const;
  // This node will not keep version `key` from `peer`: it tells `peer`, which passes it over
  // (`logged`: and says so in its own log).
  void refuse(uint64_t peer, const Key& key, const std::string& reason, bool logged = true);
  // `peer` will not keep version `key`: the chain that went to it goes on past it.
  std::string refused(uint64_t peer, const Key& key, std::span<const std::byte> reason);

  NodeLinks& links_;
  Hooks hooks_;
  const std::chrono::milliseconds arrival_idle_;
  std::chrono::steady_clock::time_point next_idle_look_{};
  // Gives up the arrivals nothing came for in arrival_idle_ (at most once a second).
  void drop_silent_arrivals();
  // A frame of any arrival from `peer` came: none of them is stalled (they share its flow,
  // one waiting behind another's ranges).
  void heard_from(uint64_t peer);
  std::shared_ptr<weights::WeightMemory> memory_;
  std::map<Key, Arrival> arrivals_;
  std::map<uint64_t, Forward> forwards_;  // by a number of their own: a version may go two ways
  // Forwards ended lately (every range sent to `to` and released), newest last: a refusal
  // from `to` may come after. Held weakly: a version the store let go is not kept for this.
  struct Finished {
    uint64_t relay_id = 0;
    std::weak_ptr<const weights::Version> version;
    uint64_t to = 0;
    std::string to_name;
    std::vector<NodeRef> after;  // the chain past `to`
  };
  static constexpr size_t kMaxFinished = 64;
  std::vector<Finished> finished_;
  uint64_t next_forward_ = 1;
  std::vector<Key> done_;  // versions whole here lately: sent again, they are refused as such
  void remember_done(const Key& key);
  std::vector<uint64_t> lost_;  // peers lost, for poll()
  // Peers whose link was lost lately (instance -> the order it was noted in, the oldest let
  // go first past the bound); one leaves once it takes a header again.
  static constexpr size_t kMaxUnreachable = 4096;
  std::unordered_map<uint64_t, uint64_t> unreachable_;
  uint64_t unreachable_noted_ = 0;
  // The nodes of f.chain from f.next on that are unreachable_ go to its end, in order.
  void lost_nodes_last(Forward& f);
  std::set<uint64_t> accepted_;  // relay ids subscribed to here
};

}  // namespace plexus::daemon
