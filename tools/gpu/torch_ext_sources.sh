#!/usr/bin/env bash
# Copies what building the torch extension elsewhere needs (tools/gpu/build_torch_ext.sh, on a
# lent GPU machine or in tools/torch2's chroot) into a bundle folder: its sources under
# src/python/plexus_torch, the C API's headers under include/plexus, and the Boost headers it
# includes (the preprocessor lists them; -MG goes past the torch headers this machine may lack).
#   torch_ext_sources.sh CHECKOUT BUNDLE
set -euo pipefail
root=$1 dir=$2
mkdir -p "$dir/src/python/plexus_torch" "$dir/src/shm" "$dir/include/plexus"
cp "$root"/python/plexus_torch/*.cc "$root"/python/plexus_torch/*.h "$dir/src/python/plexus_torch/"
cp "$root/clientlib/include/plexus/plexus.h" "$root/shm/include/plexus/plexus_types.h" "$dir/include/plexus/"
cp "$root/shm/cuda_driver.h" "$dir/src/shm/"
for src in "$root"/python/plexus_torch/*.cc; do
  c++ -std=c++20 -M -MG -MT x -I"$root" -I"$root/clientlib/include" -I"$root/shm/include" "$src" 2>/dev/null |
    tr ' \\' '\n\n' | grep '^/usr/include/boost/' || true
done | sort -u | while read -r header; do
  mkdir -p "$dir/include/$(dirname "${header#/usr/include/}")"
  cp "$header" "$dir/include/${header#/usr/include/}"
done
[ -d "$dir/include/boost" ] || { echo "torch_ext_sources.sh: found no Boost header of the torch extension (is libboost-dev installed?)" >&2; exit 1; }
