#!/usr/bin/env bash
# Runs every test of corral: the style gates (rustfmt, clippy), unit and
# integration tests (as root, with real namespaces and cgroups), then a
# bounded fuzzing run of every parser.
# Installs what it needs first (install-deps.sh --for test: everything).
# Usage (as root): scripts/test.sh
source "$(dirname "$0")/lib.sh"
need_root
cd "$REPO"
scripts/install-deps.sh --for test
scripts/test-users.sh
start=$(date +%s)
# Style gates first: formatting, then clippy with every warning an error
# (the workspace's [workspace.lints] included, e.g. a SAFETY comment on every
# unsafe block). Either failing fails the run (set -e).
echo "== cargo fmt --check" >&2
cargo fmt --all --check
(cd crates/corral-front && cargo fmt --check)
echo "== cargo clippy (workspace, all targets, -D warnings)" >&2
static_cargo clippy --workspace --exclude pam-corral --all-targets -- -D warnings
# corral itself (the front program) is a workspace of its own (lib.sh).
(cd crates/corral-front && static_cargo clippy --target-dir "$REPO/target" --all-targets -- -D warnings)
# pam_corral.so is built without crt-static (scripts/lib.sh: build_pam_module).
CARGO_TARGET_DIR="$REPO/target/pam" cargo clippy -p pam-corral --all-targets -- -D warnings
echo "== pam_corral.so (shared object, for the login tests)" >&2
build_pam_module
CARGO_TARGET_DIR="$REPO/target/pam" cargo test -q -p pam-corral
echo "== corral, the front program (crates/corral-front): unit tests, then its debug build for the integration tests" >&2
(cd crates/corral-front && static_cargo test -q --target-dir "$REPO/target")
build_front debug
echo "== cargo test (workspace)" >&2
static_cargo test --workspace --exclude pam-corral --no-fail-fast -- --test-threads=2
echo "== Debian package: build, install into a fresh Debian chroot, check" >&2
scripts/test-deb.sh
if [ -x scripts/fuzz.sh ]; then
  echo "== fuzzing (bounded)" >&2
  scripts/fuzz.sh "${CORRAL_FUZZ_SECONDS:-30}"
fi
if [ -x scripts/test-cgroup-v2.sh ]; then
  echo "== cgroup v2 tests in a qemu VM" >&2
  scripts/test-cgroup-v2.sh
fi
echo "all tests passed in $(( $(date +%s) - start ))s" >&2
