// Point-to-point matching in one communicator, as MPI and gloo match: a recv names a source
// rank or any source, and a tag; a message (a send of a rank of this node, or a whole
// message from another node) goes to the oldest waiting recv of its destination that names
// its source (or any source) and its tag, and a recv takes the oldest waiting message it
// names. Messages from one source to one destination come here in the order they were sent,
// so two with the same tag are received in that order (MPI's non-overtaking rule). A waiting
// recv never matches a waiting message: whichever came second took the first.
//
// Each match is O(log n) at most, whatever waits: recvs and messages are queued by (source,
// tag) and by tag for any source, each stamped with when it came, and a match takes the
// older of the two candidates. A mailbox exists only for a rank of this node that has
// something waiting: nothing per peer rank or node. Engine thread only (Comm's state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "daemon/local/contribution.h"

namespace plexus::daemon {

struct P2pMessage {
  int source = -1;
  int32_t tag = 0;
  std::optional<Contribution> send;  // a send of this node, read from its buffer when matched
  std::vector<std::byte> data;       // else a message from another node, held here
};

struct P2pMatch {
  Contribution recv;
  P2pMessage message;
};

// What a removal took out: recvs, and the sends of this node among the messages.
struct P2pTaken {
  std::vector<Contribution> recvs;
  std::vector<Contribution> sends;
};

class P2pMailboxes {
 public:
  // A message for `destination` (a rank of this node): the recv it completes, or nothing
  // (it waits for one).
  std::optional<P2pMatch> deliver(int destination, P2pMessage message);
  // A recv of `recv.rank`: the message it takes, or nothing (it waits for one).
  std::optional<P2pMatch> post(Contribution recv);

  // Whether a recv waits at `destination` that a message from `source` tagged `tag` would
  // complete; whether a message waits that `recv` would take.
  bool recv_waits(int destination, int source, int32_t tag) const;
  bool message_waits(const Contribution& recv) const;
  // Whether a recv waits for a message from a rank `from` accepts (named recvs only: one from
  // any source learns of a lost node from the communicator's revoke).
  bool recv_waits_on(const std::function<bool(int source)>& from) const;

  // Takes out the recvs and messages the predicates choose (a message with the rank it
  // waits at). Visits everything: for departures and failures, not for each op.
  P2pTaken take(const std::function<bool(const Contribution& recv)>& recv,
                const std::function<bool(const P2pMessage&, int destination)>& message);
  // The waiting recvs no message can ever come for, by `orphaned` (called once for each
  // waiting recv; those it chose come back in the order it chose them).
  std::vector<Contribution> take_orphans(const std::function<bool(const Contribution&)>& orphaned);

  // Bytes of messages from other nodes held here.
  uint64_t held_bytes() const { return held_bytes_; }
  bool empty() const { return boxes_.empty(); }

 private:
  template <typename T>
  struct Stamped {
    uint64_t stamp;  // when it came: the older of two candidates matches
    T item;
  };
  // (source, tag) as one key.
  static uint64_t key(int source, int32_t tag) {
    return static_cast<uint64_t>(static_cast<uint32_t>(source)) << 32 | static_cast<uint32_t>(tag);
  }
  struct Mailbox {
    std::unordered_map<uint64_t, std::deque<Stamped<Contribution>>> named_recvs;  // by key
    std::unordered_map<int32_t, std::deque<Stamped<Contribution>>> any_recvs;     // by tag
    std::unordered_map<uint64_t, std::deque<Stamped<P2pMessage>>> messages;       // by key
    // By tag, the waiting messages' stamps and sources in the order they came (a recv from
    // any source takes the first).
    std::unordered_map<int32_t, std::map<uint64_t, int>> message_order;
    size_t waiting = 0;  // recvs and messages
  };

  // Pops the front of `queue` (in `map` under `k`), dropping the queue once empty.
  template <typename Map, typename K>
  static auto pop(Map& map, const K& k) -> decltype(map.begin()->second.front().item);
  void forget_if_empty(int destination);

  std::unordered_map<int, Mailbox> boxes_;  // by destination rank
  uint64_t next_stamp_ = 0;
  uint64_t held_bytes_ = 0;
};

// Whether `recv` takes a message from `source` tagged `tag`.
bool recv_accepts(const Contribution& recv, int source, int32_t tag);

}  // namespace plexus::daemon
