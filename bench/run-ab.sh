#!/usr/bin/env bash
# `corral run T -- /bin/true` of two corral builds, interleaved: the mean per
# run of N runs, per variant and round (the shell's own fork/exec included,
# the same for every variant). Variants: OLD with its default profile, NEW
# with net = "private" and NEW with net = "host".
#
# Usage: bench/run-ab.sh OLD_CORRAL NEW_CORRAL [N] [ROUNDS] [TENANT]   (as root)
# Each variant gets its own state and config dir under a temp dir and its own
# cgroup parent (corral/ab-<variant>); all removed at the end (trap on EXIT).
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
OLD=${1:?old corral binary}; NEW=${2:?new corral binary}
N=${3:-400}; R=${4:-3}; T=${5:-corral-t1}
work=$(mktemp -d /tmp/corral-run-ab.XXXXXX)
declare -A BIN=([old]=$OLD [newpriv]=$NEW [newhost]=$NEW)
declare -A NET=([old]="" [newpriv]="private" [newhost]="host")
run() { local v=$1; shift; CORRAL_STATE_DIR=$work/$v/state CORRAL_CONFIG_DIR=$work/$v/config \
  CORRAL_CGROUP_PARENT=corral/ab-$v "${BIN[$v]}" "$@"; }
cleanup() {
  for v in old newpriv newhost; do run "$v" down "$T" >/dev/null 2>&1 || true; done
  for v in old newpriv newhost; do
    for c in /sys/fs/cgroup/*/corral/ab-$v /sys/fs/cgroup/corral/ab-$v; do
      [ -d "$c" ] && rmdir "$c" 2>/dev/null || true
    done
  done
  rm -rf "$work"
}
trap cleanup EXIT
for v in old newpriv newhost; do
  mkdir -p "$work/$v/state" "$work/$v/config"
  if [ -n "${NET[$v]}" ]; then
    "${BIN[$v]}" profile default | sed "s/^net = .*/net = \"${NET[$v]}\"/" > "$work/$v/config/profile.toml"
  fi
  run "$v" up "$T" >/dev/null
done
for r in $(seq "$R"); do
  for v in old newpriv newhost; do
    s=$(date +%s%N)
    for _ in $(seq "$N"); do run "$v" run "$T" -- /bin/true; done
    e=$(date +%s%N)
    echo "$v round $r: $(( (e - s) / N / 1000 )) us/run"
  done
done
