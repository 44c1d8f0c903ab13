#!/usr/bin/env bash
# A cluster of network namespaces on this machine: N nodes x M NICs. Every rail (NIC
# index) is a bridge inside a private "switch" namespace, each node NIC a veth into it,
# node n's NIC r has address 198.18.r.(n+1)/24. Nothing is created in the host's own
# namespace, so test traffic never leaves these namespaces. Optional tc tbf rate per NIC.
#
#   plexus-cluster.sh exec --nodes N --nics M [--rate RATE [--burst BYTES]] [--mtu BYTES]
#                          [--tcp-cc NAME] [--spine] [--daemons BUILD_DIR] [--on LIST] [--parallel] -- CMD...
#       create the cluster, run CMD on the chosen nodes (default all; one after another, or
#       all at once with --parallel), tear everything down even when interrupted; exit with
#       the first failing status
#   plexus-cluster.sh up --name TAG --nodes N --nics M [--rate RATE [--burst BYTES]]
#                        [--mtu BYTES] [--tcp-cc NAME] [--spine] [--daemons BUILD_DIR]
#   plexus-cluster.sh run --name TAG --node I -- CMD...
#   plexus-cluster.sh nic --name TAG --node I --nic R up|down    set node I's NIC R up/down
#   plexus-cluster.sh cable --name TAG --node I --nic R up|down  its switch port: carrier
#   plexus-cluster.sh shape --name TAG --node I --nic R --rate RATE|off  tbf on that NIC alone
#   plexus-cluster.sh daemons --name TAG --daemons BUILD_DIR  stop every node's plexusd and
#       start BUILD_DIR's instead (e.g. an older build, to compare the two)
#   plexus-cluster.sh daemon --name TAG --node I kill|start  SIGKILL node I's plexusd (a node
#       that dies: the time goes to $PLEXUS_CLUSTER_DIR/killed_at, ns), or start it again
#   plexus-cluster.sh down --name TAG
#
# --spine routes between the rails as a spine would: the switch namespace forwards, with
# address 198.18.r.254 on rail r, and each node reaches the other rails' subnets over each
# of its NICs through it (metric 100: a rail's own subnet stays direct). A NIC set down
# loses its routes, as on a host with no network manager; `nic ... up` puts them back.
# `cable ... down` takes the switch port down: the NIC loses carrier, its routes stay.
#
# With --daemons, every node runs a plexusd that accepts its peers on port 7355 of every
# NIC, named n<i>, holding the cluster's secret (a random file made for it). --mtu sets every
# NIC's and the switch ports' MTU (default 1500; 9000 for a jumbo-frame fabric). --burst is
# tbf's bucket (default 256kb, which lets a short exchange through at veth speed; a few
# packets, e.g. 16kb, make every byte pay its wire time, as a real NIC does). --tcp-cc
# sets the nodes' TCP congestion control (default: the host's); a namespace may only pick
# one the host allows, so NAME is added to net.ipv4.tcp_allowed_congestion_control (which
# changes nothing for programs that do not ask for it).
# In CMD, $PLEXUS_NODE is the node index, $PLEXUS_SOCKET its plexusd's socket (with
# --daemons), $PLEXUS_CLUSTER_DIR a directory every node sees (ids, logs: n<i>/plexusd.log),
# $PLEXUS_CLUSTER_NODES the node count and $PLEXUS_CLUSTER_ADDR_<r>_<n> the address of node
# n's NIC r. Needs root (ip netns, tc).
set -euo pipefail

usage() { sed -n '2,41p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "plexus-cluster: $*" >&2; exit 2; }

state_root=${PLEXUS_CLUSTER_STATE:-/tmp}
ns_name() { echo "px$1-$2"; }  # tag, suffix

address() { echo "198.18.$1.$(($2 + 1))"; }  # rail, node

# Node n's routes to the other rails' subnets over NIC r, through the spine (--spine).
spine_routes() {  # tag, node, nic, nics
  local r=$3
  for q in $(seq 0 $(($4 - 1))); do
    [ "$q" -eq "$r" ] && continue
    ip -n "$(ns_name "$1" "n$2")" route replace "198.18.$q.0/24" via "198.18.$r.254" dev "nic$r" metric 100
  done
}

# The kernel's ARP table is one for the whole host, every namespace's entries counted
# against the host's gc_thresh3 (1024 by default; the knob exists only in the host's own
# namespace). A full mesh of N nodes needs about N*N*NICs entries: past the limit new
# neighbours are not resolved ("neighbour: arp_cache: neighbor table overflow!" in dmesg),
# and connects see no answer or "No route to host" -- a limit of this test cluster sharing
# one kernel, not of one host. Raised (never lowered) to fit, as a large flat L2 cluster's
# hosts are tuned.
fit_neighbour_table() {  # nodes, nics
  local need=$(($1 * ($1 + 1) * $2 * 2))
  local key=/proc/sys/net/ipv4/neigh/default
  [ -w "$key/gc_thresh3" ] || return 0
  if [ "$(cat "$key/gc_thresh3")" -lt "$need" ]; then
    sysctl -qw net.ipv4.neigh.default.gc_thresh3="$need" \
      net.ipv4.neigh.default.gc_thresh2="$((need / 2))"
  fi
}

cluster_up() {
  local tag=$1 nodes=$2 nics=$3 rate=$4 build=$5 mtu=$6 tcp_cc=$7 spine=$8
  local dir=$state_root/plexus-cluster-$tag
  [ ! -e "$dir" ] || die "cluster '$tag' already exists ($dir)"
  [ "$nodes" -ge 1 ] && [ "$nodes" -le 250 ] || die "--nodes must be 1..250"
  [ "$nics" -ge 1 ] && [ "$nics" -le 8 ] || die "--nics must be 1..8"
  [ "$mtu" -ge 576 ] && [ "$mtu" -le 65535 ] || die "--mtu must be 576..65535"
  if [ -n "$tcp_cc" ]; then
    grep -qw -- "$tcp_cc" /proc/sys/net/ipv4/tcp_available_congestion_control ||
      modprobe "tcp_$tcp_cc" 2>/dev/null || true
    grep -qw -- "$tcp_cc" /proc/sys/net/ipv4/tcp_available_congestion_control ||
      die "--tcp-cc $tcp_cc: not available here ($(cat /proc/sys/net/ipv4/tcp_available_congestion_control))"
    local allowed; allowed=$(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control)
    grep -qw -- "$tcp_cc" <<< "$allowed" ||
      sysctl -qw net.ipv4.tcp_allowed_congestion_control="$allowed $tcp_cc"
  fi
  [ -z "$spine" ] || [ "$nics" -ge 2 ] || die "--spine needs --nics 2 or more"
  fit_neighbour_table "$nodes" "$nics"
  mkdir -p "$dir"
  printf 'nodes=%s\nnics=%s\nspine=%s\ndaemons=%q\n' "$nodes" "$nics" "$spine" "$build" > "$dir/state"
  local sw; sw=$(ns_name "$tag" sw)
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  [ -z "$spine" ] || ip netns exec "$sw" sysctl -qw net.ipv4.ip_forward=1
  for r in $(seq 0 $((nics - 1))); do
    ip -n "$sw" link add "rail$r" type bridge
    ip -n "$sw" link set "rail$r" mtu "$mtu" up
    [ -z "$spine" ] || ip -n "$sw" addr add "198.18.$r.254/24" dev "rail$r"
  done
  for n in $(seq 0 $((nodes - 1))); do
    local ns; ns=$(ns_name "$tag" "n$n")
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    # As datacenter hosts are tuned: an idle connection keeps its congestion window (an
    # algorithm's rounds leave each pair's connection idle between bursts).
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_slow_start_after_idle=0
    [ -z "$tcp_cc" ] || ip netns exec "$ns" sysctl -qw net.ipv4.tcp_congestion_control="$tcp_cc"
    if [ -n "$spine" ]; then
      # A reply to another rail leaves over the NIC its connection is bound to, not the one
      # the source address's subnet is on: no reverse-path filter may drop it.
      ip netns exec "$ns" sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
    fi
    for r in $(seq 0 $((nics - 1))); do
      # Created inside the node namespace, the peer end moved to the switch.
      ip -n "$ns" link add "nic$r" type veth peer name "n${n}r$r" netns "$sw"
      ip -n "$sw" link set "n${n}r$r" mtu "$mtu" master "rail$r" up
      ip -n "$ns" addr add "$(address "$r" "$n")/24" dev "nic$r"
      ip -n "$ns" link set "nic$r" mtu "$mtu" up
      if [ -n "$rate" ]; then shape_nic "$ns" "nic$r" "$rate"; fi
    done
    if [ -n "$spine" ]; then
      for r in $(seq 0 $((nics - 1))); do spine_routes "$tag" "$n" "$r" "$nics"; done
    fi
    if [ -n "$build" ]; then
      start_daemon "$tag" "$n"
    fi
  done
  if [ -n "$build" ]; then wait_daemons "$tag" "$nodes"; fi
}

start_daemon() {  # tag, node
  local dir=$state_root/plexus-cluster-$1 n=$2
  if [ ! -f "$dir/secret" ]; then
    (umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$dir/secret")
  fi
  mkdir -p "$dir/n$n"
  ip netns exec "$(ns_name "$1" "n$n")" "$build/daemon/plexusd" --socket "$dir/n$n/plexusd.sock" \
    --peer-listen 0.0.0.0:7355 --node-name "n$n" --cluster-secret-file "$dir/secret" \
    --log-level "${PLEXUS_CLUSTER_LOG_LEVEL:-info}" ${PLEXUS_CLUSTER_DAEMON_ARGS:-} >> "$dir/n$n/plexusd.log" 2>&1 &
  echo $! > "$dir/n$n/plexusd.pid"
}

# Whether process $1 still runs. A daemon an earlier call of this script started is no child
# of this one: once it exits it stays a zombie until init reaps it (on some machines a second
# or two later), and kill -0 calls a zombie alive. /proc's state field tells them apart.
running() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }  # past the command name, which may hold spaces and parentheses
  [ "${stat%% *}" != Z ]
}

stop_daemons() {  # tag
  local dir=$state_root/plexus-cluster-$1
  for pidfile in "$dir"/n*/plexusd.pid; do
    [ -f "$pidfile" ] || continue
    local pid; pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do running "$pid" || break; sleep 0.02; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$pidfile"
  done
}

wait_daemons() {  # tag, nodes
  local dir=$state_root/plexus-cluster-$1
  for n in $(seq 0 $(($2 - 1))); do
    for _ in $(seq 200); do [ -S "$dir/n$n/plexusd.sock" ] && break; sleep 0.025; done
    [ -S "$dir/n$n/plexusd.sock" ] || die "plexusd of node $n did not start: $(cat "$dir/n$n/plexusd.log")"
  done
}

cluster_daemons() {  # tag: BUILD_DIR's plexusd in place of the running ones, on every node
  local dir
  load_cluster "$1" 0  # sets nodes
  set -- "$1" "$nodes"
  stop_daemons "$1"
  for n in $(seq 0 $(($2 - 1))); do
    rm -f "$dir/n$n/plexusd.sock"
    start_daemon "$1" "$n"
  done
  wait_daemons "$1" "$2"
}

cluster_daemon() {  # tag, node, kill|start: one node's plexusd dies, or starts again
  local dir=$state_root/plexus-cluster-$1 n=$2 daemons=""
  load_cluster "$1" "$n"  # sets daemons: the build the cluster was made with
  build=${build:-$daemons}
  case "$3" in
    kill)
      [ -f "$dir/n$n/plexusd.pid" ] || die "node $n runs no plexusd"
      date +%s%N > "$dir/killed_at"
      kill -9 "$(cat "$dir/n$n/plexusd.pid")" 2>/dev/null || true
      rm -f "$dir/n$n/plexusd.pid" "$dir/n$n/plexusd.sock" ;;
    start)
      [ -n "$build" ] || die "the cluster was made without --daemons"
      rm -f "$dir/n$n/plexusd.sock"
      start_daemon "$1" "$n"
      for _ in $(seq 200); do [ -S "$dir/n$n/plexusd.sock" ] && break; sleep 0.025; done
      [ -S "$dir/n$n/plexusd.sock" ] || die "plexusd of node $n did not start again" ;;
    *) die "daemon needs kill or start, not '$3'" ;;
  esac
}

cluster_down() {
  local tag=$1
  local dir=$state_root/plexus-cluster-$tag
  stop_daemons "$tag"
  local namespaces
  namespaces=$(ip netns list | awk '{print $1}' | grep -E "^px$tag-(sw|n[0-9]+)$" || true)
  # Whatever still runs inside (an interrupted command, its children) goes too.
  for ns in $namespaces; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -TERM 2>/dev/null || true
  done
  for ns in $namespaces; do
    for _ in $(seq 50); do [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break; sleep 0.02; done
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    # Deleting a namespace removes its veth ends and bridges.
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$dir"
}

# Sets dir and cluster TAG's nodes, nics and spine; checks that node I is one of its nodes.
load_cluster() {  # tag, node
  dir=$state_root/plexus-cluster-$1
  [ -f "$dir/state" ] || die "no cluster '$1'"
  spine="" daemons=""
  # shellcheck disable=SC1091
  . "$dir/state"
  [ "$2" -ge 0 ] && [ "$2" -lt "$nodes" ] || die "node $2 is not in 0..$((nodes - 1))"
}

cluster_run() {
  local tag=$1 node=$2 dir; shift 2
  load_cluster "$tag" "$node"
  local vars=(PLEXUS_NODE="$node" PLEXUS_CLUSTER_NODES="$nodes" PLEXUS_CLUSTER_NICS="$nics"
              PLEXUS_CLUSTER_DIR="$dir")
  [ -S "$dir/n$node/plexusd.sock" ] && vars+=(PLEXUS_SOCKET="$dir/n$node/plexusd.sock")
  for r in $(seq 0 $((nics - 1))); do
    for n in $(seq 0 $((nodes - 1))); do vars+=("PLEXUS_CLUSTER_ADDR_${r}_${n}=$(address "$r" "$n")"); done
  done
  ip netns exec "$(ns_name "$tag" "n$node")" env "${vars[@]}" "$@"
}

# Sets node I's NIC R (or, for `cable`, its switch port) up or down.
cluster_link() {  # what (nic|cable), tag, node, nic, up|down
  local what=$1 tag=$2 node=$3 r=$4 to=$5 dir
  load_cluster "$tag" "$node"
  [ "$r" -ge 0 ] && [ "$r" -lt "$nics" ] || die "NIC $r is not in 0..$((nics - 1))"
  if [ "$what" = cable ]; then
    ip -n "$(ns_name "$tag" sw)" link set "n${node}r$r" "$to"
    return
  fi
  ip -n "$(ns_name "$tag" "n$node")" link set "nic$r" "$to"
  if [ "$to" = up ] && [ -n "$spine" ]; then spine_routes "$tag" "$node" "$r" "$nics"; fi
}

# NIC `dev` of namespace `ns` sends at `rate`: tbf, with pfifo_fast (Linux's built-in
# default qdisc) as its queue, which serves socket priority 6 (the latency class's
# connections) before other traffic, as a switch serves a priority queue. pfifo_fast counts
# packets (the NIC's txqueuelen, per band): set to about 50 ms of MTU-sized packets at
# `rate`, what tbf's own byte limit (latency 50ms) would hold.
shape_nic() {  # ns, dev, rate
  local packets
  packets=$(awk -v r="$3" -v mtu="$mtu" 'BEGIN {
    n = r + 0; u = tolower(substr(r, length(n "") + 1))
    f = (u == "kbit") ? 1e3 : (u == "mbit") ? 1e6 : (u == "gbit") ? 1e9 : 1
    p = int(n * f / 8 * 0.05 / mtu); print (p < 16 ? 16 : p) }')
  ip -n "$1" link set dev "$2" txqueuelen "$packets"
  ip netns exec "$1" tc qdisc add dev "$2" root handle 1: tbf rate "$3" burst "$burst" latency 50ms
  ip netns exec "$1" tc qdisc add dev "$2" parent 1:1 pfifo_fast
}

# A slow NIC: node I's NIC R sends at RATE (tc tbf), or unshaped again with "off".
cluster_shape() {  # tag, node, nic, rate
  local tag=$1 node=$2 r=$3 to=$4 ns
  load_cluster "$tag" "$node"
  [ "$r" -ge 0 ] && [ "$r" -lt "$nics" ] || die "NIC $r is not in 0..$((nics - 1))"
  ns=$(ns_name "$tag" "n$node")
  ip netns exec "$ns" tc qdisc del dev "nic$r" root 2>/dev/null || true
  if [ "$to" = off ]; then
    ip -n "$ns" link set dev "nic$r" txqueuelen 1000  # veth's own
  else
    shape_nic "$ns" "nic$r" "$to"
  fi
}

cmd=${1:-}
[ -n "$cmd" ] || { usage; exit 2; }
case "$cmd" in -h|--help) usage; exit 0 ;; esac
shift
tag="" nodes=2 nics=1 rate="" burst=256kb mtu=1500 tcp_cc="" build="" node="" on="" parallel="" spine="" nic="" to=""
while [ $# -gt 0 ]; do
  case "$1" in
    --name) tag=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --nics) nics=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --burst) burst=$2; shift 2 ;;
    --mtu) mtu=$2; shift 2 ;;
    --tcp-cc) tcp_cc=$2; shift 2 ;;
    --spine) spine=1; shift ;;
    --nic) nic=$2; shift 2 ;;
    up|down) to=$1; shift ;;  # nic, cable
    kill|start) to=$1; shift ;;  # daemon
    --daemons) build=$(cd "$2" && pwd); shift 2 ;;
    --node) node=$2; shift 2 ;;
    --on) on=$2; shift 2 ;;
    --parallel) parallel=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ "$(id -u)" -eq 0 ] || die "needs root (ip netns, tc)"
[ -z "$to" ] || [ "$cmd" = nic ] || [ "$cmd" = cable ] || [ "$cmd" = daemon ] ||
  die "'$to' is only for nic, cable and daemon"
case "$tag" in *[!a-z0-9]*) die "--name must be lowercase letters and digits" ;; esac

case "$cmd" in
  up) [ -n "$tag" ] || die "up needs --name"
      cluster_up "$tag" "$nodes" "$nics" "$rate" "$build" "$mtu" "$tcp_cc" "$spine" ;;
  nic|cable) [ -n "$tag" ] && [ -n "$node" ] && [ -n "$nic" ] && [ -n "$to" ] ||
               die "$cmd needs --name, --node, --nic and up or down"
             cluster_link "$cmd" "$tag" "$node" "$nic" "$to" ;;
  shape) [ -n "$tag" ] && [ -n "$node" ] && [ -n "$nic" ] && [ -n "$rate" ] ||
           die "shape needs --name, --node, --nic and --rate RATE|off"
         cluster_shape "$tag" "$node" "$nic" "$rate" ;;
  down) [ -n "$tag" ] || die "down needs --name"; cluster_down "$tag" ;;
  daemons) [ -n "$tag" ] && [ -n "$build" ] || die "daemons needs --name and --daemons"
           cluster_daemons "$tag" ;;
  daemon) [ -n "$tag" ] && [ -n "$node" ] || die "daemon needs --name, --node and kill or start"
          cluster_daemon "$tag" "$node" "$to" ;;
  run) [ -n "$tag" ] && [ -n "$node" ] && [ $# -gt 0 ] || die "run needs --name, --node and a command"
       cluster_run "$tag" "$node" "$@" ;;
  exec)
    [ $# -gt 0 ] || die "exec needs a command after --"
    tag=${tag:-$(printf '%04x' $((RANDOM % 65536)))$$}
    children=()
    trap 'cluster_down "$tag"' EXIT
    # Commands run in the background so that a signal interrupts the wait at once (bash
    # defers traps while a foreground child runs).
    trap '[ ${#children[@]} -gt 0 ] && kill "${children[@]}" 2>/dev/null; exit 130' INT TERM
    cluster_up "$tag" "$nodes" "$nics" "$rate" "$build" "$mtu" "$tcp_cc" "$spine"
    targets=${on:-$(seq -s, 0 $((nodes - 1)))}
    status=0
    if [ -n "$parallel" ]; then
      nodes_of=()
      for n in ${targets//,/ }; do
        cluster_run "$tag" "$n" "$@" &
        children+=($!)
        nodes_of+=("$n")
      done
      for i in "${!children[@]}"; do
        wait "${children[$i]}" || {
          s=$?; echo "plexus-cluster: node ${nodes_of[$i]}: command failed ($s)" >&2
          [ $status -ne 0 ] || status=$s
        }
      done
    else
      for n in ${targets//,/ }; do
        cluster_run "$tag" "$n" "$@" &
        children=($!)
        wait "${children[0]}" || { status=$?; echo "plexus-cluster: node $n: command failed ($status)" >&2; break; }
        children=()
      done
    fi
    exit $status ;;
  *) die "unknown command '$cmd' (up, run, nic, cable, down, exec)" ;;
esac
