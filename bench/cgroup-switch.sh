#!/usr/bin/env bash
# What a tenant's cgroup costs pipe-based context switching, with and
# without the seccomp floor (issue 17 item 2; docs/benchmarks.md, "micro
# against the seccomp floor"): bench/c/ubench.c `context` natively and under
# bench/c/floor-exec.c (the one-instruction filter), in the root cgroups and
# in a cgroup at a tenant's depth (corral/cgswitch-PID/t in cpu, cpuacct,
# memory with a 1 GiB limit, pids: where corral puts a tenant), ROUNDS
# interleaved rounds of MS ms each, pinned to CPU 1 (both processes of the
# test on one CPU: every switch is a real one). Prints the medians and their
# change against native in the root cgroups. Removes its cgroups on exit,
# also on failure.
#
# Usage: bench/cgroup-switch.sh [ROUNDS [MS]]      (as root; default 10 2000)
set -euo pipefail
ROUNDS=${1:-10}
MS=${2:-2000}
[ "$(id -u)" = 0 ] || { echo "cgroup-switch.sh: run as root" >&2; exit 2; }
[ -d /sys/fs/cgroup/cpu ] || { echo "cgroup-switch.sh: needs the cgroup v1 hierarchies" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d)
P=corral/cgswitch-$$
H="cpu cpuacct memory pids"
made=()
cleanup() {
  for h in $H; do rmdir "/sys/fs/cgroup/$h/$P/t" "/sys/fs/cgroup/$h/$P" 2>/dev/null || true; done
  # corral's own parent, where this run made it (and only if empty now).
  for d in "${made[@]}"; do rmdir "$d" 2>/dev/null || true; done
  rm -rf "$W"
}
trap cleanup EXIT
cc -O2 -o "$W/ubench" "$HERE/c/ubench.c"
cc -O2 -static -o "$W/floor-exec" "$HERE/c/floor-exec.c"
for h in $H; do
  [ -d "/sys/fs/cgroup/$h/corral" ] || made+=("/sys/fs/cgroup/$h/corral")
  mkdir -p "/sys/fs/cgroup/$h/$P/t"
done
echo 1073741824 >"/sys/fs/cgroup/memory/$P/t/memory.limit_in_bytes"
one() { # root|cg native|floor
  local wrap=() join=""
  [ "$2" = floor ] && wrap=("$W/floor-exec")
  [ "$1" = cg ] && join="for h in $H; do echo \$\$ > /sys/fs/cgroup/\$h/$P/t/cgroup.procs; done;"
  sh -c "$join exec taskset -c 1 \"\$@\"" sh "${wrap[@]}" "$W/ubench" context "$MS" | awk '{print $3}'
}
for ((r = 1; r <= ROUNDS; r++)); do
  for c in "root native" "root floor" "cg native" "cg floor"; do
    # shellcheck disable=SC2086
    echo "$c $(one $c)"
  done
done >"$W/out"
python3 - "$W/out" <<'PY'
import collections, statistics as st, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    w, m, v = line.split()
    d[(w, m)].append(float(v))
base = st.median(d[("root", "native")])
for (w, m), v in d.items():
    where = "root cgroups" if w == "root" else "tenant-depth cgroup"
    print(f"{where:20} {m:7} {st.median(v):10.0f} lps  {(st.median(v) / base - 1) * 100:+5.1f} %")
PY
