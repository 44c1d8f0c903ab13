#!/usr/bin/env bash
# Builds the Debian packages (plexusd, libplexus, python3-plexus-torch) from a build folder
# configured for the /usr prefix, into BUILD/packages. Usage: tools/package.sh [BUILD]
# (default: build). Install them with: apt-get install ./BUILD/packages/*.deb
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
case "${1:-}" in -h|--help) sed -n '2,4p' "$0"; exit 0 ;; esac
"$root/tools/install-deps.sh"
# The packages lay files out under /usr and /etc (GNUInstallDirs' Debian layout).
cmake -S "$root" -B "$build" -DCMAKE_INSTALL_PREFIX=/usr > /dev/null
targets=(plexusd plexusctl plexus-bench plexus-sim plexus plexus_nccl)
grep -q "^PLEXUS_TORCH_PYTHON" "$build/CMakeCache.txt" && [ -e "$build/python/CMakeFiles/plexus_torch.dir" ] &&
  targets+=(plexus_torch)
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
rm -rf "$build/packages"
(cd "$build" && cpack -G DEB -B "$build/packages" > "$build/packages.log") ||
  { cat "$build/packages.log"; exit 1; }
rm -rf "$build/packages/_CPack_Packages"
ls -l "$build"/packages/*.deb
