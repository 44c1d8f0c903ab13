// Point-to-point matching in one communicator, as MPI and gloo match: a recv names a source
// rank or any source, and a tag; a message (a send of a rank of this node, or a whole
// message from another node) goes to the oldest waiting recv of its destination that names
// its source (or any source) and its tag, and a recv takes the oldest waiting message it
// names. Messages from one source to one destination come here in the order they were sent,
// so two with the same tag are received in that order (MPI's non-overtaking rule). A waiting
// recv never matches a waiting message: whichever came second took the first.
//
// Holds a mailbox only for this node's ranks that had traffic: nothing per peer rank or node.
// Engine thread only (Comm's engine-thread state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
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
  // Whether a waiting recv may take a message from a rank `from` accepts (named, or any).
  bool recv_waits_on(const std::function<bool(int source)>& from) const;

  // Takes out the recvs and messages the predicates choose (a message with the rank it
  // waits at).
  P2pTaken take(const std::function<bool(const Contribution& recv)>& recv,
                const std::function<bool(const P2pMessage&, int destination)>& message);
  // The waiting recvs no message can ever come for: their named source is gone, or (any
  // source) every other rank of the `nranks` is.
  std::vector<Contribution> take_orphans(int nranks, const std::function<bool(int rank)>& gone);

  // Bytes of messages from other nodes held here.
  uint64_t held_bytes() const { return held_bytes_; }
  bool empty() const { return boxes_.empty(); }

 private:
  struct Mailbox {
    std::deque<Contribution> recvs;   // in the order they were posted
    std::deque<P2pMessage> messages;  // in the order they came
  };

  std::unordered_map<int, Mailbox> boxes_;  // by destination rank
  uint64_t held_bytes_ = 0;
};

// Whether `recv` takes a message from `source` tagged `tag`.
bool recv_accepts(const Contribution& recv, int source, int32_t tag);

}  // namespace plexus::daemon
