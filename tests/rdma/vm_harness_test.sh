#!/usr/bin/env bash
# The VM harness itself (tools/vm/plexus-vm.sh): 2 nodes x 2 NICs boot with a soft-RoCE
# device per NIC; RDMA writes (perftest's ib_write_bw) cross each rail; a cable pulled
# through qemu's monitor takes the guest NIC's carrier away and gives it back; a killed VM
# is reported as ended to a command waiting on it; and after `down` no VM, namespace or
# state directory is left. With the path of verbs_port_probe (a build with libibverbs), each
# NIC's address maps to its own rxe device and port, and an address with none is refused
# saying why. Exit 77 saying why where qemu or the kernel cannot be had.
# usage: vm_harness_test.sh [VERBS_PORT_PROBE]
set -euo pipefail
probe=${1:-}
here=$(cd "$(dirname "$0")" && pwd)
vm="$here/../../tools/vm/plexus-vm.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (ip netns, tap devices)"; exit 77; }
command -v ib_write_bw >/dev/null || { echo "SKIP: perftest is not installed (tools/install-deps.sh)"; exit 77; }
s=0
"$vm" prepare || s=$?
[ "$s" = 0 ] || exit "$s"  # 77: skipped, saying why
tag="t$$"
trap '"$vm" down --name "$tag"' EXIT
"$vm" up --name "$tag" --nodes 2 --nics 2
fail() { echo "FAIL: $*"; exit 1; }

for r in 0 1; do
  out=$("$vm" run --name "$tag" --node 0 -- ibv_devinfo -d "rxe$r") || fail "node 0 has no rxe$r"
  grep -q "PORT_ACTIVE" <<< "$out" || fail "rxe$r on node 0 is not active: $out"
  # Server on node 1, client on node 0, over rail r (GID index 1: the IPv4 address).
  "$vm" run --name "$tag" --node 1 --timeout 60 -- \
    timeout 50 ib_write_bw -d "rxe$r" -x 1 -s 65536 -n 200 -F --report_gbits > "/tmp/$tag.server" 2>&1 &
  server=$!
  sleep 2
  out=$("$vm" run --name "$tag" --node 0 --timeout 60 -- \
    timeout 50 ib_write_bw -d "rxe$r" -x 1 -s 65536 -n 200 -F --report_gbits "198.18.$r.2") ||
    fail "ib_write_bw over rail $r: $out"
  wait "$server" || fail "ib_write_bw server over rail $r: $(cat "/tmp/$tag.server")"
  rm -f "/tmp/$tag.server"
  gbps=$(awk '$1 == 65536 {print $4}' <<< "$out")
  [ -n "$gbps" ] || fail "no bandwidth line from ib_write_bw over rail $r: $out"
  echo "ok RDMA write over rail $r: $gbps Gb/s (soft-RoCE under emulation)"
done

if [ -n "$probe" ]; then
  out=$("$vm" run --name "$tag" --node 1 -- "$probe" 198.18.0.2 198.18.1.2 198.18.7.7)
  grep -q "^198.18.0.2 rxe0 port 1 gid [0-9]* ::ffff:198.18.0.2 ifindex" <<< "$out" || fail "probe: $out"
  grep -q "^198.18.1.2 rxe1 port 1 gid [0-9]* ::ffff:198.18.1.2 ifindex" <<< "$out" || fail "probe: $out"
  grep -q "^198.18.7.7 none: no verbs device holds 198.18.7.7 as a RoCE v2 GID" <<< "$out" || fail "probe: $out"
  [ "$(grep -c '^netdev ' <<< "$out")" = 2 ] || fail "probe: not 2 NICs with a verbs device: $out"
  echo "ok each NIC's address maps to its own rxe port (find_verbs_port); 198.18.7.7 to none"
fi

"$vm" cable --name "$tag" --node 0 --nic 1 down
carrier=$("$vm" run --name "$tag" --node 0 -- cat /sys/class/net/eth1/carrier)
[ "$carrier" = 0 ] || fail "eth1 still has carrier after the cable pull ($carrier)"
"$vm" cable --name "$tag" --node 0 --nic 1 up
carrier=$("$vm" run --name "$tag" --node 0 -- cat /sys/class/net/eth1/carrier)
[ "$carrier" = 1 ] || fail "eth1 has no carrier after the cable came back ($carrier)"
echo "ok cable pull: carrier 0, then 1"

"$vm" run --name "$tag" --node 1 --timeout 60 -- sleep 50 > /dev/null 2>&1 &
waiter=$!
sleep 1
"$vm" kill --name "$tag" --node 1
s=0
wait "$waiter" || s=$?
[ "$s" = 125 ] || fail "a command on a killed VM ended with $s, not 125 (the VM ended)"
echo "ok a killed VM ends the command waiting on it (125)"

"$vm" down --name "$tag"
trap - EXIT
[ ! -e "/tmp/pxvm-$tag" ] || fail "state directory left behind"
ip netns list | grep -q "pxvm-$tag" && fail "namespace left behind"
pgrep -f "pxvm-$tag" > /dev/null && fail "a qemu process left behind"
echo "ok down leaves nothing"
