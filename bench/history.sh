#!/usr/bin/env bash
# CPU of the usage-history collector (`corral daemon`) at N tenants sampled
# every --interval (target: <= 1 % of one CPU at 1,000 tenants every 5 s).
# The tenants are fake (bench/fake-tenants.sh: state directories and real,
# empty cgroups below a private parent, as bench/metrics.sh makes them): a
# round reads exactly what it reads of real tenants. The daemon runs for a
# warm-up (its first rounds create the tenants' rows and limits), then its
# CPU time (utime + stime from /proc/PID/stat) is measured over --seconds,
# which includes a minute's rollup and retention. The peer, measured in the
# same run: one `corral metrics dump` (the same reading of every tenant,
# plus encoding and a process start), its CPU time from bash's `times`.
# Prints CPU % of one core, CPU ms per round, the peer's CPU ms, their
# ratio, and the database's size.
#
# Usage: bench/history.sh [options]        (as root)
#   --tenants N    fake tenants (default 1000)
#   --seconds S    measured time (default 120)
#   --interval D   sampling interval (default 5s)
#   --corral PATH  the corral to measure (default $CORRAL_BIN, $CORRAL, or a
#                  release build made here)
#
# Everything lives in /run/corral-bench/history.XXXXXX and the cgroup parent
# corral/history-bench-PID; the daemon and the stand-in init are stopped by
# pid, the cgroups and files removed on exit, also on failure or Ctrl-C.
set -euo pipefail
# shellcheck source=../scripts/lib.sh source-path=SCRIPTDIR
source "$(dirname "$0")/../scripts/lib.sh"
need_root

usage() { sed -n '/^# Usage:/,/^#                  release build/p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "history.sh: $*" >&2; exit 1; }
log() { echo "history: $*" >&2; }

N=1000 SECONDS_=120 INTERVAL=5s CORRAL_ARG=
while (($#)); do
  case $1 in
    --tenants) N=${2:?}; shift ;;
    --seconds) SECONDS_=${2:?}; shift ;;
    --interval) INTERVAL=${2:?}; shift ;;
    --corral) CORRAL_ARG=${2:?}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option $1 (--help)" ;;
  esac
  shift
done
[[ $N =~ ^[0-9]+$ && $N -ge 1 && $N -le 20000 ]] || die "--tenants: 1..20000"
[[ $SECONDS_ =~ ^[0-9]+$ && $SECONDS_ -ge 10 && $SECONDS_ -le 3600 ]] || die "--seconds: 10..3600"

CORRAL=${CORRAL_ARG:-${CORRAL_BIN:-${CORRAL:-}}}
if [ -z "$CORRAL" ]; then
  log "release build of corral"
  build_release
fi
[ -x "$CORRAL" ] || die "$CORRAL is not executable"

mkdir -p /run/corral-bench
WORK=$(mktemp -d /run/corral-bench/history.XXXXXX)
PARENT=corral/history-bench-$$
DAEMON_PID=''
# shellcheck source=fake-tenants.sh
source "$(dirname "$0")/fake-tenants.sh"

cleanup() {
  set +e
  [ -n "$DAEMON_PID" ] && kill -TERM "$DAEMON_PID" 2>/dev/null && wait "$DAEMON_PID" 2>/dev/null
  fake_tenants_cleanup
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "$N tenants in $WORK, cgroups $PARENT"
fake_tenants_make "$N" 4 "$WORK/state" "$PARENT"
mkdir -p "$WORK/config"
run_corral() { "$CORRAL" --state-dir "$WORK/state" --config-dir "$WORK/config" "$@"; }

cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
TICK=$(getconf CLK_TCK)

# Started directly (not through run_corral) so that $! is corral itself.
"$CORRAL" --state-dir "$WORK/state" --config-dir "$WORK/config" \
  daemon --interval "$INTERVAL" --db "$WORK/history.db" 2> "$WORK/daemon.log" &
DAEMON_PID=$!
# Warm-up: the first rounds insert every tenant's name and limits.
sleep 12
kill -0 "$DAEMON_PID" 2>/dev/null || die "corral daemon exited: $(cat "$WORK/daemon.log")"
c0=$(cpu_ticks "$DAEMON_PID") t0=$(date +%s.%N)
sleep "$SECONDS_"
c1=$(cpu_ticks "$DAEMON_PID") t1=$(date +%s.%N)
kill -0 "$DAEMON_PID" 2>/dev/null || die "corral daemon exited: $(cat "$WORK/daemon.log")"
kill -TERM "$DAEMON_PID"; wait "$DAEMON_PID" || true; DAEMON_PID=''
grep -v 'sampling every\|stopped' "$WORK/daemon.log" >&2 || true
split=$(sed -n 's/.*CPU per round: //p' "$WORK/daemon.log")

interval_s=$(echo "$INTERVAL" | awk '/ms$/ { sub(/ms/, ""); print $1 / 1000; next } /s$/ { sub(/s/, ""); print $1; next } { print $1 }')
read -r pct per_round < <(echo "$c0 $c1 $t0 $t1 $TICK $interval_s" | awk '{
  cpu = ($2 - $1) / $5; wall = $4 - $3
  printf "%.2f %.1f\n", 100 * cpu / wall, 1000 * cpu / (wall / $6) }')
samples=$(run_corral history --db "$WORK/history.db" --since 1h --csv | tail -n +2 | wc -l)

# The peer: `corral metrics dump` (one reading of every tenant), 5 times.
peer=()
for _ in 1 2 3 4 5; do
  s0=$(awk '{ print $14 + $15 + $16 + $17 }' /proc/$$/stat)
  run_corral metrics dump > /dev/null
  s1=$(awk '{ print $14 + $15 + $16 + $17 }' /proc/$$/stat)
  peer+=("$(echo "($s1 - $s0) * 1000 / $TICK" | bc)")
done
peer_med=$(printf '%s\n' "${peer[@]}" | sort -g | sed -n 3p)
size=$(du -k "$WORK"/history.db* | awk '{ s += $1 } END { print s }')
echo "history: $N tenants every $INTERVAL, ${SECONDS_} s measured: corral daemon $pct % of one CPU (target <= 1 %), $per_round ms CPU per round; peer: corral metrics dump ${peer_med} ms CPU (median of 5); round/peer $(echo "$per_round / $peer_med" | bc -l | xargs printf '%.2f'); the daemon's own account over its whole run: $split; $samples tenants in the history; database $size KiB"
