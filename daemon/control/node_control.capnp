# Messages between the control threads of two daemons, on a control connection opened by
# the peer handshake (transports/wire/peer.capnp). Multi-node communicators form at the
# root daemon (the one whose instance id and addresses the unique id carries): every
# node sends it the ranks it holds as they join; once all ranks are present the topology
# goes down a tree of the nodes (formed_tree.h: the root sends it to a few, each of them on
# to a few more), or the root tells every node the reason it failed.
@0xe6a4c92b1d7f3c58;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("plexus::daemon::node_control");

struct Join {
  token @0 :Data;          # 16 bytes
  nranks @1 :UInt32;
  ranks @2 :List(UInt32);  # ranks of the sending node that joined now
  timeoutMs @3 :UInt32;
  algorithm @4 :Text;      # PLEXUS_ALGO of the joining ranks ("" = choose)
  # A shrink (plexus_comm_shrink): the communicator it succeeds (16 bytes; empty: a unique
  # id's) and the ranks of it left out, ascending. Its root checks the token derives from
  # them (comm_successor.h) and waits for every node holding a kept rank.
  parent @5 :Data;
  excluded @6 :List(UInt32);
}

struct FormedNode {
  instanceId @0 :UInt64;
  name @1 :Text;
  addresses @2 :List(Text);
}

struct Formed {
  token @0 :Data;
  nodes @1 :List(FormedNode);  # participant order
  rankNode @2 :List(UInt32);   # by rank: index into nodes
  alphaS @3 :Float64;          # communicator-wide link cost for the algorithm choice
  betaSPerByte @4 :Float64;
  algorithm @5 :Text;
  root @6 :UInt64;             # the root daemon's instance id
  fanout @7 :UInt32;           # each node forwards to this many (formed_tree.h); 0: none
}

struct JoinFailed {
  token @0 :Data;
  message @1 :Text;
  # The plexus_result_t the ranks fail with (the root knows why: an init timeout, a node
  # that went away or refused its part, ranks that disagree). 0 or unknown: INVALID_ARGUMENT.
  code @2 :UInt32;
}

# A communicator revoked (plexus_comm_revoke, or a daemon that lost one of its nodes): it
# goes down a tree of the communicator's nodes rooted at the daemon that revoked it
# (formed_tree.h), so that every node hears, linked to the revoker or not.
struct Revoke {
  token @0 :Data;
  text @1 :Text;           # what the ranks fail with: who revoked it and why
  origin @2 :UInt64;       # the revoking daemon's instance id: the tree's root
  fanout @3 :UInt32;
  code @4 :UInt32;         # plexus_result_t: REVOKED, or PEER_LOST for a node lost
}

struct NodeMessage {
  union {
    join @0 :Join;
    formed @1 :Formed;
    joinFailed @2 :JoinFailed;
    revoke @3 :Revoke;
    probe @4 :Void;        # nothing to do: opens a control connection (a shrink's root
                           # finds a node it waits for that is gone, at once)
    weightsSubscribe @5 :WeightsSubscribe;
  }
}

# To the daemon a weights key names (its publisher's): push this node every version of the
# model from now on, and now the newest if it is newer than `have`.
struct WeightsSubscribe {
  relayId @0 :UInt64;
  have @1 :UInt64;
}
