#!/usr/bin/env bash
# Builds corral and installs it from this checkout (as root):
#   $PREFIX/bin/corral, $PREFIX/bin/corral-init    the tool and the tenant init
#   $PREFIX/bin/corral-sendmail                    the sandbox's sendmail (docs/access.md)
#   $PREFIX/sbin/corral-shell (setuid root)        the login shell (docs/access.md)
#   /lib/<multiarch>/security/pam_corral.so        the PAM session module
#   /etc/corral/access.toml                        who is caged (kept if it exists)
# Usage: scripts/install.sh [PREFIX]   (default /usr/local)
# Nothing is configured to use them: sshd/cron/su PAM lines and login shells
# are the operator's choice (docs/access.md).
source "$(dirname "$0")/lib.sh"
need_root
PREFIX=${1:-/usr/local}
cd "$REPO"
scripts/install-deps.sh
build_release
build_pam_module release
bin=$(dirname "$CORRAL")
install -d "$PREFIX/bin" "$PREFIX/sbin" /etc/corral
install -o root -g root -m 0755 "$bin/corral" "$bin/corral-init" "$bin/corral-sendmail" "$PREFIX/bin/"
install -o root -g root -m 4755 "$bin/corral-shell" "$PREFIX/sbin/corral-shell"
security=/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)/security
install -d "$security"
install -o root -g root -m 0644 "$CORRAL_PAM_MODULE" "$security/pam_corral.so"
if [ ! -e /etc/corral/access.toml ]; then
  cat > /etc/corral/access.toml <<EOT
# Who is caged at login (docs/access.md). Root never is.
# min_uid = 1000          # default: UID_MIN of /etc/login.defs
exempt = []               # accounts never caged, e.g. ["admin"]
# group = "tenants"       # only members of this group are caged
corral = "$PREFIX/bin/corral"
EOT
fi
# Boot-time bring-up of tenants with services (not enabled here).
if [ -d /run/systemd/system ]; then
  sed "s#/usr/local/bin/corral#$PREFIX/bin/corral#" config/corral-services.service \
    > /etc/systemd/system/corral-services.service
  echo "enable at boot: systemctl daemon-reload && systemctl enable corral-services" >&2
else
  sed "s#/usr/local/bin/corral#$PREFIX/bin/corral#" config/corral-boot > /etc/init.d/corral-boot
  chmod 0755 /etc/init.d/corral-boot
  echo "enable at boot: update-rc.d corral-boot defaults" >&2
fi
echo "installed: $PREFIX/bin/corral $PREFIX/bin/corral-init $PREFIX/bin/corral-sendmail $PREFIX/sbin/corral-shell $security/pam_corral.so" >&2
