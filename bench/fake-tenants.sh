# shellcheck shell=bash
# N fake tenants for the benchmarks that read every tenant (bench/metrics.sh,
# bench/history.sh), without building N sandboxes: per tenant a state
# directory (state.json naming one live stand-in init, a `sleep` started
# here; limits.json of the default plan; an entry/ directory with SLOTS slot
# files and a rejections counter) and a real, empty cgroup in every
# hierarchy corral uses, below a private parent. Sourced; the caller sets
# `trap fake_tenants_cleanup EXIT` (or calls it from its own cleanup).
#
#   fake_tenants_make N SLOTS STATE_DIR PARENT
#
# Sets FAKE_INIT_PID, FAKE_CG_DIRS (the parent in each hierarchy) and
# FAKE_ROOTS (the hierarchies).

FAKE_INIT_PID='' FAKE_CG_DIRS=() FAKE_ROOTS=()

fake_tenants_cleanup() {
  [ -n "$FAKE_INIT_PID" ] && kill -TERM "$FAKE_INIT_PID" 2>/dev/null && wait "$FAKE_INIT_PID" 2>/dev/null
  FAKE_INIT_PID=''
  local d
  for d in "${FAKE_CG_DIRS[@]}"; do
    [ -d "$d" ] || continue
    find "$d" -mindepth 1 -maxdepth 1 -type d -exec rmdir {} + 2>/dev/null
    rmdir "$d" 2>/dev/null
  done
  return 0
}

fake_tenants_make() {
  local n=$1 slots=$2 state=$3 parent=$4
  # The hierarchies corral uses (crates/corral-limits backend.rs): cgroup v2
  # with cpu, memory and pids, else the v1 cpu, cpuacct, memory, pids, blkio
  # and freezer hierarchies.
  local v2_root='' target fstype opts ctl c d r
  while read -r target fstype; do
    if [ "$fstype" = cgroup2 ] && ctl=$(cat "$target/cgroup.controllers" 2>/dev/null) &&
       [[ " $ctl " == *" cpu "* && " $ctl " == *" memory "* && " $ctl " == *" pids "* ]]; then
      v2_root=$target
      break
    fi
  done < <(findmnt -rn -t cgroup2 -o TARGET,FSTYPE)
  FAKE_ROOTS=()
  if [ -n "$v2_root" ]; then
    FAKE_ROOTS=("$v2_root")
    mkdir -p "$v2_root/$parent"
    for d in "$v2_root/corral" "$v2_root/$parent"; do
      for c in cpu memory pids io; do echo "+$c" > "$d/cgroup.subtree_control" 2>/dev/null || true; done
    done
  else
    while read -r target opts; do
      for c in ${opts//,/ }; do
        case $c in cpu|cpuacct|memory|pids|blkio|freezer) FAKE_ROOTS+=("$target"); break ;; esac
      done
    done < <(findmnt -rn -t cgroup -o TARGET,OPTIONS)
  fi
  ((${#FAKE_ROOTS[@]})) || { echo "fake-tenants: no cgroup hierarchy for corral found" >&2; return 1; }
  for r in "${FAKE_ROOTS[@]}"; do FAKE_CG_DIRS+=("$r/$parent"); done

  sleep 86400 &
  FAKE_INIT_PID=$!
  local start now limits i name dir dirs k
  start=$(awk '{ sub(/.*\) /, ""); print $20 }' "/proc/$FAKE_INIT_PID/stat")
  now=$(date +%s)
  limits='{"cpu_pct":100,"cpu_weight":null,"memory_max":1073741824,"memory_high":null,"memory_swap_max":null,"processes":100,"io":{"read_bps":1048576,"write_bps":1048576,"read_iops":1024,"write_iops":1024,"devices":[]},"entry_processes":20,"mail_per_hour":null,"rlimits":{"nofile":1024,"core":null,"cpu_seconds":null,"address_space":null}}'
  for ((i = 1; i <= n; i++)); do
    name=$(printf 'mb%05d' "$i")
    dir=$state/tenants/$name
    mkdir -p "$dir/entry"
    dirs=''
    for r in "${FAKE_ROOTS[@]}"; do
      mkdir -p "$r/$parent/$name"
      dirs+="${dirs:+,}\"$r/$parent/$name\""
    done
    printf '{"tenant":"%s","init_pid":%d,"init_start":%d,"digest":"bench","created_unix":%d,"proto":1,"namespaces":[],"cgroup":"%s","cgroup_parent":"%s","cgroup_dirs":[%s]}' \
      "$name" "$FAKE_INIT_PID" "$start" "$now" "$name" "$parent" "$dirs" > "$dir/state.json"
    printf '%s' "$limits" > "$dir/limits.json"
    for ((k = 0; k < slots; k++)); do : > "$dir/entry/slot.$k"; done
    echo 0 > "$dir/entry/rejections"
  done
}
