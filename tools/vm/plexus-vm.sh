#!/usr/bin/env bash
# A cluster of qemu VMs on this machine for what network namespaces cannot give: real RDMA
# verbs (soft-RoCE, rdma_rxe, in Debian's 6.1 kernel). N nodes x M NICs; node n's NIC r is
# eth<r> with address 198.18.r.(n+1)/24 and an rxe device rxe<r> over it. Every rail (NIC
# index) is a bridge inside a private namespace holding the VMs' tap devices, so nothing is
# created in the host's own namespace and test traffic never leaves it. The VMs run in
# software emulation (TCG: slow, but real verbs), boot in about 5 s, and run this machine's
# own binaries and libraries: its root is shared read-only over 9p.
#
#   plexus-vm.sh prepare
#       download Debian's kernel package (apt-get download linux-image-amd64's kernel) and
#       build the initramfs, into $PLEXUS_VM_CACHE (default /var/cache/plexus-vm); the other
#       commands do this when needed
#   plexus-vm.sh exec --nodes N [--nics M] [--mem MIB] [--daemons BUILD_DIR] [--on LIST]
#                     [--parallel] [--timeout S] [--routed] -- CMD...
#       boot the cluster, run CMD on the chosen nodes (default all; one after another, or all
#       at once with --parallel), tear everything down even when interrupted; exit with the
#       first failing status
#   plexus-vm.sh up --name TAG --nodes N [--nics M] [--mem MIB] [--daemons BUILD_DIR] [--routed]
#       --routed: a router joins the rails (198.18.r.254 on each), and every node reaches the
#       other rails' subnets through it from each NIC (a route of higher metric than the
#       direct one): plexusd's backup paths across rails can connect
#   plexus-vm.sh run --name TAG --node I [--timeout S] -- CMD...
#   plexus-vm.sh cable --name TAG --node I --nic R up|down   carrier of node I's NIC R
#                                                            (qemu's set_link: a cable pull)
#   plexus-vm.sh kill --name TAG --node I                    the VM dies at once (SIGKILL)
#   plexus-vm.sh daemons --name TAG                          every node's plexusd restarted
#                                                            with $PLEXUS_VM_DAEMON_ARGS
#   plexus-vm.sh down --name TAG
#
# With --daemons, every node runs BUILD_DIR's plexusd on /run/plexus/plexusd.sock, accepting
# its peers on port 7355 of every NIC, named n<i>, holding the cluster's secret; extra
# arguments from $PLEXUS_VM_DAEMON_ARGS. In CMD (run by sh in the VM, from the caller's
# directory when the VM sees it), $PLEXUS_NODE is the node index, $PLEXUS_SOCKET its plexusd's
# socket, $PLEXUS_CLUSTER_DIR a directory every node and the host see (n<i>/plexusd.log,
# n<i>/agent.log, n<i>/console.log), $PLEXUS_CLUSTER_NODES the node count and
# $PLEXUS_CLUSTER_ADDR_<r>_<n> the address of node n's NIC r. Needs root, qemu-system-x86,
# busybox-static, cpio, kmod and rdma-core (tools/install-deps.sh installs them). Exits 77
# saying why when qemu or the kernel package cannot be had.
#
# The VMs' /tmp and /run are their own (tmpfs): the checkout, the caller's directory, the
# --daemons build directory and the folders in $PLEXUS_VM_SHARE (space-separated) that lie
# under them on this machine are shared into the VMs read-only at the same paths.
set -euo pipefail

usage() { sed -n '2,43p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "plexus-vm: $*" >&2; exit 2; }
skip() { echo "plexus-vm: SKIP: $*" >&2; exit 77; }

here=$(cd "$(dirname "$0")" && pwd)
cache=${PLEXUS_VM_CACHE:-/var/cache/plexus-vm}
state_root=${PLEXUS_VM_STATE:-/tmp}
boot_timeout_s=${PLEXUS_VM_BOOT_TIMEOUT:-90}
ns_name() { echo "pxvm-$1"; }
state_dir() { echo "$state_root/pxvm-$1"; }

# The kernel the VMs boot: what linux-image-amd64 depends on (Debian 12: 6.1).
kernel_package() {
  apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}'
}

# Downloads and unpacks the kernel, builds the initramfs; prints the directory holding
# vmlinuz and initrd.gz. Cached per kernel package and init script.
prepare() {
  command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)"
  [ -x /bin/busybox ] || skip "busybox is not installed (apt-get install busybox-static)"
  command -v cpio >/dev/null || skip "cpio is not installed"
  local pkg
  pkg=$(kernel_package)
  [ -n "$pkg" ] || skip "apt-cache knows no linux-image-amd64 kernel (apt-get update?)"
  local key
  key=$(cat "$here/initramfs-init.sh" /bin/busybox | sha256sum | cut -c1-12)
  local out="$cache/$pkg-$key"
  if [ -f "$out/vmlinuz" ] && [ -f "$out/initrd.gz" ]; then echo "$out"; return; fi
  mkdir -p "$cache"
  local work
  work=$(mktemp -d "$cache/.prepare.XXXXXX")
  # shellcheck disable=SC2064  # expand now: the directory of this call
  trap "rm -rf '$work'" RETURN
  echo "plexus-vm: downloading $pkg and building the VMs' initramfs in $out" >&2
  (cd "$work" && apt-get download "$pkg" >/dev/null 2>&1) ||
    skip "apt-get download $pkg failed (no package registry reachable?)"
  dpkg -x "$work"/*.deb "$work/root"
  local kver
  kver=$(ls "$work/root/lib/modules")
  depmod -b "$work/root" "$kver"
  mkdir -p "$work/initrd"/{bin,proc,sys,dev,newroot,lib/modules}
  cp /bin/busybox "$work/initrd/bin/"
  : > "$work/initrd/modules.list"
  local m f
  for m in crc32_generic virtio_pci virtio_net 9p 9pnet_virtio ib_uverbs rdma_rxe; do
    modprobe -d "$work/root" -S "$kver" --show-depends "$m" | awk '$1 == "insmod" {print $2}'
  done | awk '!seen[$0]++' | while read -r f; do
    case "$f" in
      *.ko) cp "$f" "$work/initrd/lib/modules/" ;;
      *.ko.xz) xz -dc "$f" > "$work/initrd/lib/modules/$(basename "$f" .xz)" ;;
      *) die "unexpected module file $f" ;;
    esac
    basename "${f%.xz}" >> "$work/initrd/modules.list"
  done
  install -m 0755 "$here/initramfs-init.sh" "$work/initrd/init"
  (cd "$work/initrd" && find . | cpio -o -H newc 2>/dev/null | gzip -1 > "$work/initrd.gz")
  mkdir -p "$out"
  cp "$work/root/boot/vmlinuz-$kver" "$out/vmlinuz.tmp"
  mv "$work/initrd.gz" "$out/initrd.gz"
  mv "$out/vmlinuz.tmp" "$out/vmlinuz"
  echo "$out"
}

# Sends one command to node I's qemu monitor.
monitor() {  # tag, node, command
  python3 - "$(state_dir "$1")/n$2/monitor.sock" "$3" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
s.connect(sys.argv[1])
s.recv(4096)  # the banner
s.sendall((sys.argv[2] + "\n").encode())
time.sleep(0.2)
reply = s.recv(65536).decode(errors="replace")
if "Error" in reply or "not found" in reply:
    sys.exit(f"qemu monitor: {reply.strip()}")
PY
}

# The host folders a VM must see that its own /tmp and /run (tmpfs, as sockets cannot live
# on 9p) would hide: the checkout (the node agent and the test scripts run from it), the
# caller's directory, the daemons' build directory and $PLEXUS_VM_SHARE (more folders,
# space-separated), those under /tmp or /run only (the rest the VM sees through the host's
# root), each once. Each is shared read-only, as the root is, and mounted at the same path.
hidden_shares() {  # daemons_dir
  local checkout candidates=() path kept=()
  checkout=$(cd "$here/../.." && pwd)
  candidates=("$checkout" "$PWD" ${1:+"$1"})
  # shellcheck disable=SC2206
  [ -z "${PLEXUS_VM_SHARE:-}" ] || candidates+=(${PLEXUS_VM_SHARE})
  for path in "${candidates[@]}"; do
    [ -d "$path" ] || die "PLEXUS_VM_SHARE: $path is not a directory"
    path=$(cd "$path" && pwd -P)
    case "$path" in /tmp | /run) die "cannot share all of $path into the VMs (their own is a tmpfs)" ;; /tmp/* | /run/*) ;; *) continue ;; esac
    [[ $path =~ ^[A-Za-z0-9_./+-]+$ ]] || die "cannot share $path into the VMs: only letters, digits and _ . / + - (qemu's -virtfs and the kernel command line)"
    kept+=("$path")
  done
  ((${#kept[@]})) || return 0  # printf with no words would still print one empty line
  # Ancestors first; a folder inside one already shared is not shared again.
  printf '%s\n' "${kept[@]}" | sort -u | awk '{ for (i = 1; i <= n; i++) if (index($0 "/", seen[i] "/") == 1) next; seen[++n] = $0; print }'
}

vm_up() {  # tag, nodes, nics, mem, daemons, routed
  local tag=$1 nodes=$2 nics=$3 mem=$4 daemons=$5 routed=$6
  local images dir ns
  images=$(prepare)
  dir=$(state_dir "$tag")
  ns=$(ns_name "$tag")
  [ -e "$dir" ] && die "cluster $tag exists ($dir); plexus-vm.sh down --name $tag"
  mkdir -p "$dir"
  echo "$nodes" > "$dir/nodes"
  echo "$nics" > "$dir/nics"
  (umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$dir/secret")
  echo "${PLEXUS_VM_DAEMON_ARGS:-}" > "$dir/daemon-args"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  local r n
  for ((r = 0; r < nics; r++)); do
    ip -n "$ns" link add "br$r" type bridge
    ip -n "$ns" link set "br$r" up
    if [ "$routed" = 1 ]; then ip -n "$ns" addr add "198.18.$r.254/24" dev "br$r"; fi
  done
  if [ "$routed" = 1 ]; then ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1; fi
  local shares=() share_args=() share_words="" path i=0 launched=()
  mapfile -t shares < <(hidden_shares "$daemons")
  for path in "${shares[@]}"; do
    share_args+=(-virtfs "local,path=$path,mount_tag=share$i,security_model=none,readonly=on,multidevs=remap")
    share_words+=" plexus.share=share$i:$path"
    i=$((i + 1))
  done
  for ((n = 0; n < nodes; n++)); do
    mkdir -p "$dir/n$n/inbox"
    local args=(-accel tcg -m "$mem" -smp 1 -display none -no-reboot -nodefaults
      -serial "file:$dir/n$n/console.log"
      -monitor "unix:$dir/n$n/monitor.sock,server,nowait"
      -pidfile "$dir/n$n/qemu.pid"
      -kernel "$images/vmlinuz" -initrd "$images/initrd.gz"
      -append "console=ttyS0 quiet panic=-1 plexus.agent=$here/node-agent.sh plexus.node=$n plexus.nodes=$nodes plexus.nics=$nics plexus.routed=$routed${daemons:+ plexus.daemons=$daemons}$share_words"
      -virtfs "local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap"
      -virtfs "local,path=$dir,mount_tag=pxvm,security_model=none,multidevs=remap"
      "${share_args[@]}")
    for ((r = 0; r < nics; r++)); do
      local tap="t${n}n${r}"
      ip -n "$ns" tuntap add dev "$tap" mode tap
      ip -n "$ns" link set "$tap" master "br$r" up
      args+=(-netdev "tap,id=nic$r,ifname=$tap,script=no,downscript=no"
        -device "virtio-net-pci,romfile=,netdev=nic$r,mac=52:54:00:98:$(printf %02x "$r"):$(printf %02x "$n")")
    done
    ip netns exec "$ns" qemu-system-x86_64 "${args[@]}" > "$dir/n$n/qemu.log" 2>&1 &
    launched[n]=$!  # ip netns exec execs qemu: this is qemu's pid
    disown  # ended by vm_down or vm_kill: no job notice from this shell
  done
  # Ready when every agent says so; a VM that ends or stays silent is a failure with its
  # console shown.
  # A qemu that exits (before or after writing its pid file) or a kernel panic (the node's
  # init failing) is seen at once, not at the boot timeout. A disowned child that exited
  # may linger as a zombie, which kill -0 would call alive: ps reads its state.
  local deadline=$((SECONDS + boot_timeout_s)) state
  for ((n = 0; n < nodes; n++)); do
    while [ ! -e "$dir/n$n/ready" ]; do
      state=$(ps -o stat= -p "${launched[n]}" 2>/dev/null || true)
      if [ -z "$state" ] || [ "${state:0:1}" = Z ] ||
        grep -qs "Kernel panic\|plexus-vm init:" "$dir/n$n/console.log"; then
        echo "plexus-vm: node $n's VM failed while booting; its console:" >&2
        # The cause first (a panic's stack would push it out of the tail).
        grep -sE "plexus-vm init:|cannot open|No such file|not syncing" "$dir/n$n/console.log" | head -5 >&2 || true
        tail -20 "$dir/n$n/console.log" >&2 2>/dev/null || true
        cat "$dir/n$n/qemu.log" >&2 || true
        return 1
      fi
      if ((SECONDS >= deadline)); then
        echo "plexus-vm: node $n not ready after ${boot_timeout_s} s; its console:" >&2
        tail -20 "$dir/n$n/console.log" >&2 || true
        cat "$dir/n$n/qemu.log" >&2 || true
        return 1
      fi
      sleep 0.2
    done
  done
  echo "plexus-vm: $nodes node(s) x $nics NIC(s) up ($dir)" >&2
}

vm_run() {  # tag, node, timeout_s, cmd...
  local tag=$1 node=$2 timeout_s=$3
  shift 3
  local dir id
  dir=$(state_dir "$tag")
  [ -d "$dir/n$node" ] || die "cluster $tag has no node $node"
  id="job$$.$RANDOM$RANDOM"
  {
    echo "cd '$PWD' 2>/dev/null || cd /"
    printf '%q ' "$@"
    echo
  } > "$dir/n$node/inbox/.$id.tmp"
  mv "$dir/n$node/inbox/.$id.tmp" "$dir/n$node/inbox/$id.sh"
  local deadline=$((SECONDS + timeout_s))
  while [ ! -e "$dir/n$node/$id.rc" ]; do
    if ((SECONDS >= deadline)); then
      cat "$dir/n$node/$id.out" 2>/dev/null || true
      echo "plexus-vm: node $node: no end of the command after ${timeout_s} s" >&2
      return 124
    fi
    if [ ! -e "$dir/n$node/qemu.pid" ] || ! kill -0 "$(cat "$dir/n$node/qemu.pid")" 2>/dev/null; then
      cat "$dir/n$node/$id.out" 2>/dev/null || true
      echo "plexus-vm: node $node: the VM ended before the command did" >&2
      return 125
    fi
    sleep 0.1
  done
  cat "$dir/n$node/$id.out"
  return "$(cat "$dir/n$node/$id.rc")"
}

vm_kill() {  # tag, node
  local pidfile
  pidfile="$(state_dir "$1")/n$2/qemu.pid"
  [ -f "$pidfile" ] && kill -9 "$(cat "$pidfile")" 2>/dev/null || true
  rm -f "$pidfile"
}

vm_down() {  # tag
  local dir ns pidfile
  dir=$(state_dir "$1")
  ns=$(ns_name "$1")
  for pidfile in "$dir"/n*/qemu.pid; do
    [ -f "$pidfile" ] && kill -9 "$(cat "$pidfile")" 2>/dev/null || true
  done
  # qemu started in the background may not have written its pid file yet: by namespace.
  if ip netns pids "$ns" >/dev/null 2>&1; then
    ip netns pids "$ns" | xargs -r kill -9 2>/dev/null || true
    local i
    for i in $(seq 50); do [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break; sleep 0.1; done
    ip netns del "$ns" 2>/dev/null || true
  fi
  rm -rf "$dir"
}

cmd=${1:-}
[ -n "$cmd" ] || { usage; exit 2; }
shift
case "$cmd" in -h | --help | help) usage; exit 0 ;; esac
tag= nodes= nics=1 mem=768 daemons= node= nic= on= parallel=0 routed=0 timeout_s=${PLEXUS_VM_RUN_TIMEOUT:-600}
while [ $# -gt 0 ]; do
  case "$1" in
    --name) tag=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --nics) nics=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    --daemons) daemons=$(cd "$2" && pwd); shift 2 ;;
    --node) node=$2; shift 2 ;;
    --nic) nic=$2; shift 2 ;;
    --on) on=$2; shift 2 ;;
    --parallel) parallel=1; shift ;;
    --routed) routed=1; shift ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) usage; exit 0 ;;
    up|down) [ "$cmd" = cable ] && break; die "unexpected argument $1" ;;
    *) die "unknown argument $1 (--help)" ;;
  esac
done
[ "$(id -u)" = 0 ] || [ "$cmd" = prepare ] || die "needs root (ip netns, tap devices)"
need_tag() { [ -n "$tag" ] || die "$cmd needs --name TAG"; }
need_node() { [[ "$node" =~ ^[0-9]+$ ]] || die "$cmd needs --node I"; }

case "$cmd" in
  prepare) prepare >/dev/null ;;
  up)
    need_tag
    [[ "$nodes" =~ ^[0-9]+$ ]] && ((nodes >= 1 && nodes <= 8)) || die "--nodes: 1 to 8"
    [[ "$nics" =~ ^[0-9]+$ ]] && ((nics >= 1 && nics <= 4)) || die "--nics: 1 to 4"
    prepare >/dev/null  # a skip (77) before anything is created
    [ ! -e "$(state_dir "$tag")" ] || die "cluster $tag exists ($(state_dir "$tag")); plexus-vm.sh down --name $tag"
    # Torn down if it does not come up whole, Ctrl-C included; errexit stays on inside.
    trap 'vm_down "$tag"' EXIT
    trap 'exit 130' INT TERM
    vm_up "$tag" "$nodes" "$nics" "$mem" "$daemons" "$routed"
    trap - EXIT INT TERM
    ;;
  run) need_tag; need_node; [ $# -gt 0 ] || die "run needs -- CMD"; vm_run "$tag" "$node" "$timeout_s" "$@" ;;
  cable)
    need_tag; need_node
    [[ "$nic" =~ ^[0-9]+$ ]] || die "cable needs --nic R"
    case "${1:-}" in
      up) monitor "$tag" "$node" "set_link nic$nic on" ;;
      down) monitor "$tag" "$node" "set_link nic$nic off" ;;
      *) die "cable: up or down" ;;
    esac
    ;;
  kill) need_tag; need_node; vm_kill "$tag" "$node" ;;
  daemons)
    need_tag
    echo "${PLEXUS_VM_DAEMON_ARGS:-}" > "$(state_dir "$tag")/daemon-args"
    for ((n = 0; n < $(cat "$(state_dir "$tag")/nodes"); n++)); do
      vm_run "$tag" "$n" 60 sh "$here/node-daemon.sh" restart
    done
    ;;
  down) need_tag; vm_down "$tag" ;;
  exec)
    [ $# -gt 0 ] || die "exec needs -- CMD"
    [[ "$nodes" =~ ^[0-9]+$ ]] && ((nodes >= 1 && nodes <= 8)) || die "--nodes: 1 to 8"
    [[ "$nics" =~ ^[0-9]+$ ]] && ((nics >= 1 && nics <= 4)) || die "--nics: 1 to 4"
    prepare >/dev/null  # a skip (77) before anything is created
    tag="x$$"
    trap 'vm_down "$tag"' EXIT
    trap 'exit 130' INT TERM
    vm_up "$tag" "$nodes" "$nics" "$mem" "$daemons" "$routed"
    targets=()
    if [ -n "$on" ]; then IFS=, read -r -a targets <<< "$on"; else
      for ((n = 0; n < nodes; n++)); do targets+=("$n"); done
    fi
    status=0
    if ((parallel)); then
      pids=()
      for n in "${targets[@]}"; do
        vm_run "$tag" "$n" "$timeout_s" "$@" > "$(state_dir "$tag")/exec.$n.log" 2>&1 &
        pids+=($!)
      done
      for i in "${!pids[@]}"; do
        s=0
        wait "${pids[$i]}" || s=$?
        sed "s/^/[n${targets[$i]}] /" "$(state_dir "$tag")/exec.${targets[$i]}.log"
        ((status == 0 && s != 0)) && status=$s
      done
    else
      for n in "${targets[@]}"; do
        s=0
        vm_run "$tag" "$n" "$timeout_s" "$@" || s=$?
        ((status == 0 && s != 0)) && status=$s
      done
    fi
    exit "$status"
    ;;
  *) die "unknown command $cmd (--help)" ;;
esac
