#!/usr/bin/env bash
# What the gateway's access log costs (issue 19): the same tiny static CGI
# (bench/c/helloworld.c) of one tenant through nginx (127.0.0.1, 1 worker)
# to two `corral gateway`s of the same binary, one without and one with
# `--access-log FILE`; `h2load --h1 -n N -c C` against each, interleaved
# round by round (the order alternates), both warmed up first. Prints the
# median req/s of each side, their ratio with/without, and the median of the
# rounds' own with/without ratios (each round's pair ran back to back, so
# it is the steadier figure on a shared machine); target >= 0.98. Checks that
# the access log has exactly one line per request it was sent.
#
# Usage: bench/access-log.sh [options]        (as root)
#   --rounds R        interleaved rounds (default 7)
#   --requests N      requests per h2load run (default 3000)
#   --concurrency C   h2load connections (default 10)
#   --tenant USER     the tenant (default corral-t1)
#   --corral PATH     the corral to measure (default $CORRAL_BIN, or the
#                     release build of this checkout); it and the corral-init
#                     next to it are copied first
#   --json            stdout is one JSON object; the table goes to stderr
#
# Everything lives in /run/corral-bench/accesslog.XXXXXX (state, config,
# sockets, nginx, logs) and the cgroup parent corral/bench-accesslog-PID; the
# script's program goes into the tenant's home under a unique name. All of
# it, the processes started here (by pid) and the tenant's sandbox of this
# run are removed at exit, also on failure or Ctrl-C.
set -euo pipefail

ROUNDS=7 REQUESTS=3000 CONC=10 TENANT=corral-t1 CORRAL="${CORRAL_BIN:-}" JSON=0
while (($#)); do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --requests) REQUESTS="$2"; shift 2 ;;
    --concurrency) CONC="$2"; shift 2 ;;
    --tenant) TENANT="$2"; shift 2 ;;
    --corral) CORRAL="$2"; shift 2 ;;
    --json) JSON=1; shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "access-log.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ $EUID -eq 0 ]] || { echo "access-log.sh: run as root" >&2; exit 2; }
for t in nginx h2load gcc; do
  command -v "$t" >/dev/null || { echo "access-log.sh: missing $t (scripts/install-deps.sh)" >&2; exit 2; }
done
HERE="$(cd "$(dirname "$0")" && pwd)"
if [[ -z "$CORRAL" ]]; then
  CORRAL="$HERE/../target/x86_64-unknown-linux-gnu/release/corral"
fi
[[ -x "$CORRAL" && -x "$(dirname "$CORRAL")/corral-init" ]] || {
  echo "access-log.sh: no corral (and corral-init) at $CORRAL: build with: source scripts/lib.sh; build_release" >&2; exit 2; }
HOME_DIR="$(getent passwd "$TENANT" | cut -d: -f6)"
[[ -n "$HOME_DIR" ]] || { echo "access-log.sh: no user $TENANT" >&2; exit 2; }

mkdir -p /run/corral-bench
W="$(mktemp -d /run/corral-bench/accesslog.XXXXXX)"
chmod 711 "$W"
PARENT="corral/bench-accesslog-$$"
SITE="$HOME_DIR/corral-bench-accesslog-$$"
PIDS=()
export CORRAL_STATE_DIR="$W/state" CORRAL_CONFIG_DIR="$W/config" CORRAL_CGROUP_PARENT="$PARENT"
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  "$W/corral" down --all >/dev/null 2>&1 || true
  rm -rf "$SITE" "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cp "$CORRAL" "$W/corral"
cp "$(dirname "$CORRAL")/corral-init" "$W/corral-init"
# corral execs the full CLI next to it (builds before the split have none).
[ ! -e "$(dirname "$CORRAL")/corral-cli" ] || cp "$(dirname "$CORRAL")/corral-cli" "$W/corral-cli"
export CORRAL_INIT="$W/corral-init"
mkdir -p "$W/state" "$W/config" "$W/nginx"
"$W/corral" profile default |
  sed "s|dir = \"/var/lib/corral/tmp/\$USER\"|dir = \"$W/tmp/\$USER\"|" >"$W/config/profile.toml"

install -d -o "$TENANT" -g "$(id -gn "$TENANT")" -m 755 "$SITE"
gcc -O2 -static -o "$SITE/hello.cgi" "$HERE/c/helloworld.c"
chown "$TENANT:" "$SITE/hello.cgi"
chmod 755 "$SITE/hello.cgi"

start_gateway() { # NAME [ARGS...]
  local name="$1"; shift
  "$W/corral" gateway --listen "unix:$W/$name.sock" "$@" 2>"$W/$name.log" &
  PIDS+=($!)
  for _ in $(seq 100); do [[ -S "$W/$name.sock" ]] && return 0; sleep 0.1; done
  echo "access-log.sh: gateway $name did not start: $(cat "$W/$name.log")" >&2; exit 1
}
start_gateway without
start_gateway with --access-log "$W/access.log"

PORT_A=$(( 20000 + RANDOM % 20000 )); PORT_B=$(( PORT_A + 1 ))
cat >"$W/nginx/nginx.conf" <<EOF
worker_processes 1;
user root root;
pid $W/nginx/nginx.pid;
error_log $W/nginx/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $W/nginx/body;
  fastcgi_temp_path $W/nginx/fastcgi;
  upstream without { server unix:$W/without.sock; keepalive 16; }
  upstream with { server unix:$W/with.sock; keepalive 16; }
  server { listen 127.0.0.1:$PORT_A; location / { include /etc/nginx/fastcgi_params;
    fastcgi_param SCRIPT_FILENAME $SITE/hello.cgi; fastcgi_keep_conn on; fastcgi_pass without; } }
  server { listen 127.0.0.1:$PORT_B; location / { include /etc/nginx/fastcgi_params;
    fastcgi_param SCRIPT_FILENAME $SITE/hello.cgi; fastcgi_keep_conn on; fastcgi_pass with; } }
}
EOF
nginx -p "$W/nginx" -e "$W/nginx/error.log" -c "$W/nginx/nginx.conf" -g 'daemon off;' &
PIDS+=($!)
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$PORT_B") 2>/dev/null && break; sleep 0.1
done

run() { # PORT N -> req/s
  local out
  out="$(timeout 300 h2load --h1 -n "$2" -c "$CONC" "http://127.0.0.1:$1/" 2>&1)"
  grep -q " $2 succeeded" <<<"$out" || { echo "access-log.sh: h2load failed: $out" >&2; exit 1; }
  awk '/^finished in/ { gsub(",", "", $4); print $4 }' <<<"$out"
}
sent_with=0
run "$PORT_A" 300 >/dev/null
run "$PORT_B" 300 >/dev/null
sent_with=300
A=() B=()
for ((r = 0; r < ROUNDS; r++)); do
  if ((r % 2 == 0)); then
    A+=("$(run "$PORT_A" "$REQUESTS")"); B+=("$(run "$PORT_B" "$REQUESTS")")
  else
    B+=("$(run "$PORT_B" "$REQUESTS")"); A+=("$(run "$PORT_A" "$REQUESTS")")
  fi
  sent_with=$((sent_with + REQUESTS))
  echo "round $((r + 1))/$ROUNDS: without ${A[-1]} req/s, with ${B[-1]} req/s" >&2
done
lines=$(wc -l <"$W/access.log")
[[ "$lines" -eq "$sent_with" ]] || { echo "access-log.sh: access log has $lines lines, $sent_with requests were sent" >&2; exit 1; }

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
MA=$(median "${A[@]}"); MB=$(median "${B[@]}")
RATIO=$(awk -v a="$MA" -v b="$MB" 'BEGIN { printf "%.4f", b / a }')
PAIRS=()
for ((r = 0; r < ROUNDS; r++)); do
  PAIRS+=("$(awk -v a="${A[r]}" -v b="${B[r]}" 'BEGIN { printf "%.4f", b / a }')")
done
PAIRED=$(median "${PAIRS[@]}")
table=$(printf 'access log cost, %s rounds of h2load --h1 -n %s -c %s, tiny static CGI, load %s\n  without: %s req/s (median; %s)\n  with:    %s req/s (median; %s)\n  with/without of the medians: %s; median of the rounds'"'"' ratios: %s (%s); target >= 0.98\n  access log lines: %s = requests sent\n' \
  "$ROUNDS" "$REQUESTS" "$CONC" "$(cut -d' ' -f1-3 /proc/loadavg)" "$MA" "${A[*]}" "$MB" "${B[*]}" "$RATIO" "$PAIRED" "${PAIRS[*]}" "$lines")
if ((JSON)); then
  echo "$table" >&2
  printf '{"rounds":%s,"requests":%s,"concurrency":%s,"without":[%s],"with":[%s],"median_without":%s,"median_with":%s,"ratio":%s,"paired_ratio":%s,"log_lines":%s}\n' \
    "$ROUNDS" "$REQUESTS" "$CONC" "$(IFS=,; echo "${A[*]}")" "$(IFS=,; echo "${B[*]}")" "$MA" "$MB" "$RATIO" "$PAIRED" "$lines"
else
  echo "$table"
fi
