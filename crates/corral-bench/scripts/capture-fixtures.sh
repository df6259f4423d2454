#!/usr/bin/env bash
# Re-capture the h2load and siege fixtures used by corral-bench's parser tests.
# Usage: capture-fixtures.sh [OUTDIR]   (default: ../tests/fixtures)
# Re-capturing changes the numbers: update tests/parsers.rs to match.
#
# House rules: traffic goes to 127.0.0.1 only; every run is bounded in request
# count (-n / -r) or time (-t, timeout); the nginx this script starts is
# stopped by its own pid; the temp prefix is removed on exit.
#
# Needs: nginx (nginx-light), h2load (nghttp2-client), siege, python3.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/../tests/fixtures}"
mkdir -p "$out"

for t in nginx h2load siege python3; do
  command -v "$t" >/dev/null || { echo "missing $t (apt-get install nginx-light nghttp2-client siege)" >&2; exit 1; }
done

work="$(mktemp -d /tmp/corral-bench-fixtures.XXXXXX)"
# nginx workers drop to an unprivileged user: let them read the docroot.
chmod 755 "$work"
# siege writes ~/.siege/siege.conf on its first run: keep that in the temp dir.
export HOME="$work"
nginx_pid=""
cleanup() {
  if [[ -n "$nginx_pid" ]] && kill -0 "$nginx_pid" 2>/dev/null; then
    kill -QUIT "$nginx_pid"
    for _ in $(seq 50); do kill -0 "$nginx_pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}
port="$(free_port)"
dead_port="$(free_port)"   # nothing listens here: connection refused

mkdir -p "$work"/{html,logs,tmp}
# A 1 KiB static page.
python3 -c 'print("<!doctype html><title>corral</title>" + "x"*989)' > "$work/html/index.html"

cat > "$work/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $work/nginx.pid;
error_log $work/logs/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $work/tmp/body;
  proxy_temp_path $work/tmp/proxy;
  fastcgi_temp_path $work/tmp/fastcgi;
  uwsgi_temp_path $work/tmp/uwsgi;
  scgi_temp_path $work/tmp/scgi;
  server {
    listen 127.0.0.1:$port;
    root $work/html;
    location = /err500 { return 500 "boom\n"; }
    # 444: nginx closes the connection without any response.
    location = /close { return 444; }
    # Upstream that is down: nginx answers 502.
    location = /down { proxy_pass http://127.0.0.1:$dead_port/; }
  }
}
CONF

nginx -p "$work" -c "$work/nginx.conf" &
nginx_pid=$!
for _ in $(seq 50); do
  python3 -c "import socket,sys; s=socket.socket(); sys.exit(s.connect_ex(('127.0.0.1',$port)))" && break
  sleep 0.1
done

base="http://127.0.0.1:$port"
h2() { # name, args...
  local name=$1; shift
  # h2load exits 0 even when requests fail; we keep its status anyway.
  timeout 60 h2load --h1 --log-file="$work/$name.log" "$@" > "$out/h2load-$name.txt" 2>&1 || echo "h2load $name exit $?" >&2
  install -m 644 "$work/$name.log" "$out/h2load-$name.log"
}
h2 static -n 200 -c 10 "$base/index.html"
h2 static-m4 -n 200 -c 10 -m 4 "$base/index.html"
# Round-robins over the URIs: 200s, 404s (no such file), 500s (return 500)
# and 502s (upstream down).
h2 mixed -n 200 -c 10 "$base/index.html" "$base/missing" "$base/err500" "$base/down"
# Every third request is closed by nginx without a response (444): h2load
# counts the rest of that client's requests as errored.
h2 close -n 60 -c 3 "$base/index.html" "$base/index.html" "$base/close"
# Nobody listening: every connection fails.
h2 refused -n 20 -c 2 "http://127.0.0.1:$dead_port/"

# siege: a private rc file (-R) so ~/.siege is not read. limit raises the
# 255-user cap, failures raises the socket-failure abort threshold.
rc() { # json_output
  cat > "$work/siegerc" <<RC
verbose = false
color = off
quiet = false
json_output = $1
show-logfile = false
logging = false
protocol = HTTP/1.1
connection = close
limit = 1024
failures = 100000
benchmark = true
timeout = 10
parser = false
RC
}
sg() { # name, args...
  local name=$1; shift
  timeout 60 siege -R "$work/siegerc" "$@" > "$out/siege-$name.txt" 2>&1 || echo "siege $name exit $?" >&2
}
rc false
sg static-t3s -c 10 -t 3S "$base/index.html"
sg static-r20 -c 10 -r 20 "$base/index.html"
printf '%s\n' "$base/index.html" "$base/missing" "$base/err500" "$base/down" > "$work/urls.txt"
sg mixed-r12 -c 5 -r 12 -f "$work/urls.txt"
sg refused-r5 -c 2 -r 5 "http://127.0.0.1:$dead_port/"
rc true
sg static-json -c 10 -r 20 "$base/index.html"
sg mixed-json -c 5 -r 12 -f "$work/urls.txt"

{
  echo "captured: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release; echo "$PRETTY_NAME"), kernel $(uname -r)"
  echo "nginx: $(nginx -v 2>&1)"
  echo "h2load: $(h2load --version 2>&1 | head -1) ($(dpkg-query -W -f='${Version}' nghttp2-client 2>/dev/null || echo '?'))"
  echo "siege: $(siege -V 2>&1 | head -1) ($(dpkg-query -W -f='${Version}' siege 2>/dev/null || echo '?'))"
  echo "ports were ephemeral; 127.0.0.1 only"
} > "$out/VERSIONS.txt"
echo "fixtures written to $out"
