#!/usr/bin/env bash
# Supervised PHP-FPM ([services.NAME], socket activation) against the same
# pool on the bare host. Three measurements, each with a target:
#
#   throughput  a one-line PHP page through nginx (1 worker, user www-data,
#               127.0.0.1) to (a) the tenant's socket-activated PHP-FPM in
#               its corral sandbox and (b) the same pool (same pm settings,
#               same php.ini) started here by root on the bare host with
#               `user = TENANT`; `h2load --h1 -n N -c C`, the two sides
#               interleaved round by round (the order alternates), each warmed
#               up first. Two setups: unpinned, and pinned (nginx, both FPMs
#               on CPU 0, h2load on CPU 1: the sandbox
#               is brought up under `taskset -c 0` and its PHP-FPM
#               processes are pinned with `taskset -p` once started, since
#               the init does not keep its starter's affinity; the affinity
#               seen is printed and checked). Median req/s per side;
#               target sandbox/bare >= 0.97.
#   cold start  the first request after the service went idle: `corral
#               service stop`, wait until `corral service status` says
#               "waiting" with no pid, then one curl through nginx
#               (time_total), R times. For comparison, R warm requests to
#               the sandbox's and the bare pool (both warmed up, interleaved).
#               Median and max ms; target: cold median <= 150 ms.
#   memory      K tenants whose profile declares the FPM service (never
#               started: no request reaches them) and K with the same profile
#               minus [services.php], all idle; per tenant, KiB: the init's
#               PSS (/proc/PID/smaps_rollup), the kernel's share (delta of
#               SUnreclaim + SReclaimable + KernelStack + PageTables + Percpu;
#               "unrecl": the same without SReclaimable, which other work on
#               the machine moves most), tmpfs (delta Shmem), and delta (MemTotal - MemAvailable) for
#               comparison (noisy on a shared machine). One unmeasured pass
#               first (first use of the users' homes, tmp dirs, dentries),
#               then two passes in opposite orders (without, with; with,
#               without), averaged. Target: with - without <= 50 KiB per
#               tenant, and no process of those tenants but their inits.
#               The tenants are users created here (corral-f00001...,
#               group corral-fpmbench, homes /run/corral-bench/home/NAME) and
#               removed at the end.
#
# Usage: bench/fpm.sh [options]        (as root)
#   --rounds R        interleaved throughput rounds per setup (default 5)
#   --requests N      requests per h2load run (default 3000)
#   --concurrency C   h2load connections (default 10)
#   --cold R          cold starts (default 10)
#   --tenants K       tenants per set in the memory test, 1..1000 (default 50)
#   --pm MODE         ondemand | static | dynamic, for both pools (default ondemand)
#   --children N      pm.max_children of both pools (default 4)
#   --tenant USER     the tenant of the throughput and cold tests (default corral-t3)
#   --cpu-limit V     [limits] cpu of that tenant, e.g. "200%" or "max"
#                     (default: its plan's; 100% = one CPU)
#   --profile-extra T TOML lines added to that tenant's override file, for
#                     experiments, e.g. $'[seccomp]\nenabled = false'
#   --variants LIST   more pools in the throughput rounds, comma-separated, each
#                     measured against the same bare pool in the same rounds:
#                       floor    the tenant's sandbox with corral's filter off
#                                ([seccomp] enabled = false) and PHP-FPM
#                                started under bench/c/floor-exec, the
#                                one-instruction allow-all filter: the
#                                kernel's own cost of any filter
#                       off      the sandbox with [seccomp] enabled = false
#                       bare-cg  the bare pool in a plain cgroup (no limits
#                                set) under corral's parent, as deep as the
#                                tenant's (PARENT-bare-cg/TENANT), in every
#                                hierarchy the tenant's cgroup is in
#                       bare-cgq the same with the tenant's CPU quota copied
#                                from its cgroup (cpu.max, or v1
#                                cpu.cfs_period_us and cpu.cfs_quota_us)
#                     Each sandboxed variant is a corral instance of its own
#                     (state, config, cgroup parent) for the same tenant.
#   --perf DIR        record the last throughput round of every configuration
#                     with `perf record -e cpu-clock -a -g` into
#                     DIR/SETUP.CONFIG.data (kept; DIR is created)
#   --syscalls        after the rounds, one more run of every configuration
#                     (not in the medians) under `perf stat -e
#                     raw_syscalls:sys_enter` on its PHP-FPM processes:
#                     system calls per request, the calls a seccomp filter sees
#   --only LIST       comma-separated subset of throughput,cold,memory
#   --quick           small counts: 2 rounds, 500 requests, 3 cold, 20 tenants
#                     (explicit options still win)
#   --corral PATH     the corral to measure (default $CORRAL_BIN, $CORRAL, or a
#                     release build made here); it and the corral-init next to
#                     it (or $CORRAL_INIT) are copied first, so a rebuild during
#                     the run changes nothing
#   --json            stdout is one JSON object; the table goes to stderr
#
# Everything lives in a private directory /run/corral-bench/fpm.XXXXXX (state
# dir, config dir, sockets, logs, nginx, the bare pool) and a cgroup parent
# corral/fpm-bench-PID. Everything it starts (nginx, the bare PHP-FPM, the
# sandboxes) is stopped, by pid file, pid or `corral down`, and everything it
# creates (users, group, homes, the page in the tenant's home, directories) is
# removed on exit, also on failure or Ctrl-C.
set -euo pipefail
# shellcheck source=../scripts/lib.sh source-path=SCRIPTDIR
source "$(dirname "$0")/../scripts/lib.sh"
need_root

usage() { sed -n '/^# Usage:/,/^#   --json/p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "fpm.sh: $*" >&2; exit 1; }
log() { echo "fpm: $*" >&2; }

ROUNDS='' REQUESTS='' COLD='' TENANTS='' CONC=10 PM=ondemand CHILDREN=4 TENANT=corral-t3
CPU_LIMIT='' EXTRA='' VARIANTS='' PERF_DIR='' SYSCALLS=0 ONLY=throughput,cold,memory QUICK=0 JSON=0 CORRAL_ARG=
while (($#)); do
  case $1 in
    --rounds) ROUNDS=${2:?}; shift ;;
    --requests) REQUESTS=${2:?}; shift ;;
    --concurrency) CONC=${2:?}; shift ;;
    --cold) COLD=${2:?}; shift ;;
    --tenants) TENANTS=${2:?}; shift ;;
    --pm) PM=${2:?}; shift ;;
    --children) CHILDREN=${2:?}; shift ;;
    --tenant) TENANT=${2:?}; shift ;;
    --cpu-limit) CPU_LIMIT=${2:?}; shift ;;
    --profile-extra) EXTRA=${2:?}; shift ;;
    --only) ONLY=${2:?}; shift ;;
    --variants) VARIANTS=${2:?}; shift ;;
    --perf) PERF_DIR=${2:?}; shift ;;
    --syscalls) SYSCALLS=1 ;;
    --corral) CORRAL_ARG=${2:?}; shift ;;
    --quick) QUICK=1 ;;
    --json) JSON=1 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  shift
done
if ((QUICK)); then
  ROUNDS=${ROUNDS:-2} REQUESTS=${REQUESTS:-500} COLD=${COLD:-3} TENANTS=${TENANTS:-20}
fi
ROUNDS=${ROUNDS:-5} REQUESTS=${REQUESTS:-3000} COLD=${COLD:-10} TENANTS=${TENANTS:-50}
int() {
  if ! [[ $2 =~ ^[0-9]+$ ]] || (($2 < $3 || $2 > $4)); then die "$1: expected $3..$4, got '$2'"; fi
}
int --rounds "$ROUNDS" 1 1000
int --requests "$REQUESTS" 10 10000000
int --concurrency "$CONC" 1 1000
int --cold "$COLD" 1 1000
int --tenants "$TENANTS" 1 1000
int --children "$CHILDREN" 1 1000
case $PM in ondemand | static | dynamic) ;; *) die "--pm: ondemand, static or dynamic, got '$PM'" ;; esac
[[ -z $CPU_LIMIT || $CPU_LIMIT =~ ^([0-9]+%|max)$ ]] || die "--cpu-limit: like 200% or max, got '$CPU_LIMIT'"
# The sandboxed variants (V_SB: floor, off) and the bare pools in a cgroup
# (V_CG: bare-cg, bare-cgq).
V_SB=() V_CG=()
if [ -n "$VARIANTS" ]; then
  IFS=, read -ra parts <<<"$VARIANTS"
  for p in "${parts[@]}"; do
    case $p in
      floor | off) V_SB+=("$p") ;; bare-cg | bare-cgq) V_CG+=("$p") ;;
      *) die "--variants: floor, off, bare-cg, bare-cgq; got '$p'" ;;
    esac
  done
  [[ $EXTRA != *"[seccomp]"* ]] || die "--variants and a [seccomp] table in --profile-extra: the floor and off variants set [seccomp] themselves"
fi
if [ -n "$PERF_DIR" ] || ((SYSCALLS)); then
  command -v perf >/dev/null || die "missing tools: perf (Debian package linux-perf), for --perf"
  [ -z "$PERF_DIR" ] || mkdir -p "$PERF_DIR"
fi
DO_TP=0 DO_COLD=0 DO_MEM=0
IFS=, read -ra parts <<<"$ONLY"
for p in "${parts[@]}"; do
  case $p in
    throughput) DO_TP=1 ;; cold) DO_COLD=1 ;; memory) DO_MEM=1 ;;
    *) die "--only: throughput, cold, memory; got '$p'" ;;
  esac
done

PHP_FPM=${PHP_FPM:-}
if [ -z "$PHP_FPM" ]; then
  PHP_FPM=$(command -v php-fpm 2>/dev/null || printf '%s\n' /usr/sbin/php-fpm[0-9]* | sort -V | tail -1)
fi
missing=()
for t in nginx:nginx-light h2load:nghttp2-client curl:curl jq:jq taskset:util-linux \
  useradd:passwd userdel:passwd groupadd:passwd groupdel:passwd pgrep:procps flock:util-linux; do
  command -v "${t%%:*}" >/dev/null || missing+=("${t%%:*} (Debian package ${t#*:})")
done
[ -x "$PHP_FPM" ] || missing+=("php-fpm (Debian package php-fpm)")
((${#missing[@]} == 0)) || die "missing tools: ${missing[*]}"
((DO_TP || DO_COLD)) && { getent passwd "$TENANT" >/dev/null || die "no user $TENANT (scripts/test-users.sh creates corral-t1..t4)"; }
((DO_TP || DO_COLD)) && { getent passwd www-data >/dev/null || die "no user www-data"; }

# One run at a time: the memory test's users are machine-wide. The lock file
# stays (a removed one would let a second holder in).
exec 9>/run/lock/corral-bench-fpm.lock
flock -n 9 || die "another bench/fpm.sh holds /run/lock/corral-bench-fpm.lock"

SRC_CORRAL=${CORRAL_ARG:-${CORRAL_BIN:-${CORRAL:-}}}
if [ -z "$SRC_CORRAL" ]; then
  build_release >/dev/null 2>&1 || build_release
  SRC_CORRAL=$CORRAL
fi
SRC_INIT=${CORRAL_INIT:-$(dirname "$SRC_CORRAL")/corral-init}
[ -x "$SRC_CORRAL" ] || die "not executable: $SRC_CORRAL"
[ -x "$SRC_INIT" ] || die "not executable: $SRC_INIT (corral-init; or set CORRAL_INIT)"

# COMMAND on a CPU, or anywhere with "-".
on_cpu() {
  local c=$1
  shift
  if [ "$c" = - ]; then "$@"; else taskset -c "$c" "$@"; fi
}
median() { sort -g | awk '{a[NR]=$1} END {if (!NR) print "nan"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
minmax() { sort -g | awk 'NR==1 {m=$1} {x=$1} END {print m, x}'; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

free_port() {
  local p
  for p in $(shuf -i 20000-59999 -n 64); do
    [ -z "$(ss -Htln "sport = :$p")" ] && { echo "$p"; return; }
  done
  die "no free port found"
}

# The pool settings both sides share (pm and its sizes).
pool_settings() {
  echo "pm = $PM"
  echo "pm.max_children = $CHILDREN"
  case $PM in
    # Longer than the other configurations' runs of a round: a warm pool
    # keeps its workers between its runs (10 s let them go with --variants).
    ondemand) echo "pm.process_idle_timeout = 60s" ;;
    dynamic) printf 'pm.start_servers = %s\npm.min_spare_servers = 1\npm.max_spare_servers = %s\n' "$CHILDREN" "$CHILDREN" ;;
  esac
  echo "listen.backlog = 4096" # corral listens with 4096 too
  echo "catch_workers_output = yes"
}

# The service's idle timeout is long: with 3 s corral stopped an idle pool
# while the other configurations of a round ran, and the next round's first
# connection started it again, unpinned and cold (the cold test stops it
# with `corral service stop`).
# A tenant's override: the FPM config file (always) and the service (when
# $2 = with); $3: [tmp] dir and extra lines; $4: a throughput variant (floor,
# off), whose corral instance has its own config dir, sockets and logs
# under $W/v-VARIANT.
tenant_file() { # USER with|without EXTRA [VARIANT]
  local base=$W conf=$CONF cmd="\"$PHP_FPM\""
  if [ -n "${4:-}" ]; then base=$W/v-$4 conf=$W/v-$4/config; fi
  [ "${4:-}" = floor ] && cmd="\"$FLOOR_IN\", $cmd"
  {
    if [ "$2" = with ]; then
      cat <<EOF
[services.php]
command = [$cmd, "--nodaemonize", "--fpm-config", "/etc/corral-fpm.conf"]
listen = "$base/sock/\$USER.sock"
listen_group = "www-data"
idle_timeout = "1h"
stop_signal = "SIGQUIT"
log = "$base/log/\$USER/php.log"

EOF
    fi
    printf '%s\n' "${3:-}"
    case ${4:-} in
      floor | off) printf '[seccomp]\nenabled = false\n\n' ;;
    esac
    if [ "${4:-}" = floor ]; then
      cat <<EOF
[[mount]]
type = "ro-bind"
src = "$W/bin/floor-exec"
dst = "$FLOOR_IN"

EOF
    fi
    cat <<EOF
[[mount]]
type = "file"
dst = "/etc/corral-fpm.conf"
content = """
[global]
error_log = /proc/self/fd/2
daemonize = no

[www]
listen = $base/sock/\$USER.sock
$(pool_settings)
"""
EOF
  } >"$conf/tenants/$1.toml"
}

svc_state() { # TENANT -> "STATE PID"
  corral service status "$1" php --json | jq -r 'if type == "array" then .[0] else . end | "\(.state) \(.pid)"'
}
wait_waiting() { # TENANT: until its service is waiting with no pid (15 s at most)
  local st=
  for _ in $(seq 300); do
    st=$(svc_state "$1")
    [ "$st" = "waiting null" ] && return 0
    sleep 0.05
  done
  die "$1: service php still '$st' after 15 s (expected 'waiting null')"
}

stop_nginx() {
  local p
  [ -s "$NGINX_PID" ] || return 0
  p=$(cat "$NGINX_PID")
  kill -QUIT "$p" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
  kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null
  rm -f "$NGINX_PID"
}
start_nginx() { # CPU|-
  stop_nginx
  on_cpu "$1" nginx -c "$W/nginx/nginx.conf" -e "$W/nginx/error.log"
  for _ in $(seq 100); do [ -s "$NGINX_PID" ] && (exec 3<>"/dev/tcp/127.0.0.1/$PORT_S") 2>/dev/null && return; sleep 0.05; done
  die "nginx did not start (see $W/nginx/error.log)"
}
stop_bare() {
  [ -n "$BARE_PID" ] || return 0
  kill -QUIT "$BARE_PID" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$BARE_PID" 2>/dev/null || break; sleep 0.05; done
  kill -0 "$BARE_PID" 2>/dev/null && kill -KILL "$BARE_PID" 2>/dev/null
  wait "$BARE_PID" 2>/dev/null || true
  BARE_PID=
}
start_bare() { # CPU|-
  stop_bare
  rm -f "$W/bare/php.sock"
  local pin=()
  [ "$1" != - ] && pin=(taskset -c "$1")
  # Not through a function: $! must be php-fpm's master itself (taskset execs it).
  "${pin[@]}" "$PHP_FPM" --nodaemonize --fpm-config "$W/bare/php-fpm.conf" 2>>"$W/bare/stderr" &
  BARE_PID=$!
  for _ in $(seq 200); do [ -S "$W/bare/php.sock" ] && return; sleep 0.05; done
  die "bare php-fpm did not start: $(tail -5 "$W/bare/php-fpm.log" "$W/bare/stderr" 2>/dev/null)"
}

# Host pids of the PHP-FPM processes of the tenant's sandbox (its cgroup);
# PARENT: the cgroup parent of the corral instance (default: the main one).
sandbox_fpm_pids() { # [PARENT]
  local f p par=${1:-$PARENT}
  for f in /sys/fs/cgroup/"$par/$TENANT"/cgroup.procs /sys/fs/cgroup/*/"$par/$TENANT"/cgroup.procs; do
    [ -r "$f" ] || continue
    while read -r p; do
      [[ $(cat "/proc/$p/comm" 2>/dev/null) == php-fpm* ]] && echo "$p"
    done <"$f"
    return 0
  done
}
# The distinct CPU lists of processes: "0" or "0-1", comma-joined when several.
cpus_of() {
  local p
  for p in "$@"; do awk '/^Cpus_allowed_list/ {print $2}' "/proc/$p/status" 2>/dev/null || true; done | sort -u | paste -sd, -
}
# CFS throttling of the tenant's cgroup so far (its CPU limit at work):
# "N periods, T ms" (v1 cpu.stat: nr_throttled, throttled_time ns; v2:
# nr_throttled, throttled_usec).
throttled() {
  local f
  for f in /sys/fs/cgroup/"$PARENT/$TENANT"/cpu.stat /sys/fs/cgroup/cpu/"$PARENT/$TENANT"/cpu.stat /sys/fs/cgroup/cpu,cpuacct/"$PARENT/$TENANT"/cpu.stat; do
    [ -r "$f" ] || continue
    awk '$1 == "nr_throttled" {n = $2} $1 == "throttled_time" {t = $2 / 1e6} $1 == "throttled_usec" {t = $2 / 1e3}
      END {printf "%d periods, %.0f ms\n", n, t}' "$f"
    return 0
  done
}
bare_fpm_pids() { echo "$BARE_PID"; pgrep -P "$BARE_PID" || true; }
# What the kernel says about processes' seccomp and speculation state: the
# distinct "Seccomp_filters N, SSB ..., IB ..." lines, joined by "; ".
sec_of() {
  local p
  for p in "$@"; do
    awk -F'\t' '/^Seccomp_filters:/ {f = $2} /^Speculation_Store_Bypass:/ {s = $2} /^SpeculationIndirectBranch:/ {b = $2}
      END {printf "Seccomp_filters %s, SSB %s, IB %s\n", f, s, b}' "/proc/$p/status" 2>/dev/null || true
  done | sort -u | paste -sd';' -
}

# The bare pool in a cgroup (variants bare-cg, bare-cgq): the same pool,
# its own socket ($W/VARIANT), its master moved into $PARENT-VARIANT/TENANT,
# as deep as the tenant's cgroup (every hierarchy of CG_HIER; bare-cg: no
# limit written; bare-cgq: the tenant's CPU quota) before it execs php-fpm,
# so its workers are born there.
declare -A BCG_PID=()
stop_bcg() { # VARIANT
  local p=${BCG_PID[$1]:-}
  [ -n "$p" ] || return 0
  kill -QUIT "$p" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
  kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null
  wait "$p" 2>/dev/null || true
  BCG_PID[$1]=
}
start_bcg() { # VARIANT CPU|-
  local v=$1 pin=() d procs=() f
  stop_bcg "$v"
  rm -f "$W/$v/php.sock"
  [ "$2" != - ] && pin=(taskset -c "$2")
  for d in "${CG_HIER[@]}"; do
    mkdir -p "$d/$PARENT-$v/$TENANT"
    procs+=("$d/$PARENT-$v/$TENANT/cgroup.procs")
    [ "$v" = bare-cgq ] || continue
    for f in cpu.max cpu.cfs_period_us cpu.cfs_quota_us; do
      if [ -e "$d/$PARENT/$TENANT/$f" ]; then
        cat "$d/$PARENT/$TENANT/$f" >"$d/$PARENT-$v/$TENANT/$f" || die "cannot copy $f of $TENANT's cgroup"
      fi
    done
  done
  # shellcheck disable=SC2016 # the inner script's own $$ and $@
  "${pin[@]}" sh -c 'for f in $1; do echo $$ >"$f" || exit 1; done; shift; exec "$@"' _ "${procs[*]}" \
    "$PHP_FPM" --nodaemonize --fpm-config "$W/$v/php-fpm.conf" 2>>"$W/$v/stderr" &
  BCG_PID[$v]=$!
  for _ in $(seq 200); do [ -S "$W/$v/php.sock" ] && return; sleep 0.05; done
  die "$v php-fpm did not start: $(tail -5 "$W/$v/php-fpm.log" "$W/$v/stderr" 2>/dev/null)"
}
bcg_fpm_pids() { echo "${BCG_PID[$1]}"; pgrep -P "${BCG_PID[$1]}" || true; }
# The CPU quota of a cgroup of the variants, as "QUOTA/PERIOD" (v2 cpu.max order).
cg_quota() { # CGROUP-PATH below the hierarchies
  local d
  for d in "${CG_HIER[@]}"; do
    [ -e "$d/$1/cpu.max" ] && { tr ' ' / <"$d/$1/cpu.max"; return; }
    [ -e "$d/$1/cpu.cfs_quota_us" ] && { echo "$(cat "$d/$1/cpu.cfs_quota_us")/$(cat "$d/$1/cpu.cfs_period_us")"; return; }
  done
}
# The PHP-FPM processes of a configuration (s, b, floor, off, bare-cg).
pool_pids() {
  case $1 in
    s) sandbox_fpm_pids ;; b) bare_fpm_pids ;; bare-cg | bare-cgq) bcg_fpm_pids "$1" ;;
    *) sandbox_fpm_pids "$PARENT-$1" ;;
  esac
}
# The master of a configuration's pool: its process whose parent is not
# one of the pool's.
pool_master() { # CONF
  local pids p
  pids=" $(pool_pids "$1" | tr '\n' ' ') "
  for p in $pids; do
    [[ $pids == *" $(awk '/^PPid:/ {print $2}' "/proc/$p/status" 2>/dev/null) "* ]] || { echo "$p"; return; }
  done
}
# Where a configuration's CPU goes: one line per process, "ROLE PID NS
# SWITCHES" (ROLE fpm, nginx or init; NS: the kernel's sum_exec_runtime
# from /proc/PID/schedstat, all threads; SWITCHES: voluntary + involuntary
# context switches), for the pool, the nginx worker(s) and, for a sandbox,
# its init. Two snapshots around an h2load run give CPU per request.
declare -A INIT_OF=()
snap() { # CONF
  local p r
  {
    for p in $(pool_pids "$1"); do echo "fpm $p"; done
    for p in $(pgrep -P "$(cat "$NGINX_PID")"); do echo "nginx $p"; done
    [ -z "${INIT_OF[$1]:-}" ] || echo "init ${INIT_OF[$1]}"
  } | while read -r r p; do
    [ -r "/proc/$p/schedstat" ] || continue
    awk -v r="$r" -v p="$p" 'FNR == NR {ns = $1; next} /^(voluntary|nonvoluntary)_ctxt_switches:/ {cs += $2}
      END {print r, p, ns, cs}' "/proc/$p/schedstat" "/proc/$p/status" 2>/dev/null || true
  done
}
# The difference of two snapshots, per role: "ROLE NS SWITCHES" (a process
# born in between counts from 0).
snap_delta() { # BEFORE AFTER
  awk 'FNR == NR {ns[$2] = $3; cs[$2] = $4; next} {dn[$1] += $3 - ns[$2]; dc[$1] += $4 - cs[$2]}
    END {for (r in dn) print r, dn[r], dc[r]}' "$1" "$2"
}

# One h2load run: req/s (fails on any failed request).
h2() { # PORT CPU|- N
  local out ok two
  # shellcheck disable=SC2016 # the inner script's own $1 and $@
  out=$(timeout 600 bash -c 'c=$1; shift; if [ "$c" = - ]; then exec "$@"; else exec taskset -c "$c" "$@"; fi' _ \
    "$2" h2load --h1 -n "$3" -c "$CONC" "http://127.0.0.1:$1/hello.php" 2>&1) || { echo "$out" >&2; die "h2load on port $1 failed"; }
  ok=$(awk '/^requests:/ {print $8}' <<<"$out")
  two=$(awk '/^status codes:/ {print $3}' <<<"$out")
  [ "$ok" = "$3" ] && [ "$two" = "$3" ] || { echo "$out" >&2; die "h2load on port $1: $ok of $3 succeeded, $two 2xx"; }
  awk '/^finished in/ {print $4}' <<<"$out"
}
curl_ms() { # PORT -> ms of one request (fails unless 200)
  local r
  r=$(curl -s -o /dev/null -m 30 -w '%{http_code} %{time_total}' "http://127.0.0.1:$1/hello.php") || die "curl to port $1 failed"
  [ "${r%% *}" = 200 ] || die "curl to port $1: HTTP ${r%% *}"
  awk -v t="${r#* }" 'BEGIN {printf "%.3f\n", t * 1000}'
}


BASE=/run/corral-bench
[ -d "$BASE" ] || mkdir -m 755 "$BASE"
W=$(mktemp -d "$BASE/fpm.XXXXXX")
chmod 755 "$W"
C=$W/bin/corral
STATE=$W/state CONF=$W/config PARENT=corral/fpm-bench-$$
HOMES=$BASE/home GROUP=corral-fpmbench
NGINX_PID=$W/nginx/nginx.pid
BARE_PID='' DOC='' MADE_TMP='' MADE_GROUP=0 MADE_HOMES=0
USERS=() # memory-test users to remove
cleanup() {
  local rc=$? p
  set +e
  trap - EXIT INT TERM
  stop_nginx
  stop_bare
  for v in "${V_CG[@]}"; do stop_bcg "$v"; done
  [ -x "$C" ] && "$C" --state-dir "$STATE" --config-dir "$CONF" --cgroup-parent "$PARENT" down --all >/dev/null 2>&1
  for v in "${V_SB[@]}"; do
    [ -x "$C" ] && "$C" --state-dir "$W/v-$v/state" --config-dir "$W/v-$v/config" --cgroup-parent "$PARENT-$v" down --all >/dev/null 2>&1
  done
  for d in /sys/fs/cgroup/*/"$PARENT"-bare-cg{,q}/* /sys/fs/cgroup/"$PARENT"-bare-cg{,q}/*; do
    [ -d "$d" ] && rmdir "$d" 2>/dev/null
  done
  for d in /sys/fs/cgroup/*/"$PARENT"{,-floor,-off,-bare-cg,-bare-cgq} /sys/fs/cgroup/"$PARENT"{,-floor,-off,-bare-cg,-bare-cgq}; do
    [ -d "$d" ] && rmdir "$d" 2>/dev/null
    # corral's own parent too, once nothing is below it (as the tests do).
    rmdir "$(dirname "$d")" 2>/dev/null
  done
  if ((${#USERS[@]})); then
    log "removing ${#USERS[@]} users"
    for u in "${USERS[@]}"; do
      userdel "$u" >/dev/null 2>&1 || echo "fpm.sh: cleanup: userdel $u failed" >&2
      rm -rf "${HOMES:?}/$u"
    done
  fi
  ((MADE_HOMES)) && rmdir "$HOMES" 2>/dev/null
  ((MADE_GROUP)) && { groupdel "$GROUP" || echo "fpm.sh: cleanup: groupdel $GROUP failed" >&2; }
  [ -n "$DOC" ] && rm -rf "$DOC"
  [ -n "$MADE_TMP" ] && rm -rf "$MADE_TMP"
  rm -rf "$W"
  rmdir "$BASE" 2>/dev/null # only when empty: never another run's work
  for p in $(jobs -p); do echo "fpm.sh: cleanup: left job $p" >&2; done
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "$W/bin" "$CONF/tenants" "$W/sock" "$W/log" "$W/nginx" "$W/bare" "$W/bare-cg" "$W/bare-cgq" "$W/tmp" "$W/out"
for v in "${V_SB[@]}"; do mkdir -p "$W/v-$v/config/tenants" "$W/v-$v/sock" "$W/v-$v/log"; done
chmod 755 "$W"/* # nginx (www-data) reaches the sockets; corral wants root-owned, not group/other-writable dirs
cp "$SRC_CORRAL" "$W/bin/corral"
cp "$SRC_INIT" "$W/bin/corral-init"
# corral execs the full CLI next to it (builds before the split have none).
[ ! -e "$(dirname "$SRC_CORRAL")/corral-cli" ] || cp "$(dirname "$SRC_CORRAL")/corral-cli" "$W/bin/corral-cli"
export CORRAL_INIT=$W/bin/corral-init
CR=("$C" --state-dir "$STATE" --config-dir "$CONF" --cgroup-parent "$PARENT")
corral() { "${CR[@]}" "$@"; }
# The corral instance of a variant (floor, off); "s": the main one.
corral_of() { # VARIANT ARGS...
  local v=$1
  shift
  if [ "$v" = s ]; then corral "$@"; else "$C" --state-dir "$W/v-$v/state" --config-dir "$W/v-$v/config" --cgroup-parent "$PARENT-$v" "$@"; fi
}
# The floor variant's wrapper (bench/c/floor-exec.c), bound at FLOOR_IN
# inside the sandbox.
FLOOR_IN=/etc/corral-bench-floor-exec
if [[ " ${V_SB[*]} " == *" floor "* ]]; then
  command -v cc >/dev/null || die "missing tools: cc (Debian package gcc), for --variants floor"
  cc -O2 -static -o "$W/bin/floor-exec" "$(dirname "$0")/c/floor-exec.c" 2>/dev/null ||
    cc -O2 -o "$W/bin/floor-exec" "$(dirname "$0")/c/floor-exec.c" || die "cannot build bench/c/floor-exec.c"
fi

label() { case $1 in s) echo corral ;; b) echo bare ;; *) echo "$1" ;; esac; }
RES_TP=() RES_VAR=() RES_CPU=() RES_COLD='' RES_MEM='' LIMITS_CPU='' PAGE_S='' PAGE_B=

#######################################################################
# Throughput and cold start
if ((DO_TP || DO_COLD)); then
  THOME=$(getent passwd "$TENANT" | cut -d: -f6)
  TGROUP=$(id -gn "$TENANT")
  [ -d "$THOME" ] || die "$TENANT's home $THOME does not exist (the default profile binds it)"
  # The page, in the tenant's home (which the sandbox binds at the same path),
  # removed at the end.
  DOC=$(mktemp -d "$THOME/.corral-fpm-bench.XXXXXX")
  printf '%s\n' '<?php echo "hello ", getmypid(), " ", gethostname(), "\n";' >"$DOC/hello.php"
  chmod 755 "$DOC"
  chmod 644 "$DOC/hello.php"
  chown -R "$TENANT:$TGROUP" "$DOC"
  # corral makes the tenant's /tmp dir when missing; remove it then.
  tmpdir=/var/lib/corral/tmp/$TENANT
  [ -e "$tmpdir" ] || MADE_TMP=$tmpdir
  extra=
  [ -n "$CPU_LIMIT" ] && extra=$(printf '[limits]\ncpu = "%s"\n' "$CPU_LIMIT")
  [ -n "$EXTRA" ] && extra=$(printf '%s\n%s\n' "$extra" "$EXTRA")
  tenant_file "$TENANT" with "$extra"
  corral check --tenant "$TENANT" >/dev/null || die "corral check --tenant $TENANT failed"
  for v in "${V_SB[@]}"; do
    tenant_file "$TENANT" with "$extra" "$v"
    corral_of "$v" check --tenant "$TENANT" >/dev/null || die "corral check --tenant $TENANT of variant $v failed"
  done
  # The hierarchies the bare-cg pool joins: those corral puts tenants in.
  CG_HIER=()
  if ((${#V_CG[@]})); then
    if [ -f /sys/fs/cgroup/cgroup.controllers ]; then CG_HIER=(/sys/fs/cgroup); else
      for h in cpu cpuacct memory pids blkio freezer; do
        [ -d "/sys/fs/cgroup/$h" ] || continue
        d=$(readlink -f "/sys/fs/cgroup/$h")
        [[ " ${CG_HIER[*]} " == *" $d "* ]] || CG_HIER+=("$d")
      done
    fi
  fi
  cat >"$W/bare/php-fpm.conf" <<EOF
[global]
pid = $W/bare/php-fpm.pid
error_log = $W/bare/php-fpm.log
daemonize = no

[www]
user = $TENANT
group = $TGROUP
listen = $W/bare/php.sock
listen.owner = root
listen.group = www-data
listen.mode = 0660
$(pool_settings)
EOF
  for v in "${V_CG[@]}"; do sed "s|$W/bare/|$W/$v/|g" "$W/bare/php-fpm.conf" >"$W/$v/php-fpm.conf"; done
  PORT_S=$(free_port)
  PORT_B=$(free_port)
  while [ "$PORT_B" = "$PORT_S" ]; do PORT_B=$(free_port); done
  # The variants' ports and sockets, and every configuration in the rounds.
  declare -A VPORT=([s]=$PORT_S [b]=$PORT_B) VSOCK=([s]=$W/sock/$TENANT.sock [b]=$W/bare/php.sock)
  CONFS=(s b)
  for v in "${V_SB[@]}" "${V_CG[@]}"; do
    p=$(free_port)
    while [[ " ${VPORT[*]} " == *" $p "* ]]; do p=$(free_port); done
    VPORT[$v]=$p
    if [[ $v == bare-* ]]; then VSOCK[$v]=$W/$v/php.sock; else VSOCK[$v]=$W/v-$v/sock/$TENANT.sock; fi
    CONFS+=("$v")
  done
  {
    cat <<EOF
user www-data;
worker_processes 1;
pid $NGINX_PID;
error_log $W/nginx/error.log;
events { worker_connections 1024; }
http {
  access_log off;
EOF
    for m in "${CONFS[@]}"; do
      cat <<EOF
  server {
    listen 127.0.0.1:${VPORT[$m]};
    root $DOC;
    location ~ \.php\$ {
      include /etc/nginx/fastcgi_params;
      fastcgi_param SCRIPT_FILENAME \$document_root\$fastcgi_script_name;
      fastcgi_pass unix:${VSOCK[$m]};
    }
  }
EOF
    done
    echo "}"
  } >"$W/nginx/nginx.conf"
  nginx -t -q -c "$W/nginx/nginx.conf" -e "$W/nginx/error.log" || die "nginx -t failed"

  setups=("unpinned - -")
  (($(nproc) >= 2)) && setups+=("pinned 0 1")
  ((DO_TP)) || setups=("unpinned - -")
  WARM=$((REQUESTS / 5 < 200 ? 200 : REQUESTS / 5))
  for s in "${setups[@]}"; do
    read -r name scpu ccpu <<<"$s"
    log "$name: nginx, bare php-fpm, sandbox of $TENANT (server CPU $scpu, client CPU $ccpu)"
    start_nginx "$scpu"
    start_bare "$scpu"
    corral down "$TENANT" >/dev/null 2>&1 || true
    on_cpu "$scpu" "${CR[@]}" up "$TENANT" >/dev/null
    [ -S "$W/sock/$TENANT.sock" ] || die "corral up did not make $W/sock/$TENANT.sock"
    st=$(svc_state "$TENANT")
    [ "$st" = "waiting null" ] || die "$TENANT: service php is '$st' after up (expected 'waiting null')"
    [ -n "$LIMITS_CPU" ] || LIMITS_CPU=$(corral limits show "$TENANT" | awk '$1 == "cpu" {print $2}')
    # First requests: the sandbox's is a socket-activated start.
    first=$(curl_ms "$PORT_S")
    PAGE_S=$(curl -s -m 10 "http://127.0.0.1:$PORT_S/hello.php")
    PAGE_B=$(curl -s -m 10 "http://127.0.0.1:$PORT_B/hello.php")
    log "$name: first request to the sandbox ${first} ms; pages: sandbox '$PAGE_S', bare '$PAGE_B'"
    [ "$(svc_state "$TENANT" | cut -d' ' -f1)" = running ] || die "$TENANT: service php not running after a request"
    [[ $PAGE_S == "hello "* && $PAGE_B == "hello "* ]] || die "unexpected pages: '$PAGE_S' / '$PAGE_B'"
    if ((DO_TP)); then
      # The variants: their sandboxes (first request starts their FPM) and
      # the bare pool in its cgroup.
      for v in "${V_CG[@]}"; do start_bcg "$v" "$scpu"; done
      for v in "${V_SB[@]}"; do
        corral_of "$v" down "$TENANT" >/dev/null 2>&1 || true
        on_cpu "$scpu" "$C" --state-dir "$W/v-$v/state" --config-dir "$W/v-$v/config" --cgroup-parent "$PARENT-$v" up "$TENANT" >/dev/null
      done
      for m in "${CONFS[@]:2}"; do
        pg=$(curl -s -m 30 "http://127.0.0.1:${VPORT[$m]}/hello.php") || die "variant $m: no page"
        [[ $pg == "hello "* ]] || die "variant $m: unexpected page '$pg'"
      done
      # Pinned: the sandbox's PHP-FPM onto the server CPU. The init (and so
      # every service it starts) deliberately forgets the affinity of the
      # process that brought it up (spawn::neutral_attributes), so `taskset
      # -c 0 corral up` alone left the pool on every CPU while the bare pool
      # had one. The master is pinned with its workers; workers forked later
      # inherit the master's CPU.
      if [ "$scpu" != - ]; then
        for par in "$PARENT" "${V_SB[@]/#/$PARENT-}"; do
          mapfile -t spids < <(sandbox_fpm_pids "$par")
          ((${#spids[@]})) || die "no php-fpm process found in $par/$TENANT to pin"
          for p in "${spids[@]}"; do taskset -p -c "$scpu" "$p" >/dev/null || die "taskset -p -c $scpu $p failed"; done
        done
      fi
      for m in "${CONFS[@]}"; do h2 "${VPORT[$m]}" "$ccpu" "$WARM" >/dev/null; done
      # What is pinned, as the kernel sees it (after the warm-up, with workers).
      mapfile -t spids < <(sandbox_fpm_pids)
      mapfile -t bpids < <(bare_fpm_pids)
      ((${#spids[@]})) || die "no php-fpm process found in $TENANT's cgroup"
      aff="sandbox fpm CPUs $(cpus_of "${spids[@]}") (${#spids[@]} procs), bare fpm CPUs $(cpus_of "${bpids[@]}") (${#bpids[@]} procs), nginx CPUs $(cpus_of "$(cat "$NGINX_PID")" $(pgrep -P "$(cat "$NGINX_PID")"))"
      log "$name: $aff"
      if [ "$scpu" != - ]; then
        [ "$(cpus_of "${spids[@]}")" = "$scpu" ] && [ "$(cpus_of "${bpids[@]}")" = "$scpu" ] ||
          die "$name: the pools are not both on CPU $scpu: $aff"
      fi
      log "$name: corral's FPM: $(sec_of "${spids[@]}"); bare FPM: $(sec_of "${bpids[@]}")"
      for m in "${CONFS[@]:2}"; do
        mapfile -t vp < <(pool_pids "$m")
        ((${#vp[@]})) || die "variant $m: no php-fpm process"
        [ "$scpu" = - ] || [ "$(cpus_of "${vp[@]}")" = "$scpu" ] || die "$name: variant $m's pool is on CPUs $(cpus_of "${vp[@]}"), not $scpu"
        q=
        [ "$m" = bare-cgq ] && q=", CPU quota $(cg_quota "$PARENT-$m/$TENANT") (the tenant's: $(cg_quota "$PARENT/$TENANT"))"
        log "$name: $m's FPM: CPUs $(cpus_of "${vp[@]}") (${#vp[@]} procs), $(sec_of "${vp[@]}")$q"
      done
      for m in "${CONFS[@]}"; do : >"$W/out/$name.$m"; : >"$W/out/$name.$m.cpu"; done
      # Each pool's master: the same one must serve every round (no restart).
      declare -A MASTER=()
      for m in "${CONFS[@]}"; do MASTER[$m]=$(pool_master "$m"); done
      INIT_OF=()
      for m in s "${V_SB[@]}"; do INIT_OF[$m]=$(corral_of "$m" ls --json | jq -r '.[0].pid'); done
      n=${#CONFS[@]}
      for i in $(seq "$ROUNDS"); do
        # Each round starts at the next configuration (a rotation: over n
        # rounds each one runs once in every position; with two, the order
        # alternates).
        order=()
        for ((k = 0; k < n; k++)); do order+=("${CONFS[$(((i - 1 + k) % n))]}"); done
        for m in "${order[@]}"; do
          snap "$m" >"$W/out/snap.0"
          if [ -n "$PERF_DIR" ] && ((i == ROUNDS)); then
            perf record -q -e cpu-clock -a -g -o "$PERF_DIR/$name.$(label "$m").data" -- \
              bash -c "$(declare -f h2 die); CONC=$CONC; h2 ${VPORT[$m]} $ccpu $REQUESTS" >>"$W/out/$name.$m" 2>"$W/out/perf.err" ||
              die "perf record failed: $(tail -3 "$W/out/perf.err")"
          else
            h2 "${VPORT[$m]}" "$ccpu" "$REQUESTS" >>"$W/out/$name.$m"
          fi
          snap "$m" >"$W/out/snap.1"
          snap_delta "$W/out/snap.0" "$W/out/snap.1" >>"$W/out/$name.$m.cpu"
        done
        line=
        for m in "${CONFS[@]}"; do line+=" $(label "$m") $(tail -1 "$W/out/$name.$m"),"; done
        log "$name: round $i/$ROUNDS (req/s):${line%,}"
        for m in "${CONFS[@]}"; do
          mapfile -t vp < <(pool_pids "$m")
          [ "$(pool_master "$m")" = "${MASTER[$m]}" ] ||
            die "$name: round $i: $(label "$m")'s PHP-FPM master is no longer ${MASTER[$m]} (restarted?)"
          [ "$scpu" = - ] || [ "$(cpus_of "${vp[@]}")" = "$scpu" ] ||
            die "$name: round $i: $(label "$m")'s pool is on CPUs $(cpus_of "${vp[@]}"), not $scpu"
        done
      done
      thr=$(throttled)
      [ -n "$thr" ] && aff="$aff; sandbox cgroup CPU throttling since up: $thr"
      ms=$(median <"$W/out/$name.s")
      mb=$(median <"$W/out/$name.b")
      RES_TP+=("$name $ms $mb $(minmax <"$W/out/$name.s") $(minmax <"$W/out/$name.b") $(paste -sd, "$W/out/$name.s") $(paste -sd, "$W/out/$name.b")|$aff")
      # System calls per request of each pool (a run of its own: the
      # tracepoint costs the traced pool).
      for m in "${CONFS[@]}"; do
        sc=nan
        if ((SYSCALLS)); then
          perf stat -x, -e raw_syscalls:sys_enter -o "$W/out/perf.stat" -p "$(pool_pids "$m" | paste -sd, -)" -- \
            bash -c "$(declare -f h2 die); CONC=$CONC; h2 ${VPORT[$m]} $ccpu $REQUESTS" >/dev/null 2>"$W/out/perf.err" ||
            die "perf stat failed: $(tail -3 "$W/out/perf.err")"
          sc=$(awk -F, -v n="$REQUESTS" '/raw_syscalls:sys_enter/ {printf "%.1f", $1 / n}' "$W/out/perf.stat")
          log "$name: $(label "$m"): $sc system calls per request (PHP-FPM)"
        fi
        RES_CPU+=("$name $m $sc $(awk -v n=$((ROUNDS * REQUESTS)) '{ns[$1] += $2; cs[$1] += $3}
          END {printf "%.2f %.3f %.2f %.3f %.3f %.4f\n", ns["fpm"] / n / 1e3, cs["fpm"] / n, ns["nginx"] / n / 1e3, cs["nginx"] / n, ns["init"] / n / 1e3, cs["init"] / n}' "$W/out/$name.$m.cpu")")
      done
      for m in "${CONFS[@]:2}"; do
        RES_VAR+=("$name $m $(median <"$W/out/$name.$m") $mb $(minmax <"$W/out/$name.$m") $(paste -sd, "$W/out/$name.$m")")
      done
      for v in "${V_CG[@]}"; do stop_bcg "$v"; done
      for v in "${V_SB[@]}"; do corral_of "$v" down "$TENANT" >/dev/null; done
    fi
    if ((DO_COLD)) && [ "$name" = unpinned ]; then
      : >"$W/out/cold"
      : >"$W/out/warm.s"
      : >"$W/out/warm.b"
      for i in $(seq "$COLD"); do
        corral service stop "$TENANT" php >/dev/null
        wait_waiting "$TENANT"
        sleep 0.2
        curl_ms "$PORT_S" >>"$W/out/cold"
        [ "$(svc_state "$TENANT" | cut -d' ' -f1)" = running ] || die "$TENANT: service php not running after a cold request"
        log "cold $i/$COLD: $(tail -1 "$W/out/cold") ms"
      done
      # Warm: the same single request to a running pool, both sides warmed
      # up first (right after a cold start PHP-FPM ondemand forks again for
      # the next request: its idle count is only updated once a second).
      h2 "$PORT_S" - "$WARM" >/dev/null
      h2 "$PORT_B" - "$WARM" >/dev/null
      for i in $(seq "$COLD"); do
        curl_ms "$PORT_S" >>"$W/out/warm.s"
        curl_ms "$PORT_B" >>"$W/out/warm.b"
      done
      RES_COLD="$(median <"$W/out/cold") $(minmax <"$W/out/cold" | cut -d' ' -f2) $(median <"$W/out/warm.s") $(minmax <"$W/out/warm.s" | cut -d' ' -f2) $(median <"$W/out/warm.b") $(minmax <"$W/out/warm.b" | cut -d' ' -f2)"
    fi
  done
  stop_nginx
  stop_bare
  corral down "$TENANT" >/dev/null
fi

#######################################################################
# Memory of idle tenants
if ((DO_MEM)); then
  K=$TENANTS N2=$((2 * TENANTS))
  if ! getent group "$GROUP" >/dev/null; then groupadd "$GROUP"; MADE_GROUP=1; fi
  if [ ! -d "$HOMES" ]; then mkdir -m 755 "$HOMES"; MADE_HOMES=1; fi
  log "memory: $N2 users (useradd, about 60 ms each)"
  WITH=() WITHOUT=()
  for i in $(seq "$N2"); do
    u=$(printf 'corral-f%05d' "$i")
    h=$HOMES/$u
    if old=$(getent passwd "$u"); then
      # Left by a killed run: reused only when it is recognisably ours.
      [ "$(cut -d: -f6 <<<"$old")" = "$h" ] || die "user $u exists with home $(cut -d: -f6 <<<"$old") (not $h): not this script's; remove it first"
    else
      useradd -M -N -l -g "$GROUP" -d "$h" -s /usr/sbin/nologin "$u"
    fi
    USERS+=("$u") # registered before its home: a failure still removes it
    mkdir -p "$h"
    chown "$u:$GROUP" "$h"
    chmod 700 "$h"
    # shellcheck disable=SC2016 # $USER is corral's profile variable
    tmp=$(printf '[tmp]\nkind = "disk"\ndir = "%s/tmp/$USER"\n' "$W")
    if ((i <= K)); then WITH+=("$u"); tenant_file "$u" with "$tmp"; else WITHOUT+=("$u"); tenant_file "$u" without "$tmp"; fi
    ((i % 100)) || log "memory: $i/$N2 users"
  done
  for u in "${WITH[0]}" "${WITHOUT[0]}"; do
    corral check --tenant "$u" >/dev/null || die "corral check --tenant $u failed"
  done
  up_set() { # NAME...: corral up, 100 at a time
    local a=("$@") j
    for ((j = 0; j < ${#a[@]}; j += 100)); do corral up "${a[@]:j:100}" >/dev/null; done
  }
  down_set() {
    local a=("$@") j
    for ((j = 0; j < ${#a[@]}; j += 100)); do corral down "${a[@]:j:100}" >/dev/null; done
  }
  log "memory: unmeasured pass (up and down of all $N2)"
  up_set "${WITH[@]}" "${WITHOUT[@]}"
  down_set "${WITH[@]}" "${WITHOUT[@]}"
  # One line per pass and set, per tenant: pass set up_ms kernel unreclaimable tmpfs used pss rss
  : >"$W/out/mem"
  RESIDENT=0 FPM_PROCS=0 NOT_WAITING=0
  for pass in 1 2; do
    if ((pass == 1)); then order="without with"; else order="with without"; fi
    sleep 2
    cp /proc/meminfo "$W/out/m.before"
    for which in $order; do
      if [ "$which" = with ]; then list=("${WITH[@]}"); else list=("${WITHOUT[@]}"); fi
      t0=$(now_ms)
      up_set "${list[@]}"
      t1=$(now_ms)
      sleep 2 # let the per-CPU counters of /proc/meminfo settle
      cp /proc/meminfo "$W/out/m.after"
      awk -v n="$K" -v d=$((t1 - t0)) 'FNR == NR {a[$1] = $2; next} {b[$1] = $2} END {
        split("SUnreclaim: SReclaimable: KernelStack: PageTables: Percpu:", f, " ")
        kern = 0; unrecl = 0
        for (i in f) { x = b[f[i]] - a[f[i]]; if (x > 0) { kern += x; if (f[i] != "SReclaimable:") unrecl += x } }
        tmp = b["Shmem:"] - a["Shmem:"]; if (tmp < 0) tmp = 0
        used = (b["MemTotal:"] - b["MemAvailable:"]) - (a["MemTotal:"] - a["MemAvailable:"])
        printf "%.2f %.1f %.1f %.1f %.1f\n", d / n, kern / n, unrecl / n, tmp / n, used / n }' \
        "$W/out/m.before" "$W/out/m.after" >"$W/out/delta.$which"
      mv "$W/out/m.after" "$W/out/m.before"
    done
    # The inits' PSS and RSS, all 2K up (a PSS depends on how many map a page).
    corral ls --json | jq -r '.[] | "\(.tenant) \(.pid) \(.processes)"' >"$W/out/ls"
    [ "$(wc -l <"$W/out/ls")" = "$N2" ] || die "corral ls lists $(wc -l <"$W/out/ls") tenants, expected $N2"
    while read -r u pid procs; do
      [ "$procs" = 1 ] || RESIDENT=$((RESIDENT + procs - 1))
      which=without
      ((10#${u#corral-f} <= K)) && which=with
      awk -v s="$which" '/^Rss:/ {r = $2} /^Pss:/ {p = $2} END {print s, p, r}' "/proc/$pid/smaps_rollup"
    done <"$W/out/ls" >"$W/out/pss"
    for which in with without; do
      echo "$pass $which $(cat "$W/out/delta.$which") $(awk -v s="$which" '$1 == s {p += $2; r += $3; n++} END {printf "%.1f %.1f", p / n, r / n}' "$W/out/pss")" >>"$W/out/mem"
    done
    # Nothing of the tenants runs but their inits.
    n=$(pgrep -c -G "$GROUP" php-fpm || true)
    FPM_PROCS=$((FPM_PROCS > n ? FPM_PROCS : n))
    corral service ls "${WITH[@]}" --json >"$W/out/svc"
    [ "$(jq length "$W/out/svc")" = "$K" ] || die "corral service ls lists $(jq length "$W/out/svc") services for $K tenants with one each"
    n=$(jq '[.[] | select(.state != "waiting" or .pid != null)] | length' "$W/out/svc")
    NOT_WAITING=$((NOT_WAITING + n))
    log "memory: pass $pass ($order), per tenant: $(awk -v p="$pass" '$1 == p {printf "%s: up %s ms, kernel %s KiB (unreclaimable %s), tmpfs %s, used %s, init PSS %s; ", $2, $3, $4, $5, $6, $7, $8}' "$W/out/mem")"
    log "memory: pass $pass: $(pgrep -c -G "$GROUP" || true) processes with the tenants' group, $RESIDENT besides the inits, $n services not waiting"
    down_set "${WITH[@]}" "${WITHOUT[@]}"
  done
  # Means over the passes, per set: up_ms kernel unreclaimable tmpfs used pss rss total
  for which in with without; do
    awk -v s="$which" '$2 == s {for (i = 3; i <= 9; i++) a[i] += $i; n++}
      END {for (i = 3; i <= 9; i++) a[i] /= n; printf "%.2f %.1f %.1f %.1f %.1f %.1f %.1f %.1f\n", a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[8] + a[4] + a[6]}' \
      "$W/out/mem" >"$W/out/mem.$which"
  done
  RES_MEM="$(cat "$W/out/mem.with") $(cat "$W/out/mem.without")"
fi

#######################################################################
# Summary
verdict() { awk -v v="$1" -v t="$2" -v op="$3" 'BEGIN {if (v == "nan") print "n/a"; else if ((op == "ge" && v >= t) || (op == "le" && v <= t)) print "met"; else print "MISSED"}'; }
summary() {
  echo "bench/fpm.sh: tenant $TENANT, pm $PM (max_children $CHILDREN), php-fpm $PHP_FPM, requests $REQUESTS, concurrency $CONC, rounds $ROUNDS, cold $COLD, tenants $TENANTS per set"
  echo "corral $SRC_CORRAL ($("$C" --version 2>/dev/null)), $(nproc) CPUs, kernel $(uname -r), sandbox cpu limit ${LIMITS_CPU:-n/a}"
  [ -z "$EXTRA" ] || echo "added to $TENANT's override: $(tr '\n' ' ' <<<"$EXTRA")"
  if ((${#RES_TP[@]})); then
    echo
    printf '%-9s %26s %26s %8s %s\n' "throughput" "sandbox req/s (min..max)" "bare req/s (min..max)" "ratio" "target >= 0.97"
    for r in "${RES_TP[@]}"; do
      read -r name ms mb smin smax bmin bmax _ _ <<<"${r%%|*}"
      ratio=$(awk -v a="$ms" -v b="$mb" 'BEGIN {printf "%.3f", a / b}')
      printf '%-9s %26s %26s %8s %s\n' "$name" "$(printf '%.0f (%.0f..%.0f)' "$ms" "$smin" "$smax")" \
        "$(printf '%.0f (%.0f..%.0f)' "$mb" "$bmin" "$bmax")" "$ratio" "$(verdict "$ratio" 0.97 ge)"
    done
    for r in "${RES_TP[@]}"; do echo "  ${r%% *}: ${r#*|}"; done
    echo
    echo "CPU per request over the rounds (µs of sum_exec_runtime; switches: context switches per request)"
    printf '%-9s %-8s %8s %9s %8s %9s %8s %9s %9s\n' "" "" "fpm µs" switches "nginx µs" switches "init µs" switches syscalls
    for r in "${RES_CPU[@]}"; do
      read -r name m sc a b c d e f <<<"$r"
      printf '%-9s %-8s %8s %9s %8s %9s %8s %9s %9s\n' "$name" "$(label "$m")" "$a" "$b" "$c" "$d" "$e" "$f" "$sc"
    done
    if ((${#RES_VAR[@]})); then
      echo
      printf '%-9s %-8s %26s %8s\n' "variants" "" "req/s (min..max)" "÷ bare"
      for r in "${RES_VAR[@]}"; do
        read -r name m mv mb vmin vmax _ <<<"$r"
        printf '%-9s %-8s %26s %8s\n' "$name" "$m" "$(printf '%.0f (%.0f..%.0f)' "$mv" "$vmin" "$vmax")" \
          "$(awk -v a="$mv" -v b="$mb" 'BEGIN {printf "%.3f", a / b}')"
      done
    fi
  fi
  if [ -n "$RES_COLD" ]; then
    read -r cmed cmax wmed wmax bmed bmax <<<"$RES_COLD"
    echo
    printf '%-26s %9s %9s %4s %s\n' "request time (ms)" median max n "target"
    printf '%-26s %9.2f %9.2f %4d %s\n' "cold (socket activation)" "$cmed" "$cmax" "$COLD" "<= 150: $(verdict "$cmed" 150 le)"
    printf '%-26s %9.2f %9.2f %4d\n' "warm, sandbox" "$wmed" "$wmax" "$COLD"
    printf '%-26s %9.2f %9.2f %4d\n' "warm, bare" "$bmed" "$bmax" "$COLD"
  fi
  if [ -n "$RES_MEM" ]; then
    read -r -a v <<<"$RES_MEM" # with: 0..7, without: 8..15 (up kernel unrecl tmpfs used pss rss total)
    diff=$(awk -v a="${v[7]}" -v b="${v[15]}" 'BEGIN {printf "%.1f", a - b}')
    echo
    echo "memory per idle tenant (KiB; $TENANTS tenants per set, mean of 2 passes; total = init PSS + kernel + tmpfs)"
    printf '%-14s %7s %8s %8s %8s %8s %7s %8s %11s\n' "" "up ms" "init PSS" "init RSS" kernel "(unrecl)" tmpfs total "used(avail)"
    row() { printf '%-14s %7s %8.1f %8.1f %8.1f %8.1f %7.1f %8.1f %11.1f %s\n' "$@"; }
    row "with service" "${v[0]}" "${v[5]}" "${v[6]}" "${v[1]}" "${v[2]}" "${v[3]}" "${v[7]}" "${v[4]}" ""
    row "without" "${v[8]}" "${v[13]}" "${v[14]}" "${v[9]}" "${v[10]}" "${v[11]}" "${v[15]}" "${v[12]}" ""
    d() { awk -v a="${v[$1]}" -v b="${v[$(($1 + 8))]}" 'BEGIN {printf "%.2f", a - b}'; }
    row "difference" "$(d 0)" "$(d 5)" "$(d 6)" "$(d 1)" "$(d 2)" "$(d 3)" "$diff" "$(d 4)" "  target <= 50: $(verdict "$diff" 50 le)"
    echo "php-fpm processes of the idle tenants: $FPM_PROCS; services not waiting: $NOT_WAITING; processes besides the inits: $RESIDENT (target: 0: $( ((FPM_PROCS + NOT_WAITING + RESIDENT == 0)) && echo met || echo MISSED))"
  fi
}
json() {
  local tp='[]' cold=null mem=null r var='[]' cpu='[]'
  for r in "${RES_TP[@]}"; do
    read -r name ms mb _ _ _ _ sl bl <<<"${r%%|*}"
    tp=$(jq -c --arg n "$name" --argjson ms "$ms" --argjson mb "$mb" --argjson s "[$sl]" --argjson b "[$bl]" --arg aff "${r#*|}" \
      '. + [{setup: $n, sandbox_rps: $ms, bare_rps: $mb, ratio: ($ms / $mb * 1000 | round / 1000), target: 0.97, met: ($ms / $mb >= 0.97), sandbox_rounds: $s, bare_rounds: $b, affinity: $aff}]' <<<"$tp")
  done
  for r in "${RES_VAR[@]}"; do
    read -r name m mv mb _ _ vl <<<"$r"
    var=$(jq -c --arg n "$name" --arg m "$m" --argjson mv "$mv" --argjson mb "$mb" --argjson l "[$vl]" \
      '. + [{setup: $n, variant: $m, rps: $mv, bare_rps: $mb, ratio: ($mv / $mb * 1000 | round / 1000), rounds: $l}]' <<<"$var")
  done
  for r in "${RES_CPU[@]}"; do
    read -r name m sc a b c d e f <<<"$r"
    [ "$sc" = nan ] && sc=null
    cpu=$(jq -c --arg n "$name" --arg m "$(label "$m")" --argjson sc "$sc" --argjson a "$a" --argjson b "$b" --argjson c "$c" --argjson d "$d" --argjson e "$e" --argjson f "$f" \
      '. + [{setup: $n, config: $m, fpm_us: $a, fpm_switches: $b, nginx_us: $c, nginx_switches: $d, init_us: $e, init_switches: $f, fpm_syscalls: $sc}]' <<<"$cpu")
  done
  if [ -n "$RES_COLD" ]; then
    read -r cmed cmax wmed wmax bmed bmax <<<"$RES_COLD"
    cold=$(jq -nc --argjson a "$cmed" --argjson b "$cmax" --argjson c "$wmed" --argjson d "$wmax" --argjson e "$bmed" --argjson f "$bmax" \
      --argjson cs "[$(paste -sd, "$W/out/cold")]" \
      '{cold_median_ms: $a, cold_max_ms: $b, warm_sandbox_median_ms: $c, warm_sandbox_max_ms: $d, warm_bare_median_ms: $e, warm_bare_max_ms: $f, cold_ms: $cs, target_ms: 150, met: ($a <= 150)}')
  fi
  if [ -n "$RES_MEM" ]; then
    mem=$(jq -nc --argjson v "[$(tr ' ' , <<<"$RES_MEM")]" \
      --argjson fpm "$FPM_PROCS" --argjson nw "$NOT_WAITING" --argjson res "$RESIDENT" \
      'def s($o): {up_ms: $v[$o], kernel_kib: $v[$o+1], kernel_unreclaimable_kib: $v[$o+2], tmpfs_kib: $v[$o+3], used_kib: $v[$o+4], init_pss_kib: $v[$o+5], init_rss_kib: $v[$o+6], total_kib: $v[$o+7]};
       {tenants_per_set: '"$TENANTS"', with_service: s(0), without: s(8), difference_kib: (($v[7] - $v[15]) * 10 | round / 10), target_kib: 50, met: ($v[7] - $v[15] <= 50),
        fpm_processes: $fpm, services_not_waiting: $nw, processes_besides_inits: $res}')
  fi
  jq -n --argjson tp "$tp" --argjson var "$var" --argjson cpu "$cpu" --argjson cold "$cold" --argjson mem "$mem" \
    --arg tenant "$TENANT" --arg pm "$PM" --argjson children "$CHILDREN" --argjson requests "$REQUESTS" \
    --argjson conc "$CONC" --argjson rounds "$ROUNDS" --argjson ncold "$COLD" --argjson tenants "$TENANTS" \
    --arg corral "$SRC_CORRAL" --arg php_fpm "$PHP_FPM" --arg cpu "${LIMITS_CPU:-}" --arg extra "$EXTRA" \
    '{params: {tenant: $tenant, pm: $pm, max_children: $children, requests: $requests, concurrency: $conc, rounds: $rounds, cold: $ncold, tenants: $tenants, corral: $corral, php_fpm: $php_fpm, sandbox_cpu_limit: $cpu, profile_extra: $extra},
      throughput: $tp, variants: $var, cpu_per_request: $cpu, cold_start: $cold, memory: $mem}'
}
if ((JSON)); then
  summary >&2
  json
else
  echo
  summary
fi
