#!/bin/busybox sh
# /init of the VM nodes' initramfs (built by plexus-vm.sh prepare): loads the Debian
# kernel's modules this machine's kernel lacks in the order modprobe gave (crc32_generic
# before rdma_rxe, or rxe fails to add), mounts the host's root read-only over 9p (so the
# node runs the host's binaries and libraries) with tmpfs for /tmp and /run, mounts the
# cluster's state directory read-write, then each host folder those tmpfs would hide
# (plexus.share=TAG:PATH: a checkout or build under /tmp) read-only at its own path, and
# hands over to the node agent named on the kernel command line (plexus.agent=PATH).
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
fail() {
  echo "plexus-vm init: $*"
  echo o > /proc/sysrq-trigger  # power off: the host sees the VM end, not a hang
  sleep 10
}
for m in $(cat /modules.list); do insmod "/lib/modules/$m" || fail "insmod $m failed"; done
agent= state= shares=
for word in $(cat /proc/cmdline); do
  case "$word" in
    plexus.agent=*) agent=${word#plexus.agent=} ;;
    plexus.share=*) shares="$shares ${word#plexus.share=}" ;;
  esac
done
[ -n "$agent" ] || fail "no plexus.agent= on the kernel command line"
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 host /newroot || fail "mount of the host's root failed"
mount -t tmpfs tmp /newroot/tmp
mount -t tmpfs run /newroot/run
mount -t devtmpfs dev /newroot/dev
mount -t proc proc /newroot/proc
mount -t sysfs sys /newroot/sys
mkdir -p /newroot/run/pxvm
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 pxvm /newroot/run/pxvm || fail "mount of the state directory failed"
for share in $shares; do
  tag=${share%%:*} path=${share#*:}
  mkdir -p "/newroot$path"
  mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 "$tag" "/newroot$path" || fail "mount of $path failed"
done
exec switch_root /newroot /bin/sh "$agent"
