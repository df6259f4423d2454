#!/usr/bin/env bash
# Runs corral-limits' test executables on cgroup v2 (unified hierarchy only)
# in a qemu VM booting the host's Debian kernel, for hosts whose own cgroups
# are v1 or hybrid. The same executables as `cargo test -p corral-limits`:
# their live tests use Backend::detect, which finds cgroup2 in the VM.
#
#   scripts/test-cgroup-v2.sh [LIBTEST ARGS...]     e.g. scripts/test-cgroup-v2.sh cpu_limit
#
# Exits 0 only when every test executable passed (and none skipped a test).
# Environment:
#   CORRAL_VM_KERNEL        kernel image (default: newest /boot/vmlinuz-* with modules)
#   CORRAL_VM_ACCEL         auto (default: kvm if it boots, else tcg) | kvm | tcg
#   CORRAL_VM_KVM_PROBE     seconds KVM gets to reach /init before TCG is used (20)
#   CORRAL_VM_TIMEOUT       hard limit for the whole VM run, seconds (900)
#   CORRAL_VM_TEST_TIMEOUT  limit per test executable inside the VM, seconds (300)
#   CORRAL_VM_LOG           console log (default: <cargo target dir>/cgroup2-vm/console.log)
#   CORRAL_VM_EXTRA_INIT    a shell script run (by dash, as root) in the VM before the tests
#   CORRAL_VM_QUIET=1       do not copy the console to stdout while it runs
#   CARGO_TARGET_DIR        honoured as by cargo
# Needs the Debian packages qemu-system-x86, linux-image-amd64, busybox-static
# and cpio (scripts/install-deps.sh). See docs/limits.md, "cgroup v2 tests in a VM".
source "$(dirname "$0")/lib.sh"

me=test-cgroup-v2
say() { echo "$me: $*" >&2; }
die() { say "$*"; exit 1; }
t_start=$(date +%s)

# ---- host requirements ------------------------------------------------------
if [ ! -e /dev/kvm ]; then
  echo "SKIP cgroup v2 tests: /dev/kvm is missing, so no VM can be booted at a usable speed here (the cgroup v1 tests still ran in cargo test)"
  exit 0
fi
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not found: install the Debian package qemu-system-x86"
command -v cpio >/dev/null || die "cpio not found: install the Debian package cpio"
busybox=""
for b in /bin/busybox /usr/bin/busybox "$(command -v busybox || true)"; do
  [ -n "$b" ] && [ -x "$b" ] && { busybox=$b; break; }
done
[ -n "$busybox" ] || die "busybox not found: install the Debian package busybox-static"

if [ -n "${CORRAL_VM_KERNEL:-}" ]; then
  kernel=$CORRAL_VM_KERNEL
else
  kernel=""
  while read -r k; do
    [ -d "/lib/modules/${k#/boot/vmlinuz-}" ] && kernel=$k
  done < <(ls /boot/vmlinuz-* 2>/dev/null | sort -V)
fi
[ -n "$kernel" ] && [ -f "$kernel" ] || die "no kernel with modules in /boot: install the Debian package linux-image-amd64"
[ -r "$kernel" ] || die "cannot read $kernel (run as root)"
kver=${kernel##*/vmlinuz-}
moddir=/lib/modules/$kver

accel=${CORRAL_VM_ACCEL:-auto}
case $accel in auto | kvm | tcg) ;; *) die "CORRAL_VM_ACCEL must be auto, kvm or tcg, not $accel" ;; esac
vm_timeout=${CORRAL_VM_TIMEOUT:-900}
test_timeout=${CORRAL_VM_TEST_TIMEOUT:-300}
kvm_probe=${CORRAL_VM_KVM_PROBE:-20}

# ---- 1. build the test executables ------------------------------------------
say "building corral-limits' test executables (cargo test --no-run)"
json=$(cd "$REPO" && static_cargo test -p corral-limits --no-run --message-format=json) || die "cargo test --no-run failed (messages above)"
mapfile -t exes < <(grep '"reason":"compiler-artifact"' <<<"$json" | grep '"test":true' |
  grep -o '"executable":"[^"]*"' | sed 's/^"executable":"//; s/"$//' | sort -u)
((${#exes[@]})) || die "cargo built no test executables"
target_dir=$(dirname "$(dirname "$(dirname "${exes[0]}")")")
# Kept after the run; the VM writes to a private copy (runs may overlap).
keep_log=${CORRAL_VM_LOG:-$target_dir/cgroup2-vm/console.log}
mkdir -p "$(dirname "$keep_log")"

# ---- 2. the initramfs ---------------------------------------------------------
work=$(mktemp -d /tmp/corral-cgroup2-vm.XXXXXX)
log=$work/console.log
qemu_pid_file=$work/qemu.pid
runner_pid=""
tail_pid=""
stop_vm() {
  # Only the qemu this script started: its pid file, else our timeout(1).
  local p=""
  [ -s "$qemu_pid_file" ] && p=$(cat "$qemu_pid_file")
  if [ -n "$p" ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = qemu-system-x86 ]; then kill "$p" 2>/dev/null || true; fi
  if [ -n "$runner_pid" ] && kill -0 "$runner_pid" 2>/dev/null; then kill "$runner_pid" 2>/dev/null || true; fi
  if [ -n "$runner_pid" ]; then wait "$runner_pid" 2>/dev/null || true; fi
  runner_pid=""
  rm -f "$qemu_pid_file"
}
save_log() {
  [ -f "$log" ] || return 0
  cp "$log" "$keep_log.$$" && mv -f "$keep_log.$$" "$keep_log"
}
cleanup() {
  stop_vm
  save_log || true
  if [ -n "$tail_pid" ]; then kill "$tail_pid" 2>/dev/null || true; wait "$tail_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

root=$work/root
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,root,proc,sys,dev,tmp,var/tmp,run,tests,modules}
chmod 1777 "$root/tmp" "$root/var/tmp"

# A file with the shared libraries it loads (and the loader), at host paths.
copy_with_libs() {
  local bin=$1 dest=$2 lib
  cp -L "$bin" "$root$dest"
  while read -r lib; do
    [ -e "$root$lib" ] || { mkdir -p "$root$(dirname "$lib")" && cp -L "$lib" "$root$lib"; }
  done < <(ldd "$bin" 2>/dev/null | grep -o '/[^ ]*' || true)
}

# busybox for init and the usual applets...
copy_with_libs "$busybox" /bin/busybox
for applet in $("$busybox" --list); do
  [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
done
# ...and the host's own tools where the tests rely on them (found first in
# the VM's PATH): sh is dash as on Debian, the fork bomb needs bash, GNU
# timeout/dd/sleep and util-linux losetup (--find --show).
for tool in bash dash timeout dd sleep losetup; do
  path=$(command -v "$tool") || die "$tool not found on this host"
  case $tool in losetup) dest=/usr/sbin/$tool ;; *) dest=/usr/bin/$tool ;; esac
  copy_with_libs "$path" "$dest"
done
ln -s dash "$root/usr/bin/sh"

# The test executables, without debug info (smaller initramfs, faster boot
# under TCG; panics still name file and line).
names=()
for exe in "${exes[@]}"; do
  base=${exe##*/}
  name=${base%-*}
  names+=("$name")
  copy_with_libs "$exe" "/tests/$name"
  if command -v strip >/dev/null; then strip --strip-debug "$root/tests/$name"; fi
done

# loop.ko (and what it depends on) unless loop is built in.
loop_builtin=no
if grep -q '^CONFIG_BLK_DEV_LOOP=y' "/boot/config-$kver" 2>/dev/null ||
  grep -q '/loop.ko' "$moddir/modules.builtin" 2>/dev/null; then
  loop_builtin=yes
fi
mod_n=0
add_module() {
  local name=$1 path dep
  path=$(find "$moddir/kernel" -name "$name.ko" -o -name "$name.ko.*" | head -1)
  [ -n "$path" ] || die "kernel module $name not found under $moddir (is linux-image-amd64 complete?)"
  for dep in $(modinfo -F depends "$path" 2>/dev/null | tr ',' ' '); do
    compgen -G "$root/modules/*-$dep.ko" >/dev/null || add_module "$dep"
  done
  mod_n=$((mod_n + 1))
  local out
  out=$(printf '%s/modules/%02d-%s.ko' "$root" "$mod_n" "$name")
  case $path in
    *.ko) cp "$path" "$out" ;;
    *.ko.xz) xz -dc "$path" >"$out" ;;
    *.ko.zst) zstd -qdc "$path" >"$out" ;;
    *.ko.gz) gzip -dc "$path" >"$out" ;;
    *) die "cannot decompress $path" ;;
  esac
}
[ "$loop_builtin" = yes ] || add_module loop

echo "root:x:0:0:root:/root:/bin/sh" >"$root/etc/passwd"
echo "root:x:0:" >"$root/etc/group"
cp "$REPO/scripts/vm/init.sh" "$root/init"
chmod 755 "$root/init"
if (($#)); then printf '%s\n' "$@" >"$root/test-args"; else : >"$root/test-args"; fi
echo "$test_timeout" >"$root/test-timeout"
if [ -n "${CORRAL_VM_EXTRA_INIT:-}" ]; then cp "$CORRAL_VM_EXTRA_INIT" "$root/extra-init.sh"; fi
(cd "$root" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc -R 0:0 --quiet) | gzip -1 >"$work/initrd.gz"
say "initramfs: $(du -h "$work/initrd.gz" | cut -f1) (${names[*]}; loop $([ "$loop_builtin" = yes ] && echo built in || echo module))"

t_vm=$(date +%s)

# ---- 3. boot ------------------------------------------------------------------
# Start qemu with one accelerator; sets runner_pid.
start_vm() {
  local acc=$1 accel_args
  case $acc in
    kvm) accel_args=(-accel kvm -cpu host) ;;
    tcg) accel_args=(-accel tcg,thread=multi) ;;
  esac
  : >"$log"
  timeout "$vm_timeout" qemu-system-x86_64 "${accel_args[@]}" -m 1024 -smp 2 \
    -nographic -no-reboot -nic none -pidfile "$qemu_pid_file" \
    -kernel "$kernel" -initrd "$work/initrd.gz" \
    -append "console=ttyS0 panic=-1 quiet cgroup_no_v1=all systemd.unified_cgroup_hierarchy=1" \
    </dev/null >>"$log" 2>&1 &
  runner_pid=$!
}

# Waits up to $2 seconds for $1 in the log while the VM runs; 0 if seen.
wait_for_line() {
  local pattern=$1 limit=$2 t=0
  while ((t < limit)); do
    grep -aq "$pattern" "$log" && return 0
    kill -0 "$runner_pid" 2>/dev/null || { grep -aq "$pattern" "$log"; return; }
    sleep 1
    t=$((t + 1))
  done
  return 1
}

boot() {
  local acc=$1 boot_limit=$2
  say "booting $kernel with $acc (console log: $keep_log)"
  start_vm "$acc"
  wait_for_line 'CORRAL-VM: init started' "$boot_limit"
}

used=""
if [ "$accel" != tcg ] && [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
  # Nested KVM can accept the VM and then hang without a word: /init must
  # speak within $kvm_probe s (a working KVM gets there in a few seconds).
  if boot kvm "$kvm_probe"; then
    used=kvm
  else
    [ "$accel" = kvm ] && { tail -20 "$log" >&2; die "the VM did not boot with KVM (CORRAL_VM_ACCEL=kvm)"; }
    say "KVM did not boot the VM within $kvm_probe s; falling back to TCG"
    stop_vm
  fi
elif [ "$accel" = kvm ]; then
  die "/dev/kvm is not usable (CORRAL_VM_ACCEL=kvm)"
fi
if [ -z "$used" ]; then
  boot tcg 180 || { stop_vm; tail -30 "$log" >&2; die "the VM did not reach /init within 180 s with TCG"; }
  used=tcg
fi
t_boot=$(($(date +%s) - t_vm))

if [ "${CORRAL_VM_QUIET:-0}" != 1 ]; then
  # Without the firmware's terminal resets and the carriage returns.
  tail -n +1 -f --pid="$runner_pid" "$log" | sed -u 's/\r//g; s/\x1bc//g; s/\x1b\[[0-9;?]*[A-Za-z]//g' &
  tail_pid=$!
fi
set +e
wait "$runner_pid"
vm_rc=$?
set -e
runner_pid=""
if [ -n "$tail_pid" ]; then wait "$tail_pid" 2>/dev/null || true; tail_pid=""; fi
wall=$(($(date +%s) - t_start))

# ---- 4. results ---------------------------------------------------------------
clean=$(tr -d '\r' <"$log")
kernel_in=$(grep -ao 'CORRAL-VM-KERNEL: .*' <<<"$clean" | head -1 | cut -d' ' -f2-)
cgroup_in=$(grep -ao 'CORRAL-VM-CGROUP: .*' <<<"$clean" | head -1 | cut -d' ' -f2-)
echo
echo "== cgroup v2 VM summary"
echo "kernel in VM: ${kernel_in:-unknown} (${cgroup_in:-no cgroup line})"
echo "accel: $used; wall time: $((wall / 60))m$((wall % 60))s (build and initramfs $((t_vm - t_start))s, VM $((wall - t_vm + t_start))s of which ${t_boot}s until /init)"
ok=1
if [ "$vm_rc" = 124 ]; then
  echo "the VM was stopped after ${vm_timeout}s (CORRAL_VM_TIMEOUT)"
  ok=0
fi
setup=$(grep -ao 'CORRAL-VM-SETUP-FAIL: .*' <<<"$clean" || true)
[ -z "$setup" ] || { echo "$setup"; ok=0; }
for name in "${names[@]}"; do
  line=$(grep -aoE "CORRAL-VM-RESULT: (PASS|FAIL) $name( .*)?$" <<<"$clean" | tail -1 || true)
  if [ -z "$line" ]; then
    echo "  NONE $name (no result: the VM stopped before it finished)"
    ok=0
  else
    echo "  ${line#CORRAL-VM-RESULT: }"
    [[ $line == "CORRAL-VM-RESULT: PASS "* ]] || ok=0
  fi
done
grep -aq 'CORRAL-VM-DONE' <<<"$clean" || { echo "the VM did not finish (no CORRAL-VM-DONE; qemu exit $vm_rc)"; ok=0; }
save_log
echo "console log: $keep_log"
if [ "$ok" = 1 ]; then
  echo "test-cgroup-v2: all ${#names[@]} test executables passed on cgroup v2"
  exit 0
fi
echo "test-cgroup-v2: FAILED (see the console log)"
exit 1
