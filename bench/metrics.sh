#!/usr/bin/env bash
# GET /metrics of `corral metrics serve` at N tenants (target: <= 50 ms at
# 1,000). What a scrape costs is reading every tenant's state.json,
# limits.json, /proc/PID/stat of its init, its cgroup files and its
# entry-process slots, so the tenants here are made of exactly those, without
# building N sandboxes (bench/fake-tenants.sh): per tenant a state directory
# (state.json naming one live stand-in init, a `sleep` started here;
# limits.json of the default plan; an entry/ directory with --slots slot
# files and a rejections counter) and a real, empty cgroup in every
# hierarchy corral uses, below a private parent.
# One warm-up scrape, then --scrapes scrapes with curl (time_total); prints
# the median, min and max in ms, the exporter's own reading time
# (corral_scrape_duration_seconds) and the size of the exposition.
#
# Usage: bench/metrics.sh [options]        (as root)
#   --tenants N   fake tenants (default 1000)
#   --scrapes S   timed scrapes (default 20)
#   --slots K     entry-process slot files per tenant, 0..20 (default 4; the
#                 default plan's limit is 20: a slot file exists once that
#                 many requests ran at the same time)
#   --corral PATH the corral to measure (default $CORRAL_BIN, $CORRAL, or a
#                 release build made here)
#
# Everything lives in a private directory /run/corral-bench/metrics.XXXXXX and
# the cgroup parent corral/metrics-bench-PID; the server and the stand-in init
# are stopped by pid, the cgroups and files removed on exit, also on failure
# or Ctrl-C.
set -euo pipefail
# shellcheck source=../scripts/lib.sh source-path=SCRIPTDIR
source "$(dirname "$0")/../scripts/lib.sh"
need_root

usage() { sed -n '/^# Usage:/,/^#                 release build/p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "metrics.sh: $*" >&2; exit 1; }
log() { echo "metrics: $*" >&2; }

N=1000 SCRAPES=20 SLOTS=4 CORRAL_ARG=
while (($#)); do
  case $1 in
    --tenants) N=${2:?}; shift ;;
    --scrapes) SCRAPES=${2:?}; shift ;;
    --slots) SLOTS=${2:?}; shift ;;
    --corral) CORRAL_ARG=${2:?}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option $1 (--help)" ;;
  esac
  shift
done
[[ $N =~ ^[0-9]+$ && $N -ge 1 && $N -le 20000 ]] || die "--tenants: 1..20000"
[[ $SCRAPES =~ ^[0-9]+$ && $SCRAPES -ge 1 ]] || die "--scrapes: a count"
[[ $SLOTS =~ ^[0-9]+$ && $SLOTS -le 20 ]] || die "--slots: 0..20"
command -v curl >/dev/null || die "curl missing (scripts/install-deps.sh)"

CORRAL=${CORRAL_ARG:-${CORRAL_BIN:-${CORRAL:-}}}
if [ -z "$CORRAL" ]; then
  log "release build of corral"
  build_release
fi
[ -x "$CORRAL" ] || die "$CORRAL is not executable"

mkdir -p /run/corral-bench
WORK=$(mktemp -d /run/corral-bench/metrics.XXXXXX)
PARENT=corral/metrics-bench-$$
SERVER_PID=''
# shellcheck source=fake-tenants.sh
source "$(dirname "$0")/fake-tenants.sh"

cleanup() {
  set +e
  [ -n "$SERVER_PID" ] && kill -TERM "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
  fake_tenants_cleanup
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "$N tenants in $WORK, cgroups $PARENT, $SLOTS slot files each"
t0=$(date +%s.%N)
fake_tenants_make "$N" "$SLOTS" "$WORK/state" "$PARENT"
log "made in $(echo "$(date +%s.%N) - $t0" | bc) s (${#FAKE_ROOTS[@]} hierarchies)"

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT/metrics
"$CORRAL" --state-dir "$WORK/state" metrics serve --listen "127.0.0.1:$PORT" 2> "$WORK/serve.log" &
SERVER_PID=$!
for _ in $(seq 100); do
  curl -sf -o /dev/null "$URL" && break
  kill -0 "$SERVER_PID" 2>/dev/null || die "corral metrics serve exited: $(cat "$WORK/serve.log")"
  sleep 0.1
done

# The warm-up scrape, checked: every tenant up, nothing failed.
curl -sf "$URL" > "$WORK/first.prom" || die "no answer from $URL"
up=$(sed -n 's/^corral_tenants{state="up"} //p' "$WORK/first.prom")
errs=$(sed -n 's/^corral_scrape_errors_total //p' "$WORK/first.prom")
[ "$up" = "$N" ] || die "corral_tenants{state=\"up\"} is $up, not $N"
[ "$errs" = 0 ] || die "scrape errors: $errs ($(head -3 "$WORK/serve.log"))"
bytes=$(wc -c < "$WORK/first.prom")
series=$(grep -c '^corral_tenant_' "$WORK/first.prom")

times=() reads=()
for ((s = 0; s < SCRAPES; s++)); do
  t=$(curl -sf -o "$WORK/last.prom" -w '%{time_total}' "$URL")
  times+=("$(echo "$t * 1000" | bc -l)")
  reads+=("$(sed -n 's/^corral_scrape_duration_seconds //p' "$WORK/last.prom")")
done
stats() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
  m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
  printf "median %.1f ms, min %.1f, max %.1f", m, v[1], v[NR] }'; }
read_ms=()
for r in "${reads[@]}"; do read_ms+=("$(echo "$r * 1000" | bc -l)"); done
echo "metrics: $N tenants, $SLOTS slot files each, $SCRAPES scrapes of GET /metrics ($((bytes / 1024)) KiB, $series tenant series): $(stats "${times[@]}") (target <= 50 ms); of which reading: $(stats "${read_ms[@]}")"
