#!/usr/bin/env bash
# Runs corral-limits' tests on cgroup v2: boots the host's Debian kernel
# under qemu (KVM when available) with only the unified hierarchy
# (cgroup_no_v1=all) and an initramfs holding the test binaries, the tools
# the tests call, and loop.ko. Prints the tests' output; exits non-zero if any
# test binary failed or the VM did not finish.
#
#   crates/corral-limits/tests/qemu-v2.sh            # all test binaries
#   EXTRA_INIT=/path/script.sh crates/corral-limits/tests/qemu-v2.sh
#       (runs the script inside the VM, as root, before the tests)
#
# Needs: qemu-system-x86, linux-image-amd64, busybox-static (scripts/install-deps.sh).
set -euo pipefail

here=$(cd "$(dirname "$0")/../../.." && pwd)
kernel=${KERNEL:-$(ls /boot/vmlinuz-* 2>/dev/null | sort -V | tail -1)}
[ -n "$kernel" ] && [ -r "$kernel" ] || { echo "qemu-v2: no readable kernel in /boot" >&2; exit 1; }
kver=${kernel#/boot/vmlinuz-}
command -v qemu-system-x86_64 >/dev/null || { echo "qemu-v2: qemu-system-x86_64 not installed" >&2; exit 1; }
busybox=$(command -v busybox) || { echo "qemu-v2: busybox not installed" >&2; exit 1; }

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$here/target}
mapfile -t tests < <(cd "$here" && cargo test -p corral-limits --no-run 2>&1 | sed -n 's/^ *Executable .*(\(.*\))$/\1/p')
[ "${#tests[@]}" -gt 0 ] || { echo "qemu-v2: cargo built no test executables" >&2; exit 1; }

work=$(mktemp -d /tmp/corral-qemu-v2.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root"/{bin,dev,proc,sys,tmp,var/tmp,tests}

# A binary and the shared libraries it loads, at their host paths.
copy_with_libs() {
  local bin=$1
  cp --parents -L "$bin" "$root"
  ldd "$bin" 2>/dev/null | grep -o '/[^ ]*' | while read -r lib; do
    [ -e "$root$lib" ] || cp --parents -L "$lib" "$root"
  done
}
for tool in bash dash timeout dd sleep head losetup; do
  copy_with_libs "$(command -v "$tool")"
done
for t in "${tests[@]}"; do
  copy_with_libs "$t"
  cp "$t" "$root/tests/"
done
cp "$busybox" "$root/bin/busybox"
for applet in mount mkdir cat echo insmod poweroff ls sync; do ln -sf busybox "$root/bin/$applet"; done
ln -sf dash "$root/bin/sh" 2>/dev/null || true
[ -e "$root/bin/sh" ] || ln -sf "$(command -v dash)" "$root/bin/sh"
loop_ko=$(find "/usr/lib/modules/$kver" -name 'loop.ko*' | head -1)
[ -n "$loop_ko" ] && cp "$loop_ko" "$root/loop.ko"
if [ -n "${EXTRA_INIT:-}" ]; then cp "$EXTRA_INIT" "$root/extra-init.sh"; fi

cat >"$root/init" <<'EOF'
#!/bin/busybox sh
export PATH=/bin:/usr/bin:/sbin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs dev /dev
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t tmpfs tmp /tmp
mount -t tmpfs vartmp /var/tmp
[ -f /loop.ko ] && insmod /loop.ko
echo "qemu-v2: kernel $(cat /proc/sys/kernel/osrelease), controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
[ -f /extra-init.sh ] && sh /extra-init.sh
for t in /tests/*; do
  echo "qemu-v2: running ${t##*/}"
  "$t" --test-threads=1 --nocapture
  echo "qemu-v2: EXIT ${t##*/} $?"
done
echo "qemu-v2: DONE"
sync
poweroff -f
EOF
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initrd.gz"

accel=()
[ -w /dev/kvm ] && accel=(-enable-kvm -cpu host)
timeout 900 qemu-system-x86_64 "${accel[@]}" -m 1536 -smp 2 -nographic -no-reboot \
  -kernel "$kernel" -initrd "$work/initrd.gz" \
  -append "console=ttyS0 cgroup_no_v1=all rdinit=/init panic=-1 quiet" | tee "$work/console.log" | tr -d '\r'

grep -q 'qemu-v2: DONE' "$work/console.log" || { echo "qemu-v2: the VM did not finish" >&2; exit 1; }
if grep -a 'qemu-v2: EXIT' "$work/console.log" | tr -d '\r' | grep -vq ' 0$'; then
  echo "qemu-v2: some test binaries failed" >&2
  exit 1
fi
echo "qemu-v2: all test binaries passed on cgroup v2"
