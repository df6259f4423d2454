# Shared helpers for the scripts (sourced, not run).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ -f "$HOME/.cargo/env" ] && source "$HOME/.cargo/env"
export PATH="$HOME/.cargo/bin:$PATH"

need_root() {
  if [ "$(id -u)" != 0 ]; then
    echo "$(basename "$0"): run as root (corral builds namespaces and cgroups)" >&2
    exit 1
  fi
}

# corral and corral-init are linked statically (glibc static-pie): starting
# the dynamically linked binary was most of what `corral run` adds to a
# command, and most of `corral up`'s exec of the init (docs/benchmarks.md).
# The flag must reach only what runs on the target, not build scripts and
# proc macros (those cannot be static), which is what an explicit --target
# does; artifacts then live in target/<host triple>/. corral looks users and
# groups up without NSS modules (crates/corral-users), the one thing a static
# glibc cannot do safely.
host_target() {
  rustc -vV | sed -n 's/^host: //p'
}
# Runs cargo with the static settings: static_cargo build --release ...
# (added to any RUSTFLAGS of the caller's, which would otherwise replace
# target-specific flags; with --target they reach only target code).
static_cargo() {
  local host
  host=$(host_target)
  env CARGO_BUILD_TARGET="$host" RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" cargo "$@"
}

# `corral` itself, the small front program (crates/corral-front): a
# workspace of its own (no C library, panic = "abort"), built into this
# workspace's target dir so that it lands next to corral-cli and
# corral-init. build_front [release|debug] (default release).
build_front() {
  local flag=()
  [ "${1:-release}" = release ] && flag=(--release)
  (cd "$REPO/crates/corral-front" && static_cargo build -q "${flag[@]}" --target-dir "$REPO/target")
}

# Release build of corral (the front), corral-cli, corral-init and the
# other programs.
build_release() {
  (cd "$REPO" && static_cargo build --release -p corral --bins)
  build_front release
  CORRAL="$REPO/target/$(host_target)/release/corral"
  export CORRAL
}

# pam_corral.so is a shared object that libpam loads into sshd, cron and su:
# built without crt-static (a static glibc makes no shared objects, and rustc
# drops the cdylib under crt-static), in a target dir of its own so that it
# never waits on the static build's lock. Sets CORRAL_PAM_MODULE.
build_pam_module() {
  local profile=${1:-debug} flag=()
  [ "$profile" = release ] && flag=(--release)
  (cd "$REPO" && CARGO_TARGET_DIR="$REPO/target/pam" cargo build -q -p pam-corral "${flag[@]}")
  CORRAL_PAM_MODULE="$REPO/target/pam/$profile/libpam_corral.so"
  export CORRAL_PAM_MODULE
}

# Release build of corral-bench (the benchmarks, a program of their own),
# next to corral, which it measures.
build_bench() {
  (cd "$REPO" && static_cargo build --release -p corral-bench --bin corral-bench)
  CORRAL_BENCH="$REPO/target/$(host_target)/release/corral-bench"
  export CORRAL_BENCH
}
