# Sourced by the cluster tests after require_netns.sh: what each of them says to the
# cluster. Needs $cluster (plexus-cluster.sh) and, when called, $name (the cluster) and a
# fail function (each test's own: what it shows on failure differs).
step() { echo "== $*"; }
# A command on node $1, in its namespace.
on() { local node=$1; shift; "$cluster" run --name "$name" --node "$node" -- "$@"; }
# NIC $2 of node $1 set up or down ($3), or its cable plugged or pulled.
nic() { "$cluster" nic --name "$name" --node "$1" --nic "$2" "$3" || fail "nic $*"; }
cable() { "$cluster" cable --name "$name" --node "$1" --nic "$2" "$3" || fail "cable $*"; }
