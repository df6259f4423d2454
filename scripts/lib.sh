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

# Release build of the corral and corral-init binaries.
build_release() {
  (cd "$REPO" && cargo build --release -p corral --bins)
  CORRAL="$REPO/target/release/corral"
  export CORRAL
}
