#!/usr/bin/env bash
# SSH command latency, caged vs uncaged: `ssh host true` with key auth on
# loopback against real OpenSSH servers started here (two: one whose PAM
# service has pam_corral.so, one without), three logins interleaved round by
# round:
#   uncaged      tenant A (shell /bin/sh) through the server without the
#                module: the baseline
#   pam          the same tenant A through the server with pam_corral.so
#   corral-shell tenant B, whose login shell is corral-shell (setuid root),
#                through the server without the module
# Both caged tenants' sandboxes are up (the warm case, a login to a running
# sandbox); the first login of a sandbox that is down (`corral up` through
# the login) is measured once per mechanism and printed apart.
# Two setups: unpinned, and pinned (sshd on CPU 0, the client on CPU 1).
#
# The key exchange is curve25519-sha256 (KEX=... to change): OpenSSH 9's
# default, sntrup761x25519, costs about 100 ms of CPU per connection on a
# small VM, and its noise would hide a difference of a few milliseconds.
#
# Usage: bench/ssh-latency.sh [ROUNDS]   (default 60; as root)
# Prints a table (medians in ms, and each caged median minus the uncaged).
# Everything it starts is stopped, and every change it makes (a PAM service
# file, a login shell, corral's state) is undone, also on failure.
source "$(dirname "$0")/../scripts/lib.sh"
need_root
ROUNDS=${1:-60}
KEX=${KEX:-curve25519-sha256}
cd "$REPO"
scripts/install-deps.sh >/dev/null
scripts/test-users.sh
build_release >/dev/null 2>&1 || build_release
build_pam_module release >/dev/null
PAMT=corral-demo1 SHT=corral-demo2 ADMIN=corral-t4

W=$(mktemp -d /run/corral-ssh-bench.XXXXXX)
chmod 755 "$W"
STATE=/var/tmp/corral-ssh-bench-state CONF="$W/config" PARENT=corral/ssh-bench
SERVICE=corral-ssh-bench-$$
OLD_SHELL=$(getent passwd "$SHT" | cut -d: -f7)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  usermod -s "$OLD_SHELL" "$SHT" 2>/dev/null
  rm -f "/etc/pam.d/$SERVICE" "/etc/pam.d/$SERVICE-bare"
  "$CORRAL" --state-dir "$STATE" --config-dir "$CONF" --cgroup-parent "$PARENT" down --all >/dev/null 2>&1
  for d in /sys/fs/cgroup/*/"$PARENT" /sys/fs/cgroup/"$PARENT"; do [ -d "$d" ] && rmdir "$d" 2>/dev/null; done
  rm -rf "$W" "$STATE"
}
trap cleanup EXIT
mkdir -p "$CONF" /run/sshd
# pam_corral.so's config: the corral-shell tenant and the admin are exempt
# (corral-shell cages the first by itself).
cat > "$W/pam-access.toml" <<EOF
exempt = ["$ADMIN", "$SHT"]
state_dir = "$STATE"
config_dir = "$CONF"
cgroup_parent = "$PARENT"
corral = "$CORRAL"
EOF
sed "s/^exempt = .*/exempt = [\"$ADMIN\"]/" "$W/pam-access.toml" > "$W/corral-access.toml"
install -m 4755 "$(dirname "$CORRAL")/corral-shell" "$W/corral-shell"
cat > "/etc/pam.d/$SERVICE" <<EOF
account required pam_unix.so
session required pam_unix.so
session required $CORRAL_PAM_MODULE config=$W/pam-access.toml
EOF
printf 'account required pam_unix.so\nsession required pam_unix.so\n' > "/etc/pam.d/$SERVICE-bare"
usermod -s "$W/corral-shell" "$SHT"
ssh-keygen -q -t ed25519 -N '' -f "$W/hostkey"
ssh-keygen -q -t ed25519 -N '' -f "$W/client"
mkdir "$W/keys"
for u in "$PAMT" "$SHT" "$ADMIN"; do cp "$W/client.pub" "$W/keys/$u"; done
chmod 644 "$W"/keys/*
ln -s /usr/sbin/sshd "$W/$SERVICE"
ln -s /usr/sbin/sshd "$W/$SERVICE-bare"

start_sshd() { # PORT CPU|- PROGRAM (its name is its PAM service)
  cat > "$W/sshd_config.$1" <<EOF
Port $1
ListenAddress 127.0.0.1
HostKey $W/hostkey
PidFile $W/sshd.$1.pid
AuthorizedKeysFile $W/keys/%u
UsePAM yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
PrintMotd no
PrintLastLog no
Subsystem sftp /usr/lib/openssh/sftp-server
EOF
  local pin=()
  [ "$2" != - ] && pin=(taskset -c "$2")
  "${pin[@]}" "$W/$3" -D -f "$W/sshd_config.$1" &
  PIDS+=($!)
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.05; done
  echo "sshd on port $1 did not start" >&2; exit 1
}

# One `ssh USER@127.0.0.1 true`: wall time in microseconds.
once() { # PORT USER CPU|-
  local pin=() t0 t1
  [ "$3" != - ] && pin=(taskset -c "$3")
  t0=$(date +%s%N)
  "${pin[@]}" ssh -F none -i "$W/client" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
    -o LogLevel=ERROR -o BatchMode=yes -o KexAlgorithms="$KEX" -p "$1" "$2@127.0.0.1" true || { echo "ssh $2 failed" >&2; exit 1; }
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000))
}

median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

corral() { "$CORRAL" --state-dir "$STATE" --config-dir "$CONF" --cgroup-parent "$PARENT" "$@"; }

cpus=$(nproc)
setups=("unpinned 2201 2202 - -")
((cpus >= 2)) && setups+=("pinned 2203 2204 0 1")
printf '%-9s %-13s %8s %8s %10s\n' setup login median_ms n caged-bare
for s in "${setups[@]}"; do
  read -r name port bport scpu ccpu <<<"$s"
  start_sshd "$port" "$scpu" "$SERVICE"
  start_sshd "$bport" "$scpu" "$SERVICE-bare"
  # Cold: the first login of a sandbox that is down.
  corral down "$PAMT" "$SHT" >/dev/null 2>&1 || true
  cold_pam=$(once "$port" "$PAMT" "$ccpu")
  cold_sh=$(once "$bport" "$SHT" "$ccpu")
  once "$bport" "$PAMT" "$ccpu" >/dev/null # warm the bare server's caches
  : > "$W/bare" ; : > "$W/pam" ; : > "$W/shell"
  for i in $(seq "$ROUNDS"); do
    # Rotate the order each round so no mode always goes first.
    case $((i % 3)) in
      0) order="bare pam shell" ;; 1) order="pam shell bare" ;; *) order="shell bare pam" ;;
    esac
    for m in $order; do
      case $m in
        bare) once "$bport" "$PAMT" "$ccpu" ;;
        pam) once "$port" "$PAMT" "$ccpu" ;;
        shell) once "$bport" "$SHT" "$ccpu" ;;
      esac >> "$W/$m"
    done
  done
  b=$(median < "$W/bare")
  for m in bare pam shell; do
    med=$(median < "$W/$m")
    label=$m; [ "$m" = bare ] && label=uncaged; [ "$m" = shell ] && label=corral-shell
    awk -v n="$name" -v l="$label" -v m="$med" -v c="$(wc -l < "$W/$m")" -v b="$b" \
      'BEGIN { printf "%-9s %-13s %8.2f %8d %+10.2f\n", n, l, m / 1000, c, (m - b) / 1000 }'
  done
  for c in "pam-cold $cold_pam" "shell-cold $cold_sh"; do
    set -- $c
    awk -v n="$name" -v l="$1" -v m="$2" \
      'BEGIN { printf "%-9s %-13s %8.2f %8d   (first login: the sandbox is brought up)\n", n, l, m / 1000, 1 }'
  done
done

# The caging step alone, without ssh's noise: a PAM session opened and closed
# by pamtester (its own process, root, as sshd's monitor would) through the
# service with pam_corral.so and through the one without; a tenant's
# `corral-shell -c true` against `/bin/sh -c true` (setpriv drops to the
# tenant as a login does). Milliseconds per login, medians of 10 blocks of
# 20, the modes interleaved block by block.
block() { # N COMMAND... : wall ms per run over N runs
  local n=$1 t0 t1; shift
  t0=$(date +%s%N)
  for _ in $(seq "$n"); do "$@" >/dev/null 2>&1 || { echo "$* failed" >&2; exit 1; }; done
  t1=$(date +%s%N)
  awk -v d=$((t1 - t0)) -v n="$n" 'BEGIN { printf "%.3f\n", d / n / 1e6 }'
}
as_tenant() { setpriv --reuid="$1" --regid="$1" --init-groups "${@:2}"; }
: > "$W/d.pam0"; : > "$W/d.pam1"; : > "$W/d.sh0"; : > "$W/d.sh1"
for _ in $(seq 10); do
  block 20 pamtester "$SERVICE-bare" "$PAMT" open_session close_session >> "$W/d.pam0"
  block 20 pamtester "$SERVICE" "$PAMT" open_session close_session >> "$W/d.pam1"
  block 20 as_tenant "$PAMT" /bin/sh -c true >> "$W/d.sh0"
  block 20 as_tenant "$SHT" "$W/corral-shell" -c true >> "$W/d.sh1"
done
echo
printf '%-34s %10s %10s %10s\n' "direct (ms per login)" bare caged added
for pair in "PAM session (pamtester) d.pam0 d.pam1" "login shell -c true d.sh0 d.sh1"; do
  set -- $pair
  what="${*:1:$#-2}"; a=${*: -2:1}; b=${*: -1}
  ma=$(median < "$W/$a"); mb=$(median < "$W/$b")
  awk -v w="$what" -v a="$ma" -v b="$mb" 'BEGIN { printf "%-34s %10.2f %10.2f %+10.2f\n", w, a, b, b - a }'
done
