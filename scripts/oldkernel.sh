#!/bin/bash
# oldkernel.sh SCRIPT BIN...: boots Debian's linux-image-6.1 (BTF on; task->__state; the
# pre-6.2 atomic mm->rss_stat layout) under qemu with software emulation (nested KVM stalls
# on these VMs; TCG boots in ~6 s), in an initramfs holding busybox, the given binaries
# and their shared libraries. SCRIPT runs as /run.sh after proc, sys, dev, tracefs and
# bpffs are mounted; what it prints between "=== kernel" and "=== done" comes back on
# stdout. Adapted from the team's shared/tools/oldkernel, kept here so the test suite is
# self-contained. The first call installs qemu and fetches the kernel package
# (cached in $OLDK, default /var/tmp/kernstat-oldkernel).
set -euo pipefail
w=${OLDK:-/var/tmp/kernstat-oldkernel}
mkdir -p "$w"
if ! command -v qemu-system-x86_64 >/dev/null || [ ! -x /bin/busybox ] || ! command -v cpio >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    qemu-system-x86 busybox-static cpio >/dev/null
fi
if ! ls "$w"/root/boot/vmlinuz-* >/dev/null 2>&1; then
  find_pkg() { apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' | awk '{print $1}' | sort -V | tail -1; }
  pkg=$(find_pkg)
  [ -n "$pkg" ] || { apt-get update -qq; pkg=$(find_pkg); }
  [ -n "$pkg" ] || { echo "oldkernel: no linux-image-6.1 package in the apt sources" >&2; exit 1; }
  (cd "$w" && apt-get download "$pkg" >/dev/null 2>&1 && dpkg-deb -x "$pkg"_*.deb root && rm -f "$pkg"_*.deb)
fi
script=$1
shift
r=$(mktemp -d)
trap 'rm -rf "$r"' EXIT
mkdir -p "$r"/{bin,sbin,proc,sys,dev,tmp,lib,lib64,usr/lib,etc,run}
cp /bin/busybox "$r/bin/"
for a in sh mount ls cat echo poweroff sleep mkdir uname grep head awk kill tail ip insmod dd tr losetup wc; do ln -s busybox "$r/bin/$a"; done
for b in "$@"; do
  cp "$b" "$r/bin/"
  for l in $(ldd "$b" | grep -o '/[^ ]*'); do mkdir -p "$r$(dirname "$l")"; cp -L "$l" "$r$l"; done
done
# The RAM disk driver (a block device for I/O tests, e.g. `insmod /brd.ko rd_nr=1`), the
# loop driver (request-based, so the block_rq_* tracepoints fire for it, which they do
# not for brd), and netem (delay and loss, with the host's `tc` given as a binary).
for m in drivers/block/brd drivers/block/loop net/sched/sch_netem; do
  cp "$(ls "$w"/root/lib/modules/*/kernel/$m.ko)" "$r/$(basename $m).ko"
done
cp "$script" "$r/run.sh"
chmod +x "$r/run.sh"
cat >"$r/init" <<'I'
#!/bin/sh
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null; mount -t bpf bpf /sys/fs/bpf 2>/dev/null
echo "=== kernel $(uname -r)"; /run.sh; echo "=== done"; poweroff -f
I
chmod +x "$r/init"
(cd "$r" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$r.cpio.gz"
trap 'rm -rf "$r" "$r.cpio.gz"' EXIT
timeout 600 qemu-system-x86_64 -accel tcg -m 2048 -smp 2 -kernel "$(ls "$w"/root/boot/vmlinuz-*)" \
  -initrd "$r.cpio.gz" -append "console=ttyS0 panic=-1 edd=off quiet" -serial stdio -display none \
  -no-reboot 2>/dev/null | tr -d '\r' | sed -n '/=== kernel/,/=== done/p'
