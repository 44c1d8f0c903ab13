#!/usr/bin/env bash
# The Debian packages: built from this build (tools/package.sh), each holding what it must
# (dpkg -c), their dependencies resolvable by apt on this Debian 12, and installed into a
# fresh root (dpkg --root, maintainer scripts outside a chroot: DPKG_ROOT set, so they
# leave this machine's systemd alone) a working plexusd, plexusctl and plexus-bench, a
# program built against the root's libplexus through pkg-config, and import plexus_torch.
# Exit 77 (ctest SKIP) with the reason where dpkg-deb or dpkg-shlibdeps is missing.
set -uo pipefail
repo=$1
build=$2
for tool in dpkg-deb dpkg-shlibdeps cpack; do
  command -v $tool > /dev/null || { echo "SKIP: $tool is not installed (Debian dpkg-dev)"; exit 77; }
done
grep -q "^CMAKE_INSTALL_PREFIX:PATH=/usr$" "$build/CMakeCache.txt" ||
  { echo "SKIP: $build is configured for another prefix than /usr (tools/package.sh sets it)"; exit 77; }
fail() { echo "FAIL: $*"; [ -f "$work/plexusd.log" ] && tail -20 "$work/plexusd.log"; exit 1; }
work=$(mktemp -d /tmp/plexus-package-test.XXXXXX)
daemon_pid=
cleanup() {
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2> /dev/null && wait "$daemon_pid" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT

echo "== packages"
(cd "$build" && cpack -G DEB -B "$work/packages" > "$work/cpack.log" 2>&1) ||
  { cat "$work/cpack.log"; fail "cpack"; }
deb() { ls "$work"/packages/"$1"_*.deb 2> /dev/null | head -1; }
for p in plexusd libplexus; do [ -n "$(deb $p)" ] || fail "no $p package: $(ls "$work/packages")"; done
python_deb=$(deb python3-plexus-torch)
ls -l "$work"/packages/*.deb

holds() {  # package, path...
  local package=$1; shift
  local listing
  listing=$(dpkg -c "$(deb "$package")" | awk '{print $6}')
  for path in "$@"; do
    grep -qx "\.$path" <<< "$listing" || fail "$package lacks $path; it holds:
$listing"
  done
  echo "$package holds $(wc -l <<< "$listing") entries, among them $*"
}
holds plexusd /usr/sbin/plexusd /usr/bin/plexusctl /usr/bin/plexus-bench \
  /usr/lib/systemd/system/plexusd.service /etc/plexus/plexusd.toml /usr/share/doc/plexusd/README.md
holds libplexus /usr/include/plexus/plexus.h /usr/include/plexus/plexus_types.h \
  /usr/include/plexus/nccl/nccl.h /usr/lib/x86_64-linux-gnu/pkgconfig/plexus.pc \
  /usr/lib/x86_64-linux-gnu/libplexus.so.0 /usr/lib/x86_64-linux-gnu/plexus/libnccl.so.2
[ -n "$python_deb" ] && holds python3-plexus-torch \
  "/usr/lib/python3/dist-packages/$(cd "$build/python" && ls plexus_torch*.so)"
dpkg-deb -I "$(deb plexusd)" conffiles | grep -qx /etc/plexus/plexusd.toml ||
  fail "plexusd's config is not a conffile"
depends=$(dpkg-deb -f "$(deb plexusd)" Depends)
echo "plexusd Depends: $depends"
for lib in libsystemd0 libuv1 libcapnp libtomlplusplus3; do
  grep -q "$lib" <<< "$depends" || fail "plexusd does not depend on $lib"
done

echo "== apt resolves their dependencies on this system"
sim=$(apt-get install --simulate "$work"/packages/*.deb 2>&1) ||
  fail "apt-get install --simulate: $sim"
grep -E "^Inst (plexusd|libplexus)" <<< "$sim" || fail "apt would not install them: $sim"

echo "== installed into a fresh root"
rootdir=$work/root
mkdir -p "$rootdir/var/lib/dpkg/info" "$rootdir/var/lib/dpkg/updates" "$rootdir/var/lib/dpkg/triggers"
touch "$rootdir/var/lib/dpkg/status"
# Outside a chroot (the fresh root has no shell): the scripts see DPKG_ROOT.
dpkg --root="$rootdir" --force-depends --force-script-chrootless --log=/dev/null \
  -i "$work"/packages/*.deb > "$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg --root -i"; }
dpkg --root="$rootdir" -l | grep -E "^ii +(plexusd|libplexus|python3-plexus-torch) " ||
  fail "dpkg --root does not list them installed"
if command -v systemd-analyze > /dev/null; then
  # Against this machine's units, with ExecStart pointing into the root.
  sed "s|/usr/sbin/plexusd|$rootdir/usr/sbin/plexusd|" "$rootdir/usr/lib/systemd/system/plexusd.service" \
    > "$work/plexusd.service"
  systemd-analyze verify "$work/plexusd.service" || fail "systemd-analyze verify plexusd.service"
  echo "systemd-analyze verify: the unit is well-formed"
fi
help=$("$rootdir/usr/sbin/plexusd" --help) || fail "plexusd --help"
grep -q -- "--peer-listen" <<< "$help" || fail "plexusd --help does not list --peer-listen"
socket=$work/plexusd.sock
# The packaged config as the unit gives it; its events file moved to this test's folder.
"$rootdir/usr/sbin/plexusd" --config "$rootdir/etc/plexus/plexusd.toml" --socket "$socket" \
  --events-file "$work/events.jsonl" > "$work/plexusd.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 100); do [ -S "$socket" ] && break; sleep 0.1; done
[ -S "$socket" ] || fail "the installed plexusd did not listen on $socket"
"$rootdir/usr/bin/plexusctl" --socket "$socket" status || fail "the installed plexusctl status"
# The settings in use are the packaged file's; a reload of it changes nothing.
shown=$("$rootdir/usr/bin/plexusctl" --socket "$socket" config) || fail "plexusctl config"
grep -qx 'events-file = "'"$work"'/events.jsonl"' <<< "$shown" ||
  fail "plexusctl config does not show the events file in use: $shown"
reload=$("$rootdir/usr/bin/plexusctl" --socket "$socket" config reload) || fail "plexusctl config reload"
grep -q "nothing changed" <<< "$reload" || fail "a reload of the unchanged packaged config: $reload"
"$rootdir/usr/bin/plexus-bench" --socket "$socket" --no-embedded -C allreduce -b 1M -e 1M \
  -n 3 -w 1 -c 2 --spawn 2 --timeout-s 60 > "$work/bench.log" 2>&1 ||
  { cat "$work/bench.log"; fail "the installed plexus-bench against the installed plexusd"; }
tail -3 "$work/bench.log"

echo "== a program built against the root's libplexus (pkg-config plexus)"
cat > "$work/hello.c" <<'EOF'
#include <plexus/plexus.h>
#include <stdio.h>
int main(void) {
  plexus_unique_id_t id;
  plexus_comm_t comm;
  float* x = NULL;
  if (plexus_alloc((void**)&x, 4 * sizeof(float)) != PLEXUS_SUCCESS) {
    fprintf(stderr, "hello: %s\n", plexus_get_last_error());
    return 1;
  }
  for (int i = 0; i < 4; ++i) x[i] = (float)(i + 1);
  if (plexus_get_unique_id(&id) != PLEXUS_SUCCESS ||
      plexus_comm_init_rank(&comm, 1, id, 0) != PLEXUS_SUCCESS ||
      plexus_allreduce(x, x, 4, PLEXUS_FLOAT32, PLEXUS_SUM, comm, NULL) != PLEXUS_SUCCESS) {
    fprintf(stderr, "hello: %s\n", plexus_get_last_error());
    return 1;
  }
  plexus_comm_destroy(comm);
  printf("hello: allreduce of one rank gave %g %g %g %g\n", x[0], x[1], x[2], x[3]);
  return x[3] == 4 ? 0 : 1;
}
EOF
flags=$(PKG_CONFIG_SYSROOT_DIR=$rootdir PKG_CONFIG_LIBDIR=$rootdir/usr/lib/x86_64-linux-gnu/pkgconfig \
  pkg-config --cflags --libs plexus) || fail "pkg-config plexus in the root"
echo "pkg-config: $flags"
# shellcheck disable=SC2086
cc -o "$work/hello" "$work/hello.c" $flags || fail "building against the root's libplexus"
PLEXUS_SOCKET=$socket PLEXUS_AUTOSTART=0 LD_LIBRARY_PATH=$rootdir/usr/lib/x86_64-linux-gnu \
  "$work/hello" || fail "the program linked to the root's libplexus"
libs=$(LD_LIBRARY_PATH=$rootdir/usr/lib/x86_64-linux-gnu ldd "$work/hello")
grep -q "$rootdir/usr/lib/x86_64-linux-gnu/libplexus.so.0" <<< "$libs" ||
  fail "hello did not load the root's libplexus: $libs"

if [ -n "$python_deb" ]; then
  echo "== import plexus_torch from the root"
  PYTHONPATH=$rootdir/usr/lib/python3/dist-packages /usr/bin/python3 -c \
    "import torch.distributed as dist, plexus_torch; print('plexus_torch from', plexus_torch.__file__)" ||
    fail "import plexus_torch"
fi
echo "PASS: the packages build, hold what they must, resolve with apt and work from a fresh root"
