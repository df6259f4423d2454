#!/usr/bin/env bash
# Installs the Debian packages corral needs, idempotently (Debian/Ubuntu, as
# root; packages already present are skipped).
#   scripts/install-deps.sh --for demo     build, run and benchmark (scripts/demo.sh)
#   scripts/install-deps.sh --for build    build and install from source or as a .deb
#                                          (scripts/install.sh, scripts/build-deb.sh)
#   scripts/install-deps.sh [--for test]   everything: the above, the real login/mail/metrics
#                                          stacks the tests drive, the cgroup v2 VM, the
#                                          package test (scripts/test.sh)
set -euo pipefail

# Compilers and what cargo needs to fetch crates.
BUILD=(build-essential pkg-config ca-certificates curl)
# What corral itself runs: util-linux/procps/passwd for the sandbox plumbing,
# iproute2 and nftables for net = "private" (the default; the tenants'
# routed veths and egress policy). The .deb depends on these too.
RUNTIME=(util-linux iproute2 procps passwd nftables)
# The quick benchmark the demo runs: web stack, load generator, peer sandbox.
BENCH=(nginx-light fcgiwrap nghttp2-client php-cgi php-fpm bubblewrap musl-tools)
# pam_corral.so links libpam; dpkg-shlibdeps (dpkg-dev) computes the
# package's library dependencies; the man pages are checked with man-db.
PACKAGE=(libpam0g-dev dpkg-dev man-db)
# Only the tests: login paths caged by corral-shell and pam_corral.so
# (tested for real), a PAM session without sshd (bench/ssh-latency.sh),
# mail to a real MTA (Debian's default exim configuration delivers locally
# only), a real Prometheus and promtool (tests/metrics.rs), siege and psmisc
# for the gateway tests, and the package test (scripts/test-deb.sh: a
# Debian chroot from apt's mirror, lintian).
TEST=(psmisc siege openssh-server openssh-client cron pamtester exim4-daemon-light prometheus
      mmdebstrap lintian)
# Only the tests: real sites (crates/corral/tests/sites.rs: WordPress from
# Debian's package, and the theme it shows posts with, on a real MariaDB;
# PHP with GD and MySQL), the shipped Apache 2.4 and lighttpd snippets run
# against the real servers, and real system CGI applications through the
# gateway (tests/gateway_sites.rs: cgit, gitweb); the offline HTML pages (the
# bench report, `corral history --html`) looked at in headless Chromium.
SITES=(wordpress wordpress-theme-twentytwentythree mariadb-server php-mysql php-gd
       apache2 lighttpd cgit gitweb chromium)
# Only the cgroup v2 tests: they boot a Debian kernel under qemu.
VM=(qemu-system-x86 linux-image-amd64 busybox-static cpio)

usage() { echo "usage: $0 [--for demo|build|test]" >&2; exit 2; }
set_name=test
case "${1:-}" in
  "") ;;
  --for) [ $# -eq 2 ] || usage; set_name=$2 ;;
  --for=*) [ $# -eq 1 ] || usage; set_name=${1#--for=} ;;
  *) usage ;;
esac
case $set_name in
  demo) PACKAGES=("${BUILD[@]}" "${RUNTIME[@]}" "${BENCH[@]}") ;;
  build) PACKAGES=("${BUILD[@]}" "${RUNTIME[@]}" "${PACKAGE[@]}") ;;
  test) PACKAGES=("${BUILD[@]}" "${RUNTIME[@]}" "${BENCH[@]}" "${PACKAGE[@]}" "${TEST[@]}" "${SITES[@]}" "${VM[@]}") ;;
  *) echo "$0: --for $set_name: expected demo, build or test" >&2; exit 2 ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  # Only refresh the package lists when they are missing or older than a day.
  if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mmin -1440 2>/dev/null | head -1)" ]; then
    apt-get update -q
  fi
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Distribution services must not keep running: tests and benchmarks start their own.
for svc in nginx php8.2-fpm php-fpm ssh cron exim4 prometheus mariadb apache2 lighttpd; do
  if [ -x "/etc/init.d/$svc" ]; then "/etc/init.d/$svc" stop >/dev/null 2>&1 || true; fi
done

if ! command -v cargo >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
  echo "install-deps: no Rust toolchain found: install stable Rust with rustup (https://rustup.rs), then run this again" >&2
  exit 1
fi
# scripts/test.sh gates on rustfmt and clippy: add them to a rustup toolchain
# that lacks them.
if [ "$set_name" = test ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
  for tool in rustfmt:cargo-fmt clippy:cargo-clippy; do
    if ! command -v "${tool#*:}" >/dev/null 2>&1 && command -v rustup >/dev/null 2>&1; then
      rustup component add "${tool%%:*}"
    fi
  done
fi
echo "install-deps ($set_name): ok" >&2
