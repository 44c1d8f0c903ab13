#!/usr/bin/env bash
# Leak check for plexusd: its RSS after the first ~100 collectives, then after three
# more jobs (allreduce, allgather, alltoall; 2-4 ranks each) that come and go until
# the daemon has completed at least 10,000 collectives. Prints both and the ratio; exits
# 1 if the later RSS exceeds the first by more than 10%.
# Usage: daemon_rss.sh --build-dir DIR
set -euo pipefail
build=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "daemon_rss.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$build" ] || { echo "daemon_rss.sh: --build-dir is required" >&2; exit 2; }
bench=$build/tools/plexus-bench/plexus-bench
ctl=$build/tools/plexusctl/plexusctl
dir=$(mktemp -d /tmp/plexus-rss-XXXXXX)
sock=$dir/plexusd.sock
"$build/daemon/plexusd" --socket "$sock" --log-level warn >"$dir/plexusd.log" 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done

ops() { "$ctl" --socket "$sock" status --json | sed -n 's/.*"ops_completed": \([0-9]*\).*/\1/p' | head -1; }
rss_kib() { awk -v k="$1" '$1 == k":" {print $2}' "/proc/$daemon/status"; }
job() {  # collective ranks iterations
  timeout 300 "$bench" --socket "$sock" --no-embedded --spawn "$2" -C "$1" -b 4K -e 4K \
    -n "$3" -w 0 -c 1 >/dev/null
}

job allreduce 2 45
first_ops=$(ops); first_rss=$(rss_kib VmRSS); first_anon=$(rss_kib RssAnon)
round=0
while [ "$(ops)" -lt 10000 ] && [ $round -lt 50 ]; do
  job allreduce 4 400 & a=$!
  job allgather 3 400 & b=$!
  job alltoall 2 400 & c=$!
  wait $a $b $c
  round=$((round + 1))
done
last_ops=$(ops); last_rss=$(rss_kib VmRSS); last_anon=$(rss_kib RssAnon)
echo "after $first_ops collectives: VmRSS ${first_rss} KiB (anon ${first_anon} KiB)"
echo "after $last_ops collectives from $((round * 3)) more jobs: VmRSS ${last_rss} KiB (anon ${last_anon} KiB)"
awk -v a="$first_rss" -v b="$last_rss" 'BEGIN { printf "ratio %.3f\n", b / a; exit !(b <= a * 1.10) }'
