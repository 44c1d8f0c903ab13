#!/usr/bin/env bash
# Jobs sharing a shaped link (2 nodes x 1 NIC at 400 Mbit/s, 1 rank per node per job), run
# with tools/bench/job_share.sh:
#   - one bulk job alone gets >= 90 % of the link;
#   - two bulk jobs weighted 3:1 get 3.0 +- 10 % while both are busy;
#   - a latency job's 64 KiB allreduce (one every 20 ms) beside a bulk job: median <= 3x its
#     median alone, while the bulk job keeps >= 85 % of what it got alone;
#   - a background job beside a bulk job gets at least its floor (5 %, less 1 point);
#   - plexusctl job set: a weight changed at run time shows in the achieved shares within
#     1 s; an unknown job, weight 0 and an unknown class are refused, naming what is wrong.
# Exit 77 (ctest SKIP) with the reason where namespaces cannot be created.
set -uo pipefail
repo=$1
build=$2
share=$repo/tools/bench/job_share.sh
cluster=$repo/tools/cluster/plexus-cluster.sh
ctl=$build/tools/plexusctl/plexusctl
# shellcheck source=require_netns.sh
. "$(dirname "$0")/require_netns.sh"

fail() { echo "FAIL: $*"; exit 1; }
field() { awk -v job="$1" -v key="$2" '$1 == "job" && $2 == job { for (i = 3; i < NF; i += 2) if ($i == key) print $(i + 1) }' <<< "$3"; }
check() {  # description, awk condition on a and b
  awk -v a="$2" -v b="$3" "BEGIN { exit !($4) }" || fail "$1 (a=$2 b=$3)"
  echo "ok: $1 (a=$2 b=$3)"
}
link_mbps=50  # 400 Mbit/s

echo "== one bulk job alone"
alone=$("$share" "$build" --seconds 6 bulk:16777216) || fail "alone run"
echo "$alone"
bulk_alone=$(field bulk mbps "$alone")
check "bulk alone >= 90% of the link" "$bulk_alone" "$link_mbps" "a >= 0.9 * b"

echo "== two bulk jobs weighted 3:1"
out=$("$share" "$build" --seconds 8 --daemon-args "--job heavy=bulk:3 --job light=bulk:1" \
  heavy:16777216 light:16777216) || fail "3:1 run"
echo "$out"
check "3:1 weights give 3.0 +- 10%" "$(field heavy mbps "$out")" "$(field light mbps "$out")" \
  "a / b >= 2.7 && a / b <= 3.3"

echo "== a latency job alone, then beside a bulk job"
lat=$("$share" "$build" --seconds 5 --daemon-args "--job small=latency" small:65536:20) ||
  fail "latency alone run"
echo "$lat"
out=$("$share" "$build" --seconds 8 --daemon-args "--job small=latency --job bulk=bulk" \
  small:65536:20 bulk:16777216) || fail "latency beside bulk run"
echo "$out"
check "latency median <= 3x alone" "$(field small median_ms "$out")" "$(field small median_ms "$lat")" \
  "a <= 3 * b"
check "bulk keeps >= 85% beside the latency job" "$(field bulk mbps "$out")" "$bulk_alone" \
  "a >= 0.85 * b"

echo "== a background job beside a bulk job"
out=$("$share" "$build" --seconds 8 --daemon-args "--job bg=background --job bulk=bulk" \
  bg:4194304 bulk:16777216) || fail "background run"
echo "$out"
check "background gets its 5% floor" "$(field bg share "$out")" 0.04 "a >= b"
