#!/usr/bin/env bash
# The one list of what an installed corral is: builds the release binaries
# and pam_corral.so, then lays every installed file out under DESTDIR as it
# goes under /. scripts/install.sh (a source install, PREFIX /usr/local) and
# scripts/build-deb.sh (the Debian package, PREFIX /usr) both use it.
#
#   PREFIX/bin/corral, corral-init, corral-sendmail     the tool, the tenant init, the sandbox's sendmail
#   PREFIX/lib/corral/corral-cli                        the full command line, which `corral` execs for
#                                                       everything but `corral run`'s fast path
#   PREFIX/sbin/corral-shell (setuid root)              the login shell (docs/access.md)
#   PREFIX/sbin/corral-account-hook                     panels' account hook (config/hooks/)
#   PREFIX/lib/corral/cgi-bin/corral-cgi                the CGI shim (config/corral-cgi)
#   /lib/MULTIARCH/security/pam_corral.so               the PAM session module
#   SYSTEMD/*.service                                   every config/*.service (corral-gateway,
#                                                       corral-services, corral-mail-broker, corral-metrics...)
#   /etc/init.d/corral-services                         boot-time bring-up without systemd (config/corral-boot)
#   /etc/corral/profile.toml, access.toml, gateway.toml configuration (conffiles in the package)
#   PREFIX/share/corral/                                web server snippets, the PHP-FPM service, Grafana
#   PREFIX/share/man/man1/*.1.gz                        corral(1), corral-run(1)... (`corral generate-docs`)
#   PREFIX/share/{bash-completion,zsh,fish}/...         shell completions
#   PREFIX/share/doc/corral/                            README.md and docs/*.md
# where SYSTEMD is /lib/systemd/system for PREFIX /usr, /etc/systemd/system
# otherwise. Paths in the installed scripts and units name PREFIX.
# A new unit (e.g. a usage-history collector) is one more config/NAME.service:
# it is installed with the others; say in config/NAME.service whether it is
# meant to be enabled.
#
# Usage: scripts/layout.sh DESTDIR [PREFIX]   (PREFIX default /usr/local)
# DESTDIR must be empty or absent. Everything is owned by root (run as root).
source "$(dirname "$0")/lib.sh"
need_root
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 DESTDIR [PREFIX]" >&2; exit 2; }
DEST=$1
PREFIX=${2:-/usr/local}
case $PREFIX in
  /*) ;;
  *) echo "$0: PREFIX $PREFIX: expected an absolute path" >&2; exit 2 ;;
esac
PREFIX=${PREFIX%/}
if [ -e "$DEST" ] && [ -n "$(ls -A "$DEST")" ]; then
  echo "$0: DESTDIR $DEST: expected an empty or absent directory" >&2
  exit 2
fi
cd "$REPO"
build_release
build_pam_module release
bin=$(dirname "$CORRAL")
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
if [ "$PREFIX" = /usr ]; then
  systemd=/lib/systemd/system zsh=$PREFIX/share/zsh/vendor-completions
else
  systemd=/etc/systemd/system zsh=$PREFIX/share/zsh/site-functions
fi

d() { install -d -m 0755 "$DEST$1"; }
# binary MODE SOURCE DEST-PATH: installed without symbols, like dh_strip.
binary() {
  cp "$2" "$gen/stripped"
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$gen/stripped"
  file "$1" "$gen/stripped" "$3"
  rm "$gen/stripped"
}
# file MODE SOURCE DEST-PATH
file() { d "$(dirname "$3")"; install -m "$1" "$2" "$DEST$3"; }
# Scripts, units and examples name the corral of a source install
# (/usr/local/bin/corral, /usr/local/lib/corral/); installed, they name this
# PREFIX's.
rewritten() {
  d "$(dirname "$3")"
  sed -e "s#/usr/local/bin/corral#$PREFIX/bin/corral#g" \
      -e "s#/usr/local/lib/corral/#$PREFIX/lib/corral/#g" \
      -e "s#/usr/local/sbin/corral#$PREFIX/sbin/corral#g" "$2" > "$DEST$3"
  chmod "$1" "$DEST$3"
}

umask 022
mkdir -p "$DEST"
chmod 0755 "$DEST"
gen=$(mktemp -d)
# On failure, DESTDIR (absent or empty before) goes too: nothing half laid out.
trap 'rc=$?; rm -rf "$gen"; if [ "$rc" != 0 ]; then rm -rf --one-file-system "$DEST"; fi' EXIT

binary 0755 "$bin/corral" "$PREFIX/bin/corral"
binary 0755 "$bin/corral-cli" "$PREFIX/lib/corral/corral-cli"
binary 0755 "$bin/corral-init" "$PREFIX/bin/corral-init"
binary 0755 "$bin/corral-sendmail" "$PREFIX/bin/corral-sendmail"
binary 4755 "$bin/corral-shell" "$PREFIX/sbin/corral-shell"
rewritten 0755 config/hooks/corral-account-hook "$PREFIX/sbin/corral-account-hook"
rewritten 0755 config/corral-cgi "$PREFIX/lib/corral/cgi-bin/corral-cgi"
binary 0644 "$CORRAL_PAM_MODULE" "/lib/$multiarch/security/pam_corral.so"

for unit in config/*.service; do
  rewritten 0644 "$unit" "$systemd/$(basename "$unit")"
done
# The init script has the name of the unit that does the same, so that
# systemd runs the unit and ignores the script.
rewritten 0755 config/corral-boot /etc/init.d/corral-services

# Configuration. profile.toml is the built-in default, commented: what
# tenants get until it is edited (`corral check` validates it).
"$bin/corral" profile default > "$gen/profile.toml"
file 0644 "$gen/profile.toml" /etc/corral/profile.toml
file 0644 config/gateway.toml /etc/corral/gateway.toml
d /etc/corral
cat > "$DEST/etc/corral/access.toml" <<EOT
# Who is caged at login (docs/access.md). Root never is.
# min_uid = 1000          # default: UID_MIN of /etc/login.defs
exempt = []               # accounts never caged, e.g. ["admin"]
# group = "tenants"       # only members of this group are caged
corral = "$PREFIX/bin/corral"
EOT
chmod 0644 "$DEST/etc/corral/access.toml"

share=$PREFIX/share/corral
for f in nginx-corral.conf nginx-corral-fpm.conf apache-corral.conf lighttpd-corral.conf \
         services-php-fpm.toml grafana-corral.json; do
  rewritten 0644 "config/$f" "$share/$f"
done

# Man pages and completions from the clap definitions.
"$bin/corral" generate-docs --out "$gen" >/dev/null
d "$PREFIX/share/man/man1"
for page in "$gen"/man1/*.1; do
  gzip -9n < "$page" > "$DEST$PREFIX/share/man/man1/$(basename "$page").gz"
  chmod 0644 "$DEST$PREFIX/share/man/man1/$(basename "$page").gz"
done
file 0644 "$gen/completions/corral.bash" "$PREFIX/share/bash-completion/completions/corral"
file 0644 "$gen/completions/_corral" "$zsh/_corral"
file 0644 "$gen/completions/corral.fish" "$PREFIX/share/fish/vendor_completions.d/corral.fish"

doc=$PREFIX/share/doc/corral
file 0644 README.md "$doc/README.md"
for f in docs/*.md; do
  rewritten 0644 "$f" "$doc/$(basename "$f")"
done
