// Sends and recvs in CommMatcher (comm_matcher.h): a send within the node and a whole
// message from another node go to their destination's mailbox (p2p_mailboxes.h), a recv
// takes what waits there, and a recv nobody is left to send to fails instead of waiting.
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "daemon/engine/comm_matcher.h"
#include "shm/dtype.h"

namespace plexus::daemon {
namespace {

// Why `recv` can never complete: its source (every other rank, for one from any source) has
// left, or is `leaving` (for `why`); empty while a message may still come.
std::string orphaned(const Comm& comm, const Contribution& recv, int leaving,
                     const std::string& why) {
  if (!recv.entry.any_source) {
    if (recv.entry.peer == leaving) return why;
    const std::string* departure = comm.departure(recv.entry.peer);
    return departure != nullptr ? *departure : std::string();
  }
  // Stops at the first rank still there: at once, unless nearly everybody left.
  for (int rank = 0; rank < comm.nranks(); ++rank) {
    if (rank != recv.rank && rank != leaving && comm.departure(rank) == nullptr) return {};
  }
  return "rank " + std::to_string(recv.rank) + " waits to receive from any rank, but every " +
         "other rank of communicator " + token_prefix(comm.token()) + " has left" +
         (why.empty() ? "" : " (the last: " + why + ")");
}

// Why a message of `sent` bytes cannot complete `recv`, or empty when it can.
std::string size_mismatch(const Contribution& recv, const P2pMessage& message) {
  const uint64_t want = recv.entry.recv.bytes;
  if (const auto& send = message.send) {
    if (send->entry.send.bytes == want && send->entry.dtype == recv.entry.dtype) return {};
    return "send from rank " + std::to_string(message.source) + " to rank " +
           std::to_string(recv.rank) + " carries " + std::to_string(send->entry.count) + " " +
           std::string(shm::dtype_name(send->entry.dtype)) + " but the matching recv expects " +
           std::to_string(recv.entry.count) + " " + std::string(shm::dtype_name(recv.entry.dtype));
  }
  if (message.data.size() == want) return {};
  return "recv on rank " + std::to_string(recv.rank) + " from rank " +
         std::to_string(message.source) + " expects " + std::to_string(want) +
         " bytes but the send carried " + std::to_string(message.data.size());
}

}  // namespace

void CommMatcher::submit_p2p(Comm& comm, Contribution part) {
  const int peer = part.entry.peer;
  if (part.entry.opcode == shm::Opcode::kSend) {
    if (comm.members()[static_cast<size_t>(peer)].remote) {
      internode_.submit_p2p(comm, std::move(part));
      return;
    }
    if (const std::string* departure = comm.departure(peer)) {
      complete_(part.session, part.entry.user_data, PLEXUS_ERR_PEER_LOST, *departure);
      return;
    }
    const int source = part.rank;
    const int32_t tag = part.entry.tag;
    if (auto match = comm.p2p.deliver(peer, P2pMessage{source, tag, std::move(part), {}})) {
      finish(comm, std::move(*match));
    }
    return;
  }
  // A recv: what its sources sent before they left can still be taken; with nothing waiting
  // and nobody left to send, it fails now.
  if (!comm.p2p.message_waits(part)) {
    if (std::string why = orphaned(comm, part, -1, {}); !why.empty()) {
      complete_(part.session, part.entry.user_data, PLEXUS_ERR_PEER_LOST, why);
      return;
    }
  }
  if (auto match = comm.p2p.post(std::move(part))) finish(comm, std::move(*match));
}

void CommMatcher::deliver_remote(Comm& comm, int destination, P2pMessage message) {
  // Sent before its destination left: nobody will take it.
  if (comm.departure(destination) != nullptr) return;
  if (auto match = comm.p2p.deliver(destination, std::move(message))) {
    finish(comm, std::move(*match));
  }
}

void CommMatcher::fail_orphaned_recvs(Comm& comm, int leaving, const std::string& why) {
  // The predicate sees each recv once, in the order take_orphans returns those it chose.
  std::vector<std::string> texts;
  const std::vector<Contribution> doomed = comm.p2p.take_orphans([&](const Contribution& recv) {
    std::string text = orphaned(comm, recv, leaving, why);
    if (text.empty()) return false;
    texts.push_back(std::move(text));
    return true;
  });
  for (size_t i = 0; i < doomed.size(); ++i) {
    complete_(doomed[i].session, doomed[i].entry.user_data, PLEXUS_ERR_PEER_LOST, texts[i]);
  }
}

void CommMatcher::finish(Comm& comm, P2pMatch match) {
  Contribution& recv = match.recv;
  P2pMessage& message = match.message;
  if (std::string text = size_mismatch(recv, message); !text.empty()) {
    if (message.send) {
      complete_(message.send->session, message.send->entry.user_data, PLEXUS_ERR_MISMATCH, text);
    }
    complete_(recv.session, recv.entry.user_data, PLEXUS_ERR_MISMATCH, text);
    return;
  }
  if (recv.entry.any_source) {
    recv.session->any_source_matches[recv.entry.user_data] = message.source;
  }
  if (message.send) {
    copy_local(comm, std::move(*message.send), std::move(recv));
    return;
  }
  // From another node: its bytes are here.
  const uint64_t bytes = message.data.size();
  if (bytes > 0) std::memcpy(recv.recv, message.data.data(), bytes);
  watch_.count_completed(comm, bytes, recv.entry);
  complete_(recv.session, recv.entry.user_data, PLEXUS_SUCCESS, {});
}

void CommMatcher::copy_local(Comm& comm, Contribution send, Contribution recv) {
  const uint64_t bytes = recv.entry.recv.bytes;
  watch_.count_completed(comm, bytes, send.entry, &recv.entry);
  if (!send.session->staged_ops.empty() || !recv.session->staged_ops.empty()) {
    if (gpu_.direct_op(send) || gpu_.direct_op(recv)) {
      gpu_.start_direct_copy(std::move(send), std::move(recv));
      return;
    }
  }
  executor_.copy(recv.recv, send.send, bytes);
  complete_(send.session, send.entry.user_data, PLEXUS_SUCCESS, {});
  complete_(recv.session, recv.entry.user_data, PLEXUS_SUCCESS, {});
}

}  // namespace plexus::daemon
