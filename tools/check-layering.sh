#!/usr/bin/env bash
# The arrows between rooms, checked: every project include ("dir/file.h") of every source
# file must point at its own room or at one the room may use (docs/architecture.md, "Modules
# and arrows", describes the rooms and this rule).
# It reads the sources' #include lines only, not CMake's links, and also fails on a source
# file in no room. One include path serves the whole tree, so only this check stops a file
# from including a room it must not know.
#
# usage: tools/check-layering.sh [ROOT]   exit 0: clean; 1: a reversed arrow (each printed
# as file:line, what it includes, and what its room may use); 2: a file in no room.
set -euo pipefail
set -f  # room lists hold "*", not a glob
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

# Rooms, most specific prefix first, and the rooms each uses directly. A room may include
# its own headers and those of every room it reaches (CMake's PUBLIC links are transitive).
# "plexus-api" is libplexus's public header (plexus/plexus.h, plexus.hpp); "plexus-types"
# is shm's plexus/plexus_types.h, the numbers both sides share.
rooms=(
  "common/             :"
  "shm/include/        :"
  "shm/                : common/ plexus-types"
  "plexus-types        :"
  "transports/tcp/     : transports/"
  "transports/rdma/    : transports/"
  "transports/         : common/"
  "monitor/            : common/"
  "clientlib/control/  : shm/"
  "clientlib/nccl/     : clientlib/ shm/ plexus-api"
  "python/             : plexus-api"
  "clientlib/include/  : plexus-api"
  "plexus-api          : plexus-types"
  "clientlib/          : clientlib/control/ plexus-api shm/"
  "daemon/algorithms/  :"
  "daemon/gpu/         : shm/"
  "daemon/local/       : shm/"
  "daemon/internode/   : daemon/algorithms/ daemon/local/ transports/"
  "daemon/links/       : transports/ monitor/"
  "daemon/peers/       : transports/tcp/ transports/rdma/"
  "daemon/engine/      : daemon/internode/ daemon/gpu/ daemon/links/ daemon/weights/"
  "daemon/weights/     : daemon/local/"
  "daemon/control/     : daemon/engine/ daemon/peers/ daemon/weights/"
  "daemon/             : daemon/control/"
  "tools/plexusctl/    : clientlib/control/"
  "tools/bench/        : daemon/links/ daemon/gpu/ daemon/local/ transports/tcp/ transports/rdma/"
  "tools/plexus-bench/ : daemon/ clientlib/"
  "tools/plexus-sim/   : daemon/internode/"
  "tests/              : *"
)

declare -A uses=()
prefixes=()
for row in "${rooms[@]}"; do
  name=$(echo "${row%%:*}" | tr -d ' ')
  prefixes+=("$name")
  uses[$name]=$(echo "${row#*:}" | xargs)
done

# The room a path belongs to: the first (longest) prefix it starts with.
room_of() {
  case "$1" in
    plexus/plexus_types.h) echo plexus-types; return ;;
    plexus/*) echo plexus-api; return ;;
  esac
  local p
  for p in "${prefixes[@]}"; do
    [[ $p == */ && $1 == "$p"* ]] && { echo "$p"; return; }
  done
  echo ""
}

# Every room reachable from each room (itself included), computed once.
declare -A reach=()
closure() {
  local out="$1" dep
  for dep in ${uses[$1]}; do
    [ "$dep" = "*" ] && { echo "*"; return; }
    [ -n "${uses[$dep]+set}" ] || { echo "check-layering: room $1 uses unknown room $dep" >&2; exit 2; }
    out+=" $(closure "$dep")"
  done
  echo "$out" | tr ' ' '\n' | sort -u | xargs
}
for p in "${prefixes[@]}"; do reach[$p]=$(closure "$p"); done

# The sources: what git tracks (and what it would add), else every source file below ROOT.
source_files() {
  if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
    git ls-files --cached --others --exclude-standard '*.h' '*.hpp' '*.cc' '*.cu' | sort -u
  else
    find . \( -name 'build*' -o -name .git \) -prune -o -type f \
      \( -name '*.h' -o -name '*.hpp' -o -name '*.cc' -o -name '*.cu' \) -print | sed 's|^\./||' | sort
  fi
}

violations=0
unplaced=0
while IFS= read -r file; do
  from=$(room_of "$file")
  if [ -z "$from" ]; then
    case "$file" in
      # Outside every room: the peer benchmarks link other libraries, not ours.
      tools/bench/mpi_*|tools/bench/gloo_*) continue ;;
    esac
    echo "check-layering: $file is in no room (add its folder to tools/check-layering.sh)"
    unplaced=1
    continue
  fi
  allowed=" ${reach[$from]} "
  [[ $allowed == *" * "* ]] && continue
  while IFS=: read -r line include; do
    to=$(room_of "$include")
    [ -z "$to" ] && continue  # not ours (a system or third-party header)
    [[ $allowed == *" $to "* ]] && continue
    echo "$file:$line: room $from includes $include (room $to); it may use:$allowed"
    violations=$((violations + 1))
  done < <(grep -noE '^[[:space:]]*#[[:space:]]*include[[:space:]]+["<][^">]+[">]' "$file" |
    sed -E 's/^([0-9]+):[^"<]*["<]([^">]+)[">].*/\1:\2/')
done < <(source_files)

if [ "$violations" -gt 0 ]; then
  echo "check-layering: $violations include(s) against the arrows"
  exit 1
fi
[ "$unplaced" -eq 0 ] || exit 2
echo "check-layering: every include follows the arrows"
