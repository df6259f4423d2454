#!/usr/bin/env bash
# A network of its own per tenant (net = "private", the default) against the
# server's own network (net = "host"). Four measurements:
#
#   up       `corral up` then `corral down` of one tenant, R times per mode,
#            interleaved; median ms of the up.
#   rate     HTTP/1.1 GETs of a 6-byte file from nginx in a stand-in
#            "internet" (a network namespace made here, veth 198.51.100.0/30,
#            TEST-NET-2: nothing leaves the machine), `h2load --h1 -n N -c C`
#            (keep-alive) and the same with `Connection: close` (one TCP
#            connection per request: the per-connection cost of conntrack,
#            NAT and the routed veth), from the host and from inside a private
#            sandbox (`corral run T -- h2load ...`), interleaved, median
#            req/s of the rounds; ratio sandbox/host.
#   memory   K idle tenants up with net = "private", then the same K with
#            net = "host": per tenant, KiB, delta of the kernel's share
#            (Slab + KernelStack + PageTables + Percpu) and of
#            MemTotal - MemAvailable (noisy on a shared machine).
#   scale    the median `corral up` of the first 10 tenants and of the last
#            10 of K (the nftables rules do not grow per tenant; leases are
#            O(1)).
#
# --pin runs nginx on CPU 0 and every h2load client (host and sandboxes) on
# CPU 1 (`taskset`), so that the client and the server never share a CPU
# and the scheduler does not move them between rounds; without it both
# float. NET_BENCH_SKIP_MEMORY=1 measures up and rate only.
#
# Usage: bench/net.sh [--rounds R] [--requests N] [--concurrency C]
#                     [--tenants K] [--corral PATH] [--pin]     (as root)
# Tenants are users made here (corral-n0001..., group corral-netbench, homes
# under the work dir) and removed at the end, with the namespace, nginx and
# every sandbox (trap on EXIT). The tenants' nftables table stays (corral
# keeps it, like Docker's).
set -euo pipefail

R=20 N=20000 C=10 K=100 CORRAL=${CORRAL:-} PIN=0
while (($#)); do
  case $1 in
    --rounds) R=$2; shift 2 ;;
    --requests) N=$2; shift 2 ;;
    --concurrency) C=$2; shift 2 ;;
    --tenants) K=$2; shift 2 ;;
    --corral) CORRAL=$2; shift 2 ;;
    --pin) PIN=1; shift ;;
    *) echo "net.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "net.sh: run as root" >&2; exit 2; }
for t in h2load nginx ip nft taskset; do
  command -v $t >/dev/null || { echo "net.sh: $t missing (scripts/install-deps.sh)" >&2; exit 2; }
done
REPO=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "$CORRAL" ]; then
  # shellcheck source=../scripts/lib.sh
  source "$REPO/scripts/lib.sh"
  set +e +o pipefail; set -eu
  build_release >&2
fi
W=$(mktemp -d /run/corral-netbench.XXXXXX)
# nginx's workers (nobody) serve $W/www: the run dir must be searchable, or
# every request is answered 403 (the rates before 2026-11-25 15:40 were).
chmod 0755 "$W"
cp "$CORRAL" "$W/corral"; cp "${CORRAL_INIT:-$(dirname "$CORRAL")/corral-init}" "$W/corral-init"
# corral execs the full CLI next to it (builds before the split have none).
[ ! -e "$(dirname "$CORRAL")/corral-cli" ] || cp "$(dirname "$CORRAL")/corral-cli" "$W/corral-cli"
mkdir -p "$W/state" "$W/cfg" "$W/home" "$W/www"
NS=corral-netbench-$$ VH=cnb$$h GROUP=corral-netbench
USERS=()
c() { "$W/corral" --state-dir "$W/state" --config-dir "$W/cfg" "$@"; }
log() { echo "net.sh: $*" >&2; }
cleanup() {
  trap - EXIT INT TERM
  for t in $(ls "$W/state/tenants" 2>/dev/null); do c down "$t" >/dev/null 2>&1 || true; done
  [ -f "$W/nginx.pid" ] && kill "$(cat "$W/nginx.pid")" 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
  ip link del "$VH" 2>/dev/null || true
  for u in "${USERS[@]}"; do userdel "$u" >/dev/null 2>&1 || true; done
  getent group "$GROUP" >/dev/null && groupdel "$GROUP" 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

profile() { # $1 = net mode
  c profile default | sed "s|^net = \"private\".*|net = \"$1\"|" \
    | sed "s|dir = \"/var/lib/corral/tmp/\$USER\"|dir = \"$W/tmp/\$USER\"|" \
    | sed "s|src = \"/var/lib/corral/php-sessions/\$USER\"|src = \"$W/php-sessions/\$USER\"|" >"$W/cfg/profile.toml"
}
median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.2f\n", (a[NR/2]+a[NR/2+1])/2}'; }
ms_of() { local s e; s=$(date +%s%N); "$@" >/dev/null; e=$(date +%s%N); echo "scale=2; ($e-$s)/1000000" | bc; }

getent group "$GROUP" >/dev/null || groupadd "$GROUP"
mkuser() {
  local u=$1
  if ! id "$u" >/dev/null 2>&1; then
    mkdir -p "$W/home/$u"
    useradd -M -N -l -g "$GROUP" -d "$W/home/$u" -s /usr/sbin/nologin "$u"
    chown "$u:$GROUP" "$W/home/$u"
    USERS+=("$u")
  fi
}
T=corral-n0001
mkuser $T

# ---------------------------------------------------------------- up
log "up: $R x (up, down) per mode, interleaved"
: >"$W/up.host"; : >"$W/up.private"
for ((i = 0; i < R; i++)); do
  for m in host private; do
    profile $m
    ms_of c up $T >>"$W/up.$m"
    c down $T >/dev/null
  done
done
UP_HOST=$(median <"$W/up.host") UP_PRIV=$(median <"$W/up.private")

# -------------------------------------------------------------- rate
ip netns add "$NS"
ip link add "$VH" type veth peer name eth0 netns "$NS"
ip addr add 198.51.100.1/30 dev "$VH"; ip link set "$VH" up
ip -n "$NS" addr add 198.51.100.2/30 dev eth0; ip -n "$NS" link set eth0 up; ip -n "$NS" link set lo up
ip -n "$NS" route add default via 198.51.100.1
printf 'hello\n' >"$W/www/index.html"; chmod -R a+rX "$W/www"
cat >"$W/nginx.conf" <<EOF
daemon on; worker_processes 1; pid $W/nginx.pid; error_log $W/nginx.err;
events { worker_connections 4096; }
http { access_log off; server { listen 198.51.100.2:80 backlog=4096; root $W/www; } }
EOF
SRV=() CLI=()
if ((PIN)); then SRV=(taskset -c 0) CLI=(taskset -c 1); fi
ip netns exec "$NS" "${SRV[@]}" nginx -c "$W/nginx.conf"
# The same sandbox with net = "host" (same limits, seccomp, cgroup: only
# the network differs), and the private one.
T2=corral-n0002
mkuser $T2
profile host
c up $T2 >/dev/null
profile private
c up $T >/dev/null
URL=http://198.51.100.2/
# req/s of one h2load run; a run with a failed request aborts the bench
# (a rate of errors is not a rate of pages).
rps() { awk '/^finished in/ {r = $4} /^requests:/ {n = $2; ok = $8} END {if (ok != n) {print "net.sh: " n - ok " of " n " requests failed" > "/dev/stderr"; exit 1} print r}'; }
log "rate (pinned: $PIN): $((R / 4 > 2 ? R / 4 : 3)) rounds of h2load --h1 -n $N -c $C (keep-alive, then Connection: close with N/4)"
: >"$W/ka.host"; : >"$W/ka.priv"; : >"$W/cl.host"; : >"$W/cl.priv"; : >"$W/ka.sbh"; : >"$W/cl.sbh"
for ((i = 0; i < (R / 4 > 2 ? R / 4 : 3); i++)); do
  "${CLI[@]}" h2load --h1 -n "$N" -c "$C" $URL 2>&1 | rps >>"$W/ka.host"
  c run $T -- "${CLI[@]}" h2load --h1 -n "$N" -c "$C" $URL 2>&1 | rps >>"$W/ka.priv"
  "${CLI[@]}" h2load --h1 -n $((N / 4)) -c "$C" -H 'Connection: close' $URL 2>&1 | rps >>"$W/cl.host"
  c run $T -- "${CLI[@]}" h2load --h1 -n $((N / 4)) -c "$C" -H 'Connection: close' $URL 2>&1 | rps >>"$W/cl.priv"
  c run $T2 -- "${CLI[@]}" h2load --h1 -n "$N" -c "$C" $URL 2>&1 | rps >>"$W/ka.sbh"
  c run $T2 -- "${CLI[@]}" h2load --h1 -n $((N / 4)) -c "$C" -H 'Connection: close' $URL 2>&1 | rps >>"$W/cl.sbh"
done
KA_H=$(median <"$W/ka.host") KA_P=$(median <"$W/ka.priv") CL_H=$(median <"$W/cl.host") CL_P=$(median <"$W/cl.priv")
KA_S=$(median <"$W/ka.sbh") CL_S=$(median <"$W/cl.sbh")
c down $T >/dev/null; c down $T2 >/dev/null
if [ -n "${NET_BENCH_SKIP_MEMORY:-}" ]; then
  echo "| req/s | host (bare) | sandbox net=host | sandbox net=private | private/bare | private/sandbox-host |"
  echo "| --- | --- | --- | --- | --- | --- |"
  echo "| keep-alive (-n $N -c $C) | $KA_H | $KA_S | $KA_P | $(echo "scale=3; $KA_P / $KA_H" | bc) | $(echo "scale=3; $KA_P / $KA_S" | bc) |"
  echo "| Connection: close (-n $((N / 4)) -c $C) | $CL_H | $CL_S | $CL_P | $(echo "scale=3; $CL_P / $CL_H" | bc) | $(echo "scale=3; $CL_P / $CL_S" | bc) |"
  echo
  echo "corral up, median ms ($R, interleaved): net=host $UP_HOST, net=private $UP_PRIV"
  exit 0
fi

# --------------------------------------------------- memory and scale
kern() { awk '/^(Slab|KernelStack|PageTables|Percpu):/ {s+=$2} END {print s}' /proc/meminfo; }
used() { awk '/^MemTotal:/ {t=$2} /^MemAvailable:/ {a=$2} END {print t-a}' /proc/meminfo; }
log "memory/scale: $K users"
for ((i = 1; i <= K; i++)); do mkuser "$(printf 'corral-n%04d' $i)"; done
declare -A KDELTA UDELTA
for m in private host; do
  profile $m
  sync; echo 2 >/proc/sys/vm/drop_caches
  k0=$(kern) u0=$(used)
  : >"$W/scale.$m"
  for ((i = 1; i <= K; i++)); do ms_of c up "$(printf 'corral-n%04d' $i)" >>"$W/scale.$m"; done
  sleep 1
  k1=$(kern) u1=$(used)
  KDELTA[$m]=$(((k1 - k0) / K)) UDELTA[$m]=$(((u1 - u0) / K))
  for ((i = 1; i <= K; i++)); do c down "$(printf 'corral-n%04d' $i)" >/dev/null; done
done
FIRST=$(head -10 "$W/scale.private" | median) LAST=$(tail -10 "$W/scale.private" | median)
FIRST_H=$(head -10 "$W/scale.host" | median) LAST_H=$(tail -10 "$W/scale.host" | median)

ratio() { echo "scale=3; $1 / $2" | bc; }
cat <<EOF
| measurement | host | private | private/host |
| --- | --- | --- | --- |
| corral up, median ms ($R) | $UP_HOST | $UP_PRIV | $(ratio "$UP_PRIV" "$UP_HOST") |
| keep-alive req/s (h2load -n $N -c $C) | $KA_H | $KA_P | $(ratio "$KA_P" "$KA_H") |
| Connection: close req/s (-n $((N / 4)) -c $C) | $CL_H | $CL_P | $(ratio "$CL_P" "$CL_H") |
| keep-alive req/s, sandbox net=host vs private | $KA_S | $KA_P | $(ratio "$KA_P" "$KA_S") |
| Connection: close req/s, sandbox net=host vs private | $CL_S | $CL_P | $(ratio "$CL_P" "$CL_S") |
| kernel KiB per idle tenant ($K up) | ${KDELTA[host]} | ${KDELTA[private]} | +$((KDELTA[private] - KDELTA[host])) |
| MemTotal-MemAvailable KiB per tenant | ${UDELTA[host]} | ${UDELTA[private]} | +$((UDELTA[private] - UDELTA[host])) |
| corral up median ms, tenants 1-10 | $FIRST_H | $FIRST | |
| corral up median ms, tenants $((K - 9))-$K | $LAST_H | $LAST | |
EOF
