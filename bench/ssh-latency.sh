#!/usr/bin/env bash
# SSH command latency, caged vs uncaged: `ssh host true` with key auth on
# loopback against a real OpenSSH server started here, three logins
# interleaved round by round:
#   uncaged      an account corral does not cage (exempt): the baseline
#   pam          a tenant placed in its sandbox by pam_corral.so (shell /bin/sh)
#   corral-shell a tenant whose login shell is corral-shell (setuid root), with
#                no PAM module for it
# Both caged tenants' sandboxes are up (the warm case, a login to a running
# sandbox); the first login of a sandbox that is down (`corral up` through
# the login) is measured once per mechanism and printed apart.
# Two setups: unpinned, and pinned (sshd on CPU 0, the client on CPU 1).
#
# Usage: bench/ssh-latency.sh [ROUNDS]   (default 40; as root)
# Prints a table (medians in ms, and each caged median minus the uncaged).
# Everything it starts is stopped, and every change it makes (a PAM service
# file, a login shell, corral's state) is undone, also on failure.
source "$(dirname "$0")/../scripts/lib.sh"
need_root
ROUNDS=${1:-40}
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
  rm -f "/etc/pam.d/$SERVICE"
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
usermod -s "$W/corral-shell" "$SHT"
ssh-keygen -q -t ed25519 -N '' -f "$W/hostkey"
ssh-keygen -q -t ed25519 -N '' -f "$W/client"
mkdir "$W/keys"
for u in "$PAMT" "$SHT" "$ADMIN"; do cp "$W/client.pub" "$W/keys/$u"; done
chmod 644 "$W"/keys/*
ln -s /usr/sbin/sshd "$W/$SERVICE"

start_sshd() { # PORT CPU|-
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
  "${pin[@]}" "$W/$SERVICE" -D -f "$W/sshd_config.$1" &
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
    -o LogLevel=ERROR -o BatchMode=yes -p "$1" "$2@127.0.0.1" true || { echo "ssh $2 failed" >&2; exit 1; }
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000))
}

median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

corral() { "$CORRAL" --state-dir "$STATE" --config-dir "$CONF" --cgroup-parent "$PARENT" "$@"; }

cpus=$(nproc)
setups=("unpinned 2201 - -")
((cpus >= 2)) && setups+=("pinned 2202 0 1")
printf '%-9s %-13s %8s %8s %10s\n' setup login median_ms n caged-bare
for s in "${setups[@]}"; do
  read -r name port scpu ccpu <<<"$s"
  start_sshd "$port" "$scpu"
  # Cold: the first login of a sandbox that is down.
  corral down "$PAMT" "$SHT" >/dev/null 2>&1 || true
  cold_pam=$(once "$port" "$PAMT" "$ccpu")
  cold_sh=$(once "$port" "$SHT" "$ccpu")
  once "$port" "$ADMIN" "$ccpu" >/dev/null # warm sshd's caches
  : > "$W/bare" ; : > "$W/pam" ; : > "$W/shell"
  for i in $(seq "$ROUNDS"); do
    # Rotate the order each round so no mode always goes first.
    case $((i % 3)) in
      0) order="bare pam shell" ;; 1) order="pam shell bare" ;; *) order="shell bare pam" ;;
    esac
    for m in $order; do
      case $m in bare) u=$ADMIN ;; pam) u=$PAMT ;; shell) u=$SHT ;; esac
      once "$port" "$u" "$ccpu" >> "$W/$m"
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
