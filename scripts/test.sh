#!/usr/bin/env bash
# Runs every test of corral: unit and integration tests (as root, with real
# namespaces and cgroups), then a bounded fuzzing run of every parser.
# Installs what it needs first. Usage: sudo scripts/test.sh
source "$(dirname "$0")/lib.sh"
need_root
cd "$REPO"
scripts/install-deps.sh
scripts/test-users.sh
start=$(date +%s)
echo "== pam_corral.so (shared object, for the login tests)" >&2
build_pam_module
echo "== cargo test (workspace)" >&2
static_cargo test --workspace --no-fail-fast -- --test-threads=2
if [ -x scripts/fuzz.sh ]; then
  echo "== fuzzing (bounded)" >&2
  scripts/fuzz.sh "${CORRAL_FUZZ_SECONDS:-30}"
fi
if [ -x scripts/test-cgroup-v2.sh ]; then
  echo "== cgroup v2 tests in a qemu VM" >&2
  scripts/test-cgroup-v2.sh
fi
echo "all tests passed in $(( $(date +%s) - start ))s" >&2
