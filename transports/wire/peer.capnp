# The handshake that opens every connection between two plexusd daemons, before any
# control message or data frame: who the peer is (protocol version, instance, node name,
# NICs, where it accepts connections), what the connection is for, and, when the cluster
# has a secret, proof that both ends hold it. Frames are a u32 byte length in host byte order
# (plexusd peers share an architecture: common/frame_codec.h) and one Cap'n Proto message,
# as on the client socket.
@0xd3b8a1f4c7e29a15;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("plexus::transports::wire::peer");

enum ConnectionRole {
  control @0;  # rendezvous messages between the control threads
  data @1;     # data frames between the engines (wire/data_frame.h)
}

struct Nic {
  name @0 :Text;
  address @1 :Text;
  speedMbps @2 :UInt32;  # 0 when unknown
}

struct Hello {
  protocolVersion @0 :UInt32;
  instanceId @1 :UInt64;          # random per daemon start; never 0
  nodeName @2 :Text;
  role @3 :ConnectionRole;        # chosen by the side that connects; echoed
  addresses @4 :List(Text);       # "ip:port" where this daemon accepts peers
  nics @5 :List(Nic);
  nonce @6 :Data;                 # 32 random bytes, fresh per connection
  authenticated @7 :Bool;         # this side holds a cluster secret
  rdma @8 :Bool;                  # data: this side can carry the connection over RDMA (a
                                  # queue pair on its NIC's verbs port); both must offer
  latency @9 :Bool;               # data: the connection carries the latency class (its
                                  # own priority and DSCP); chosen by the connector; echoed
}

struct Proof {
  mac @0 :Data;                   # HMAC-SHA256 over both nonces, both ids, role, direction
}

struct Refused {
  reason @0 :Text;
  crossed @1 :Bool;               # data: both sides dialled each other at once; the acceptor
                                  # keeps the one the lower instance id dialled (its own), and
                                  # the connector waits for it instead of failing
}

struct HandshakeMessage {
  union {
    hello @0 :Hello;
    proof @1 :Proof;
    accepted @2 :Void;
    refused @3 :Refused;
  }
}
