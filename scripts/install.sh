#!/usr/bin/env bash
# Builds corral and installs it from this checkout (as root), the same files
# as the Debian package (scripts/layout.sh lists them) under PREFIX:
#   $PREFIX/bin/corral, corral-init, corral-sendmail, $PREFIX/lib/corral/corral-cli
#   (the full command line `corral` execs), $PREFIX/sbin/corral-shell
#   (setuid root), corral-account-hook, /lib/<multiarch>/security/pam_corral.so,
#   /etc/systemd/system/corral-*.service, /etc/init.d/corral-services,
#   /etc/corral/{profile,access,gateway}.toml (each kept if it exists),
#   man pages, shell completions, $PREFIX/share/corral (web server snippets).
# Usage: scripts/install.sh [PREFIX]   (default /usr/local)
#        DESTDIR=DIR scripts/install.sh [PREFIX]   installs under DIR instead of /
# On Debian, prefer the package: scripts/build-deb.sh, then
# apt install ./corral_*.deb (README.md, "Install").
# Nothing is enabled or configured to use them: units, sshd/cron/su PAM lines
# and login shells are the operator's choice (docs/access.md).
source "$(dirname "$0")/lib.sh"
need_root
PREFIX=${1:-/usr/local}
ROOT=${DESTDIR:-/}
cd "$REPO"
scripts/install-deps.sh --for build
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
scripts/layout.sh "$stage/root" "$PREFIX"
# Configuration the operator may have edited is never replaced: the new
# default goes next to it as NAME.dist.
(cd "$stage/root" && find etc -type f) | while read -r f; do
  if [ -e "$ROOT/$f" ] && ! cmp -s "$ROOT/$f" "$stage/root/$f"; then
    mv "$stage/root/$f" "$stage/root/$f.dist"
    echo "kept $ROOT/$f (the new default: $ROOT/$f.dist)" >&2
  fi
done
# Everything else replaces what is there (owner, mode, setuid kept; existing
# directories and directory symlinks such as a merged /lib left alone).
mkdir -p "$ROOT"
tar -C "$stage/root" -cf - . | tar -C "$ROOT" -xf - --keep-directory-symlink --no-overwrite-dir
if [ "$ROOT" != / ]; then
  echo "installed under $ROOT$PREFIX (file list: scripts/layout.sh)" >&2
  exit 0
fi
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  echo "enable at boot: systemctl enable --now corral-services (and corral-gateway, corral-mail-broker, corral-metrics as needed)" >&2
else
  echo "enable at boot: update-rc.d corral-services defaults" >&2
fi
echo "installed under $PREFIX (file list: scripts/layout.sh); man corral" >&2
