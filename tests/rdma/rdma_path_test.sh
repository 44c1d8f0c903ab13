#!/usr/bin/env bash
# The RDMA path (transports/rdma/rdma_path.h) between two soft-RoCE VMs, with
# rdma_path_probe on both: 400 frames of random sizes (the receive ring wraps, credit comes
# back) and 30 of the largest (4 MiB) arrive exact; 40 of up to 512 KiB sent in place from an
# announced mapping (no copy), replaced halfway at the same address, arrive exact and every
# large payload went in place (a registration kept from the old mapping would send its
# stale pages); a cable pulled under a stream of frames
# fails the sender's path at once, naming the port's error event; the peer VM killed under a
# stream is found by the path's silence measure (network_silence_ms, what the reliable
# channel's path timeout reads) within 10 s: soft-RoCE in 6.1 does not time out writes to a
# peer that is gone. Exit 77 saying why where the VMs cannot run.
# usage: rdma_path_test.sh RDMA_PATH_PROBE
set -euo pipefail
probe=$1
here=$(cd "$(dirname "$0")" && pwd)
vm="$here/../../tools/vm/plexus-vm.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (ip netns, tap devices)"; exit 77; }
s=0
"$vm" prepare || s=$?
[ "$s" = 0 ] || exit "$s"
tag="p$$"
trap '"$vm" down --name "$tag"' EXIT
"$vm" up --name "$tag" --nodes 2
fail() { echo "FAIL: $*"; exit 1; }

# Each probe has 100 s for the connection and 100 s from it (PROBE_DEADLINE_S), so that it
# ends first, saying where it was, within the command's 240 s.
exchange() {  # port frames max_payload [env for the client...]
  "$vm" run --name "$tag" --node 1 --timeout 240 -- env PROBE_DEADLINE_S=100 "$probe" server "$1" "$2" \
    > "/tmp/$tag.server" 2>&1 &
  local server=$!
  local out
  out=$("$vm" run --name "$tag" --node 0 --timeout 240 -- env PROBE_DEADLINE_S=100 "${@:4}" \
    "$probe" client 198.18.0.2 "$1" "$2" "$3" 2>&1) ||
    fail "client: $out; server: $(wait "$server"; cat "/tmp/$tag.server")"
  wait "$server" || fail "server: $(cat "/tmp/$tag.server")"
  grep -q ", 0 bad" "/tmp/$tag.server" || fail "server: $(cat "/tmp/$tag.server")"
  echo "ok $out"
}
# Waits (at most 30 s) until the client's first frame is through: the stream is under way.
# Returns 1 at once when the client ended before that.
streaming() {  # marker file
  for _ in $(seq 300); do
    [ -e "$1" ] && return 0
    kill -0 "$client" 2>/dev/null || { [ -e "$1" ] && return 0; return 1; }
    sleep 0.1
  done
  return 1
}

exchange 7400 400 65536
exchange 7401 30 4194304
exchange 7404 40 524288 PROBE_IN_PLACE=1

# A stream of frames from node 0 to node 1 on PORT, under way when this returns: $server and
# $client are the two commands' pids. Each probe has 60 s from the connection: more than the
# wait for the first frame (30 s) and the fault's bound after it, so that neither side's own
# deadline ends the stream before the fault does (its close would reach the other side as a
# fault this test did not make).
start_stream() {  # port
  "$vm" run --name "$tag" --node 1 --timeout 150 -- env PROBE_DEADLINE_S=60 "$probe" server "$1" 3000 \
    > "/tmp/$tag.server" 2>&1 &
  server=$!
  "$vm" run --name "$tag" --node 0 --timeout 150 -- env PROBE_DEADLINE_S=60 \
    PROBE_READY_FILE="/run/pxvm/streaming.$1" "$probe" client 198.18.0.2 "$1" 3000 65536 \
    > "/tmp/$tag.client" 2>&1 &
  client=$!
  streaming "/tmp/pxvm-$tag/streaming.$1" ||
    fail "the client never started streaming: $(cat "/tmp/$tag.client"); server: $(cat "/tmp/$tag.server")"
}

# After `what` was done to the stream at time `since`: the client's path must have failed
# within `bound` seconds, naming one of `reasons`. The probe says when it failed, in seconds
# since it started (before `since`): that bounds the time from `since` too, and holds when the
# host hears of the command's end late (a VM starved of CPU by software emulation).
expect_client_failure() {  # what since bound reasons
  local s=0 took out probe_s
  wait "$client" || s=$?
  took=$((SECONDS - $2))
  out=$(cat "/tmp/$tag.client")
  probe_s=$(grep -oE 'after [0-9]+ frames sent, [0-9]+' <<< "$out" | head -1 | grep -oE '[0-9]+$' || true)
  if [ -n "$probe_s" ] && ((probe_s + 1 < took)); then took=$((probe_s + 1)); fi
  [ "$s" != 0 ] || fail "the client finished although $1: $out"
  grep -Eq "$4" <<< "$out" || fail "the client's path did not say why after $1: $out"
  (($took <= $3)) || fail "the client's path failed only $took s after $1: $out"
  echo "ok $1 under load: the path failed within ${took} s: $(grep -o 'rdma_path_probe: .*' <<< "$out" | head -c 300)"
}

# A cable pull under load: the sender's path fails at once, naming the port's error event or
# its flushed work requests. (Not the peer's close: nothing reaches node 0 while its cable is
# out.)
start_stream 7402
"$vm" cable --name "$tag" --node 0 --nic 0 down
expect_client_failure "its cable was pulled" "$SECONDS" 20 "work completion failed|port went down"
"$vm" cable --name "$tag" --node 0 --nic 0 up
# The next setup needs the port back: wait for it to be active again (at most 30 s).
"$vm" run --name "$tag" --node 0 --timeout 40 -- sh -c \
  'for i in $(seq 300); do ibv_devinfo -d rxe0 | grep -q PORT_ACTIVE && exit 0; sleep 0.1; done; exit 1' ||
  fail "rxe0 on node 0 did not come back after the cable"
# The server hears of the client's close once the cable is back (or ends at its deadline).
wait "$server" || true

# The peer VM killed under load: no port event here, no FIN on the socket, and rxe's writes
# to it never time out: the path reports the silence.
start_stream 7403
sleep 1
"$vm" kill --name "$tag" --node 1
expect_client_failure "its peer was killed" "$SECONDS" 10 "work completion failed|the peer silent for"
rm -f "/tmp/$tag.server" "/tmp/$tag.client"
