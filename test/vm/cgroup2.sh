#!/usr/bin/env bash
# Quotas on cgroup v2, in a virtual machine (not part of `npm test`): `npm run smoke:cgroup2`.
#
# This host's kernel binds the memory, cpu and pids controllers to cgroup v1, so `npm test` tries the
# quotas on v1 only; most current hosts have v2 only. This boots Debian bookworm's own kernel under
# qemu with cgroup v2 as its only hierarchy, this checkout on a second disk (with the node_modules
# and r-library built here: same Debian, same R), and runs the quota and namespace tests there as root
# — from a group that is not the root one, as a systemd service or a container is, so the service must
# move itself into a leaf before it hands controllers to its sessions.
# Cached in $ROCK_VM_DIR (default /var/tmp/rock-ts-vm): the root disk with the kernel, R and Node
# (debootstrap, ~3 min the first time). Exits 0 when every test passed (none skipped), 1 otherwise;
# "SKIP: <reason>" and 0 when no VM can run here (not root, no qemu, no debootstrap).
set -euo pipefail
cd "$(dirname "$0")/../.."

VM="${ROCK_VM_DIR:-/var/tmp/rock-ts-vm}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
TESTS="${ROCK_VM_TESTS:-test/r/quotas.test.ts test/r/session-namespaces.test.ts}"
ACCEL_KIND="${ROCK_VM_ACCEL:-tcg}"
# What the VM runs in /app: the tests, or ROCK_VM_RUN (a shell command, to look into a failure there).
# Under emulation (tcg) every test but one: `1+1` alone takes ~80 ms there, so its 50 ms bound beside
# busy sessions says nothing of cgroups (the fair share of CPU, the test after it, still runs).
if [ "$ACCEL_KIND" = kvm ]; then MOCHA="node node_modules/.bin/mocha"; else MOCHA="node node_modules/.bin/mocha --grep '1\+1 under 50 ms' --invert"; fi
RUN="${ROCK_VM_RUN:-$MOCHA $TESTS}"
WORK="$(mktemp -d)"

say() { printf '%s\n' "cgroup2: $*"; }
skip() { printf 'SKIP: %s\n' "$*"; exit 0; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
cleanup() {
  for m in dev/pts dev sys proc; do umountIfMounted "$VM/rootfs/$m"; done
  rm -rf "$WORK"
}
umountIfMounted() { mountpoint -q "$1" 2>/dev/null && umount -l "$1" || true; }
trap cleanup EXIT

[ "$(id -u)" = 0 ] || skip "needs root (debootstrap, chroot)"
command -v qemu-system-x86_64 >/dev/null || skip "no qemu-system-x86_64 (apt-get install qemu-system-x86)"
command -v debootstrap >/dev/null || skip "no debootstrap (apt-get install debootstrap)"
[ -d node_modules ] && [ -d r-library ] || fail "run npm install first (node_modules and r-library are copied into the VM)"

# ---- the root disk: bookworm, its kernel, R, Node (cached)
if [ ! -f "$VM/root.img" ]; then
  rm -rf "$VM/rootfs" && mkdir -p "$VM"
  say "debootstrap bookworm into $VM/rootfs (log: $VM/build.log)"
  debootstrap --variant=minbase --include=iproute2,procps,ca-certificates bookworm "$VM/rootfs" "$MIRROR" >"$VM/build.log" 2>&1 ||
    { tail -20 "$VM/build.log" >&2; fail "debootstrap"; }
  for m in proc sys dev dev/pts; do mount --bind "/$m" "$VM/rootfs/$m"; done
  say "kernel, R into the root disk"
  chroot "$VM/rootfs" sh -c 'apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends linux-image-amd64 initramfs-tools r-base-core r-cran-jsonlite' >>"$VM/build.log" 2>&1 ||
    { tail -20 "$VM/build.log" >&2; fail "apt-get in the root disk"; }
  for m in dev/pts dev sys proc; do umount -l "$VM/rootfs/$m"; done
  install -m 0755 "$(readlink -f "$(command -v node)")" "$VM/rootfs/usr/local/bin/node"
  # PID 1: mounts the checkout's disk and hands over to its guest script (kept there, so that changing it
  # needs no new root disk).
  printf '#!/bin/sh\nmount -t proc proc /proc\nmkdir -p /app\nmount /dev/vdb /app\nexec /bin/sh /app/test/vm/guest.sh\n' >"$VM/rootfs/rock-vm-init"
  chmod 0755 "$VM/rootfs/rock-vm-init"
  cp "$VM"/rootfs/boot/vmlinuz-* "$VM/vmlinuz"
  cp "$VM"/rootfs/boot/initrd.img-* "$VM/initrd.img"
  mke2fs -q -t ext4 -d "$VM/rootfs" "$VM/root.img.part" 4G && mv "$VM/root.img.part" "$VM/root.img"
  rm -rf "$VM/rootfs"
fi

# ---- the checkout's disk: tracked and untracked files, node_modules and r-library as built here
mkdir -p "$WORK/app"
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -C "$WORK/app" -xf -
cp -a node_modules r-library "$WORK/app/"
printf '%s\n' "$RUN" >"$WORK/app/.vm-run"
mke2fs -q -t ext4 -d "$WORK/app" "$WORK/app.img" 2G
rm -rf "$WORK/app"

say "booting ($ACCEL_KIND, 2 vCPUs, 3 GiB; the root disk is not written: -snapshot)"
# ROCK_VM_ACCEL: tcg (the default: emulated, slower, runs anywhere; on this project's machine, a nested
# KVM hangs the guest kernel at its start) or kvm (without arch-capabilities, which a nested KVM refuses).
status=0
case "$ACCEL_KIND" in
  kvm) ACCEL=(-enable-kvm -cpu host,-arch-capabilities) ;;
  *) ACCEL=(-accel tcg,thread=multi -cpu max) ;;
esac
timeout 1800 qemu-system-x86_64 "${ACCEL[@]}" -smp 2 -m 3072 -nographic -no-reboot -nic none -snapshot \
  -kernel "$VM/vmlinuz" -initrd "$VM/initrd.img" \
  -append "console=ttyS0 root=/dev/vda rw init=/rock-vm-init panic=-1 quiet" \
  -drive "file=$VM/root.img,if=virtio,format=raw" -drive "file=$WORK/app.img,if=virtio,format=raw" \
  </dev/null 2>&1 | tr -d '\r' >"$VM/console.log" || status=$?
# The console's escape sequences may precede the first line.
sed -n 's/.*\(ROCK-VM-BEGIN\)/\1/; /ROCK-VM-BEGIN/,/ROCK-VM-EXIT/p' "$VM/console.log"
[ "$status" = 0 ] || { tail -30 "$VM/console.log" >&2; fail "qemu ended with $status"; }
grep -q 'ROCK-VM-EXIT 0$' "$VM/console.log" || fail "the tests failed in the VM (above; whole console: $VM/console.log)"
! grep -q 'pending' "$VM/console.log" || fail "tests were skipped in the VM (above): cgroup v2 was not used"
say "PASS"
