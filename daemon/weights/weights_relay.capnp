# What one daemon tells the next in a weight relay chain (daemon/engine/weight_relay.h), as the
# header message of a version on the data link, before its bytes.
@0xb4d1c7e29a5f3068;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("plexus::daemon::weights::relay");

struct Tensor {
  name @0 :Text;
  bytes @1 :UInt64;
}

struct Shard {
  tensors @0 :List(Tensor);   # laid out in order, each at a 64-byte aligned offset
}

struct Node {
  instance @0 :UInt64;
  name @1 :Text;
  addresses @2 :List(Text);
}

struct Header {
  version @0 :UInt64;
  shards @1 :List(Shard);
  next @2 :List(Node);         # the rest of the chain after the receiver, in order
}
