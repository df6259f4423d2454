#!/usr/bin/env bash
# The main job on the embedded default: build corral, create two demo tenants
# from the built-in default profile, show that they are isolated, then run the
# quick benchmark and write the report. Usage (as root): scripts/demo.sh
# Installs only what the demo needs (install-deps.sh --for demo: no login,
# mail or VM stacks, which only the tests use).
source "$(dirname "$0")/lib.sh"
need_root
cd "$REPO"
scripts/install-deps.sh --for demo
scripts/test-users.sh
echo "== building corral and corral-bench (release)" >&2
build_release
build_bench

# The demo uses the embedded default profile and plan: no /etc/corral needed.
export CORRAL_CONFIG_DIR="${CORRAL_CONFIG_DIR:-$REPO/target/demo-config}"
mkdir -p "$CORRAL_CONFIG_DIR"
T1=corral-demo1 T2=corral-demo2

# A CGI script in each tenant's public_html (owned by the tenant, as suEXEC wants).
for t in $T1 $T2; do
  home=$(getent passwd "$t" | cut -d: -f6)
  install -d -o "$t" -g "$t" -m 0755 "$home/public_html"
  printf '#!/bin/sh\nprintf "Content-Type: text/plain\\r\\n\\r\\nhello from %%s\\n" "$(id -un)"\n' > "$home/public_html/hello.cgi"
  chown "$t:$t" "$home/public_html/hello.cgi"; chmod 0755 "$home/public_html/hello.cgi"
done

echo "== corral restart $T1 $T2 (build both sandboxes from the built-in profile)" >&2
"$CORRAL" restart $T1 $T2
"$CORRAL" ls
show() { echo "\$ corral run $1 -- sh -c '$2'"; "$CORRAL" run "$1" -- /bin/sh -c "$2" | sed 's/^/    /'; }
echo "== what a tenant sees" >&2
show $T1 'id; hostname'
show $T1 'ls /home; cut -d: -f1 /etc/passwd | tr "\n" " "; echo'
show $T1 'echo processes visible: $(ls -d /proc/[0-9]* | wc -l); cat /proc/1/cmdline | tr "\0" " "; echo'
show $T1 "ls $(getent passwd $T2 | cut -d: -f6) 2>&1 || true"
show $T2 'public_html/hello.cgi'

echo "== corral-bench all --quick" >&2
"$CORRAL_BENCH" --corral "$CORRAL" all --quick --out "$REPO/corral-bench" --tenants "$T1,$T2"
echo "report: $REPO/corral-bench/report.html (and report.md, results.json)"
