#!/bin/sh
# PID 1 of a VM node (plexus-vm.sh): sets up the node's NICs (node n's NIC r is eth<r>,
# 198.18.r.(n+1)/24) with a soft-RoCE device on each (rxe<r>), optionally starts a plexusd,
# says it is ready, then runs the commands the host drops into its inbox on the shared state
# directory, each in the background, leaving its output and exit status beside it. It never
# exits (PID 1 must not); the host ends the VM.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
state=/run/pxvm
node= nics=1 nodes=1 daemons= routed=0
for word in $(cat /proc/cmdline); do
  case "$word" in
    plexus.node=*) node=${word#plexus.node=} ;;
    plexus.nodes=*) nodes=${word#plexus.nodes=} ;;
    plexus.nics=*) nics=${word#plexus.nics=} ;;
    plexus.daemons=*) daemons=${word#plexus.daemons=} ;;
    plexus.routed=*) routed=${word#plexus.routed=} ;;
  esac
done
me=$state/n$node
log() { echo "node $node: $*" >> "$me/agent.log"; echo "node $node: $*"; }
halt() {
  log "$*"
  echo o > /proc/sysrq-trigger
  while :; do sleep 3600; done
}
[ -d "$me" ] || halt "no state directory $me"
hostname "n$node"
ip link set lo up
r=0
while [ "$r" -lt "$nics" ]; do
  ip addr add "198.18.$r.$((node + 1))/24" dev "eth$r" || halt "eth$r: no such NIC"
  ip link set "eth$r" up
  rdma link add "rxe$r" type rxe netdev "eth$r" || halt "rdma link add rxe$r failed"
  r=$((r + 1))
done
# Routed (plexus-vm.sh up --routed): each NIC also reaches the other rails through the router
# on its own rail, at a higher metric than their direct routes, so that only traffic bound to
# that NIC (plexusd's backups across rails, soft-RoCE's queue pairs on its device) takes it.
if [ "$routed" = 1 ]; then
  r=0
  while [ "$r" -lt "$nics" ]; do
    s=0
    while [ "$s" -lt "$nics" ]; do
      [ "$s" = "$r" ] || ip route add "198.18.$s.0/24" via "198.18.$r.254" dev "eth$r" metric 100 ||
        halt "eth$r: no route to rail $s"
      s=$((s + 1))
    done
    r=$((r + 1))
  done
fi
mkdir -p /run/plexus "$me/inbox"
socket=
if [ -n "$daemons" ]; then
  socket=/run/plexus/plexusd.sock
  sh "$(dirname "$0")/node-daemon.sh" start || halt "plexusd did not start (see n$node/plexusd.log)"
fi
export PLEXUS_NODE="$node" PLEXUS_CLUSTER_DIR="$state" PLEXUS_CLUSTER_NODES="$nodes"
export PLEXUS_AUTOSTART=0
[ -n "$socket" ] && export PLEXUS_SOCKET="$socket"
r=0
while [ "$r" -lt "$nics" ]; do
  n=0
  while [ "$n" -lt "$nodes" ]; do
    export "PLEXUS_CLUSTER_ADDR_${r}_${n}=198.18.$r.$((n + 1))"
    n=$((n + 1))
  done
  r=$((r + 1))
done
log "ready: $nics NIC(s) with rxe, plexusd ${socket:-not started}"
: > "$me/ready"
# Commands: inbox/<id>.sh, renamed into place by the host once written whole.
while :; do
  for job in "$me"/inbox/*.sh; do
    [ -e "$job" ] || continue
    id=$(basename "$job" .sh)
    mv "$job" "$me/$id.sh"
    (
      sh "$me/$id.sh" > "$me/$id.out" 2>&1
      echo $? > "$me/$id.rc.tmp"
      mv "$me/$id.rc.tmp" "$me/$id.rc"
    ) &
  done
  sleep 0.1
done
