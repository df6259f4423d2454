#!/bin/busybox sh
# /init of the cgroup v2 test VM (scripts/test-cgroup-v2.sh builds the initramfs
# around it). Runs as PID 1 under busybox sh: mounts the pseudo filesystems
# and only the cgroup2 hierarchy, enables cpu/memory/pids/io for child
# cgroups, runs every executable in /tests one at a time and prints one
#   CORRAL-VM-RESULT: PASS|FAIL <name> (<details>)
# line per executable, then CORRAL-VM-DONE, and powers the VM off.
# An executable passes when it exits 0 and none of its tests printed a SKIP
# line (everything the tests need is in this VM, so a skip is a failure).
#
# Files the host side provides: /tests/<name> (executables), /modules/*.ko
# (insmod in order), /test-args (extra libtest arguments, one a line),
# /test-timeout (seconds per executable), /extra-init.sh (run first, by dash).

export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/tmp RUST_BACKTRACE=1
echo "CORRAL-VM: init started"

setup_fail() {
  echo "CORRAL-VM-SETUP-FAIL: $*"
  echo "CORRAL-VM-DONE"
  poweroff -f
  sleep 10
}

mount -t proc proc /proc || setup_fail "mount proc"
mount -t sysfs sysfs /sys || setup_fail "mount sysfs"
mount -t devtmpfs devtmpfs /dev || setup_fail "mount devtmpfs"
mount -t tmpfs -o mode=1777 tmpfs /tmp || setup_fail "mount tmpfs on /tmp"
# The io test backs its loop device with a file here. io.max throttles the
# loop device's own queue (bios are charged to the writer's cgroup when dd
# submits them), so a RAM-backed file is fine; what matters is the device.
mount -t tmpfs -o mode=1777 tmpfs /var/tmp || setup_fail "mount tmpfs on /var/tmp"
mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup || setup_fail "mount cgroup2 on /sys/fs/cgroup"
# Kernel messages (the OOM killer's report, for one) must not cut through
# the result lines: keep them in dmesg, shown when an executable fails.
echo 1 >/proc/sys/kernel/printk

for m in /modules/*.ko; do
  [ -e "$m" ] || continue
  insmod "$m" || setup_fail "insmod $m"
done

cg=/sys/fs/cgroup
echo "+cpu +memory +pids +io" >"$cg/cgroup.subtree_control" || setup_fail "enabling +cpu +memory +pids +io in $cg/cgroup.subtree_control (available: $(cat $cg/cgroup.controllers))"
v1=$(grep -c ' cgroup ' /proc/mounts)
echo "CORRAL-VM-KERNEL: $(uname -r)"
echo "CORRAL-VM-CGROUP: cgroup2 on $cg, v1 mounts: $v1, controllers [$(cat $cg/cgroup.controllers)] subtree_control [$(cat $cg/cgroup.subtree_control)]"
echo "CORRAL-VM: cmdline: $(cat /proc/cmdline)"
echo "CORRAL-VM: $(grep -c ^processor /proc/cpuinfo) CPUs, $(grep MemTotal /proc/meminfo | tr -s ' ')"
[ "$v1" = 0 ] || setup_fail "cgroup v1 hierarchies are mounted"
ls /dev/loop-control >/dev/null 2>&1 || echo "CORRAL-VM: warning: no /dev/loop-control: the io test will skip"

if [ -f /extra-init.sh ]; then
  echo "CORRAL-VM: running /extra-init.sh"
  /usr/bin/dash /extra-init.sh
  echo "CORRAL-VM: /extra-init.sh exited $?"
fi

set --
if [ -f /test-args ]; then
  while IFS= read -r a; do set -- "$@" "$a"; done </test-args
fi
limit=$(cat /test-timeout 2>/dev/null || echo 300)

for t in /tests/*; do
  name=${t##*/}
  echo "CORRAL-VM: running $name --test-threads=1 --nocapture $*"
  start=$(date +%s)
  timeout -s KILL "$limit" "$t" --test-threads=1 --nocapture "$@" >/tmp/out 2>&1
  rc=$?
  secs=$(($(date +%s) - start))
  cat /tmp/out
  summary=$(grep 'test result:' /tmp/out | tail -1 | sed -E 's/.*: (ok|FAILED)\. ([0-9]+ passed; [0-9]+ failed; [0-9]+ ignored).*/\2/')
  skips=$(grep -o 'SKIP [^:]*' /tmp/out | tr '\n' ';')
  failed=$(grep -E '^test .* FAILED$' /tmp/out | sed 's/^test //; s/ \.\.\. FAILED$//' | tr '\n' ' ')
  if [ "$rc" = 0 ] && [ -z "$skips" ]; then
    echo "CORRAL-VM-RESULT: PASS $name ($summary; ${secs}s)"
  else
    if [ "$rc" = 137 ] && [ "$secs" -ge "$limit" ]; then
      why="killed after ${limit}s"
    elif [ "$rc" != 0 ]; then
      why="exit $rc${failed:+; failed: $failed}"
    else
      why="skipped: $skips"
    fi
    echo "CORRAL-VM: last kernel messages:"
    dmesg | tail -25
    echo "CORRAL-VM-RESULT: FAIL $name ($why; ${summary:+$summary; }${secs}s)"
  fi
done
echo "CORRAL-VM-DONE"
sync
poweroff -f
sleep 10
