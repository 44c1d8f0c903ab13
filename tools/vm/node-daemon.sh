#!/bin/sh
# A VM node's plexusd (plexus-vm.sh): start, stop or restart it with the cluster's current
# daemon arguments ($state/daemon-args), the build named on the kernel command line
# (plexus.daemons=DIR), on /run/plexus/plexusd.sock, accepting peers on port 7355 as n<i>.
# Run by the node agent at boot and by `plexus-vm.sh daemons`.
state=/run/pxvm
node= daemons=
for word in $(cat /proc/cmdline); do
  case "$word" in
    plexus.node=*) node=${word#plexus.node=} ;;
    plexus.daemons=*) daemons=${word#plexus.daemons=} ;;
  esac
done
me=$state/n$node
socket=/run/plexus/plexusd.sock
[ -n "$daemons" ] || { echo "node $node: no plexus.daemons= on the kernel command line"; exit 2; }

stop() {
  [ -f "$me/plexusd.pid" ] || return 0
  pid=$(cat "$me/plexusd.pid")
  kill "$pid" 2>/dev/null
  i=0
  while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
  kill -9 "$pid" 2>/dev/null
  rm -f "$me/plexusd.pid" "$socket"
}

start() {
  mkdir -p /run/plexus
  args=$(cat "$state/daemon-args" 2>/dev/null)
  # shellcheck disable=SC2086  # daemon-args is a word list by design
  "$daemons/daemon/plexusd" --socket "$socket" --peer-listen 0.0.0.0:7355 --node-name "n$node" \
    --cluster-secret-file "$state/secret" $args >> "$me/plexusd.log" 2>&1 &
  echo $! > "$me/plexusd.pid"
  i=0
  while [ ! -S "$socket" ] && [ "$i" -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
  [ -S "$socket" ] || { echo "node $node: plexusd did not start (see n$node/plexusd.log)"; exit 1; }
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  *) echo "usage: node-daemon.sh start|stop|restart"; exit 2 ;;
esac
