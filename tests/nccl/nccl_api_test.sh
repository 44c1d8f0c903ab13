#!/usr/bin/env bash
# The NCCL API test program against Plexus's libnccl.so.2 and a private plexusd: the build
# made against our nccl.h, then (when NVIDIA's NCCL is installed) the same source built
# against NVIDIA's nccl.h and libnccl.so, run with LD_LIBRARY_PATH pointing at ours: a
# program compiled for NVIDIA's library runs on Plexus unchanged.
# With NVIDIA's library given, ours must export every nccl* entry point that it does: a
# program linked against NVIDIA's (PyTorch 2.11 links the device API) names them all, and
# one missing symbol stops it from loading over ours.
# usage: nccl_api_test.sh PLEXUSD NCCL_LIB_DIR OURS [NVIDIA_BUILD NVIDIA_LIBNCCL]
set -euo pipefail
plexusd=$1 libdir=$2 ours=$3 theirs=${4:-} nvidia_lib=${5:-}
source "$(dirname "$0")/../lib/private_plexusd.sh"
start_private_plexusd "$plexusd" plexus-nccl-test

echo "== built against Plexus's nccl.h"
"$ours" 4
if [ -z "$theirs" ]; then
  echo "NVIDIA's NCCL is not installed: the ABI run against its header is skipped"
  exit 0
fi
if [ -n "$nvidia_lib" ]; then
  exports() { nm -D --defined-only "$1" | awk '$NF ~ /^nccl/ {print $NF}' | sort -u; }
  theirs_exports=$(exports "$nvidia_lib")
  [ -n "$theirs_exports" ] || { echo "FAIL found no nccl* export in $nvidia_lib (nm failed?)"; exit 1; }
  missing=$(comm -23 <(echo "$theirs_exports") <(exports "$libdir/libnccl.so.2") | paste -sd ' ' -)
  if [ -n "$missing" ]; then
    echo "FAIL $libdir/libnccl.so.2 lacks entry points that $nvidia_lib exports: $missing"
    echo "(a newer NCCL in the CUDA toolkit added them: ours must export them too, even as"
    echo "calls that refuse saying why, or a program linked against NVIDIA's cannot load ours)"
    exit 1
  fi
  echo "ok every nccl* entry point of $nvidia_lib ($(exports "$nvidia_lib" | wc -l)) is exported by ours"
fi
echo "== built against NVIDIA's nccl.h and libnccl.so, run with LD_LIBRARY_PATH=$libdir"
resolved=$(LD_LIBRARY_PATH=$libdir ldd "$theirs" | awk '/libnccl.so.2/ {print $3}')
case "$resolved" in
  "$libdir"/*) echo "libnccl.so.2 resolves to $resolved" ;;
  *) echo "FAIL: libnccl.so.2 resolves to '$resolved', not into $libdir"; exit 1 ;;
esac
LD_LIBRARY_PATH=$libdir "$theirs" 4
