#!/usr/bin/env bash
# Fuzzes every target in fuzz/fuzz_targets/ for SECONDS_PER_TARGET seconds
# each (default 45) and fails if any target crashes, panics, leaks, runs out
# of memory or times out on an input (-timeout=10).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]
#
# Uses stable Rust with RUSTC_BOOTSTRAP=1 (cargo-fuzz passes nightly-only
# flags), builds in its own target directory ($FUZZ_TARGET_DIR, default
# target-fuzz/ at the repository root) and installs cargo-fuzz if missing.
# The committed seeds in fuzz/corpus/<target>/ are read but never written:
# inputs the fuzzer finds go to $FUZZ_TARGET_DIR/corpus/<target>/, crashes to
# fuzz/artifacts/<target>/ (git-ignored), logs to $FUZZ_TARGET_DIR/logs/.
set -euo pipefail

usage() { echo "usage: $0 [SECONDS_PER_TARGET]" >&2; exit 2; }
(($# <= 1)) || usage
seconds="${1:-45}"
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || usage

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fuzz_dir="$root/fuzz"
target_dir="${FUZZ_TARGET_DIR:-$root/target-fuzz}"
export RUSTC_BOOTSTRAP=1
# Never let a CARGO_TARGET_DIR from the environment share this build.
unset CARGO_TARGET_DIR

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz" >&2
  cargo install cargo-fuzz --locked
fi

shopt -s nullglob
sources=("$fuzz_dir"/fuzz_targets/*.rs)
if ((${#sources[@]} == 0)); then
  echo "fuzz: no targets in $fuzz_dir/fuzz_targets" >&2
  exit 1
fi

# Every target file needs its [[bin]] entry; say so plainly rather than
# letting cargo fail later with a less obvious message.
targets=()
for src in "${sources[@]}"; do
  name="$(basename "$src" .rs)"
  if ! grep -Eq "^name = \"$name\"" "$fuzz_dir/Cargo.toml"; then
    echo "fuzz: $src has no [[bin]] entry named \"$name\" in fuzz/Cargo.toml" >&2
    exit 1
  fi
  targets+=("$name")
done

mkdir -p "$target_dir/logs"
echo "fuzz: ${#targets[@]} targets, ${seconds}s each: ${targets[*]}" >&2
(cd "$root" && cargo fuzz build --fuzz-dir "$fuzz_dir" --target-dir "$target_dir")

failed=()
summary=()
for name in "${targets[@]}"; do
  scratch="$target_dir/corpus/$name"
  seeds="$fuzz_dir/corpus/$name"
  mkdir -p "$scratch"
  corpora=("$scratch")
  [[ -d "$seeds" ]] && corpora+=("$seeds")
  log="$target_dir/logs/$name.log"
  echo "fuzz: running $name for ${seconds}s (log: $log)" >&2
  status=0
  (cd "$root" && cargo fuzz run --fuzz-dir "$fuzz_dir" --target-dir "$target_dir" \
    "$name" "${corpora[@]}" -- \
    -max_total_time="$seconds" -timeout=10 -print_final_stats=1) >"$log" 2>&1 || status=$?
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  speed="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)"
  cov="$(grep -Eo 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[^ ]+' "$log" | tail -1 || true)"
  if ((status != 0)); then
    failed+=("$name")
    summary+=("$(printf '%-18s FAILED (exit %d)  %s' "$name" "$status" "$cov")")
    echo "fuzz: $name FAILED (exit $status); end of its log:" >&2
    tail -n 40 "$log" >&2
  else
    summary+=("$(printf '%-18s ok  runs=%s  exec/s=%s  %s' "$name" "${runs:-?}" "${speed:-?}" "$cov")")
  fi
done

echo "fuzz: summary (${seconds}s per target)"
printf '  %s\n' "${summary[@]}"
if ((${#failed[@]})); then
  echo "fuzz: failed targets: ${failed[*]} (reproduce: RUSTC_BOOTSTRAP=1 cargo fuzz run <target> fuzz/artifacts/<target>/<file>)" >&2
  exit 1
fi
