#!/usr/bin/env bash
# Creates the Unix users that tests and the demo use as tenants (idempotent).
# corral-t1..corral-t4: test tenants; corral-demo1, corral-demo2: demo tenants.
set -euo pipefail
for u in corral-t1 corral-t2 corral-t3 corral-t4 corral-demo1 corral-demo2; do
  if ! getent passwd "$u" >/dev/null; then
    useradd --create-home --shell /bin/sh --user-group "$u"
  fi
  home=$(getent passwd "$u" | cut -d: -f6)
  mkdir -p "$home"
  chown "$u:$u" "$home"
  chmod 0711 "$home"
done
