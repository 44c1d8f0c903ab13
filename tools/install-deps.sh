#!/usr/bin/env bash
# Installs the Debian 12 packages Plexus builds, tests and benchmarks with. Idempotent:
# only missing packages are installed. Needs root (or sudo) when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config clang clang-format dpkg-dev systemd
  capnproto libcapnp-dev libuv1-dev libsystemd-dev libtomlplusplus-dev libboost-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev libcli11-dev libspdlog-dev nlohmann-json3-dev libssl-dev
  openmpi-bin libopenmpi-dev libgloo-dev iproute2 nftables iputils-ping libclang-rt-14-dev
  prometheus python3-torch libtorch-dev python3-dev pybind11-dev
  libibverbs-dev rdma-core ibverbs-utils perftest qemu-system-x86 busybox-static cpio kmod patchelf
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
