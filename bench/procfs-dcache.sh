#!/usr/bin/env bash
# Does a lookup under the host's /proc/sys/net grow with the network
# namespaces that looked there? (issue 17 item 4; docs/benchmarks.md, "The
# dentry walk"). Makes N namespaces (`ip netns add`), reads
# /proc/sys/net/ipv4/tcp_timestamps once inside each, through the host's
# /proc (`--shared`, the default) or through a procfs instance of the
# reader's own (`--own`, what corral does), then times 200 opens and reads of
# the host's /proc/sys/net/ipv4/ip_local_port_range. Removes its namespaces
# on exit, also on failure.
#
# Usage: bench/procfs-dcache.sh [--own] [N]      (as root; N default 2000)
set -euo pipefail
MODE=shared
[ "${1:-}" = --own ] && { MODE=own; shift; }
N=${1:-2000}
[ "$(id -u)" = 0 ] || { echo "procfs-dcache.sh: run as root" >&2; exit 2; }
P=cdc$$
made=0
cleanup() { for ((i = 0; i < made; i++)); do ip netns del "$P-$i" 2>/dev/null || true; done; }
trap cleanup EXIT
t() {
  python3 - "$1" "$2" <<'PY'
import sys, time
p, what = sys.argv[1], sys.argv[2]
n = 200
s = time.perf_counter()
for _ in range(n):
    with open(p) as f:
        f.read()
print("%-55s %7.1f us per open+read" % (what, (time.perf_counter() - s) / n * 1e6))
PY
}
R=/proc/sys/net/ipv4/ip_local_port_range
t $R "before"
for ((i = 0; i < N; i++)); do ip netns add "$P-$i"; made=$((i + 1)); done
t $R "after $N ip netns add"
for ((i = 0; i < N; i++)); do
  if [ $MODE = shared ]; then
    ip netns exec "$P-$i" cat /proc/sys/net/ipv4/tcp_timestamps >/dev/null
  else
    ip netns exec "$P-$i" unshare -m sh -c 'mount -t proc proc /mnt && cat /mnt/sys/net/ipv4/tcp_timestamps >/dev/null'
  fi
done
t $R "after a read in each ($MODE)"
