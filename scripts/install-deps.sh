#!/usr/bin/env bash
# Installs what corral needs to build, test and benchmark, idempotently.
# Debian/Ubuntu, as root. Safe to run again: packages already present are skipped.
set -euo pipefail

PACKAGES=(
  # build
  build-essential pkg-config ca-certificates curl
  # sandbox plumbing used by tests (losetup, nsenter, ip)
  util-linux iproute2 procps psmisc passwd
  # net = "private": the tenants' egress policy (one nftables table)
  nftables
  # web stack and load generators for the gateway tests and benchmarks
  nginx-light fcgiwrap nghttp2-client siege php-cgi php-fpm
  # crates/corral/tests/sites.rs: WordPress from Debian's package (and the
  # theme it shows posts with) on a real MariaDB, PHP with GD and MySQL
  wordpress wordpress-theme-twentytwentythree mariadb-server php-mysql php-gd
  # the shipped Apache 2.4 and lighttpd snippets, tested against the real
  # servers; real system CGI applications run through the gateway (docs/sites.md)
  apache2 lighttpd cgit gitweb
  # peer sandboxes measured by the benchmarks
  bubblewrap
  # login paths caged by corral-shell and pam_corral.so, tested for real
  # (libpam0g-dev: the PAM module links libpam)
  openssh-server openssh-client cron libpam0g-dev
  # bench/ssh-latency.sh: a PAM session opened without sshd
  pamtester
  # mail from sandboxes goes to a real MTA in the tests (Debian's default
  # exim configuration delivers locally only)
  exim4-daemon-light
  # crates/corral/tests/metrics.rs: a real Prometheus scrapes `corral metrics
  # serve`, and promtool checks `corral metrics dump`
  prometheus
  # the offline HTML pages (the bench report, `corral history --html`) are
  # looked at in a headless browser: chromium --headless --screenshot
  chromium
  # cgroup v2 tests boot a Debian kernel under qemu
  qemu-system-x86 linux-image-amd64 busybox-static cpio
)

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
for svc in nginx php8.2-fpm php-fpm ssh cron exim4 prometheus mariadb apache2; do
  if [ -x "/etc/init.d/$svc" ]; then "/etc/init.d/$svc" stop >/dev/null 2>&1 || true; fi
done

if ! command -v cargo >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
  echo "install-deps: no Rust toolchain found: install stable Rust with rustup (https://rustup.rs), then run this again" >&2
  exit 1
fi
# scripts/test.sh gates on rustfmt and clippy: add them to a rustup toolchain
# that lacks them.
export PATH="$HOME/.cargo/bin:$PATH"
for tool in rustfmt:cargo-fmt clippy:cargo-clippy; do
  if ! command -v "${tool#*:}" >/dev/null 2>&1 && command -v rustup >/dev/null 2>&1; then
    rustup component add "${tool%%:*}"
  fi
done
echo "install-deps: ok" >&2
