#!/usr/bin/env bash
# Builds the Debian package of corral from this checkout and prints its path:
# target/deb/corral_VERSION_ARCH.deb. The files are scripts/layout.sh's (the
# same as scripts/install.sh's) with PREFIX /usr; the binaries are the static
# release build. Packed with dpkg-deb from that staging tree: no packaging
# tool to build first, and the file list stays in one place.
#
# What the package does (maintainer scripts, written below):
#   - /etc/corral/*.toml and /etc/init.d/corral-services are conffiles;
#   - installing starts and enables nothing: corral changes how logins, CGI
#     and PHP run once it is configured (docs/access.md, docs/gateway.md), so
#     the operator enables its units (`systemctl enable --now corral-gateway`,
#     ...); the init script is registered disabled (update-rc.d defaults-disabled);
#   - an upgrade restarts the daemons that are running (try-restart of every
#     unit but the Type=oneshot ones: corral-services' stop takes every
#     sandbox down, and sandboxes outlive corral's own processes);
#   - removing stops the daemons, never the tenants' sandboxes;
#   - purge also removes the init script's links, the units' enablement and
#     /etc/corral if nothing else is in it; what corral made while running
#     (tenants' overrides, suspension records, /var/lib/corral/tmp,
#     /var/log/corral) is the operator's and the tenants' data and is kept.
#
# Usage: scripts/build-deb.sh [OUTDIR]   (default target/deb)
# CORRAL_DEB_VERSION overrides the version (default: the workspace's).
source "$(dirname "$0")/lib.sh"
need_root
cd "$REPO"
OUT=$(mkdir -p "${1:-$REPO/target/deb}" && cd "${1:-$REPO/target/deb}" && pwd)
scripts/install-deps.sh --for build >/dev/null

version=${CORRAL_DEB_VERSION:-$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)}
[ -n "$version" ] || { echo "$0: no version in Cargo.toml's [workspace.package]" >&2; exit 1; }
arch=$(dpkg --print-architecture)
maintainer=${CORRAL_DEB_MAINTAINER:-corral developers <corral@example.org>}
# The commit's time: reproducible dates in the changelog and the archive.
if commit_time=$(git -C "$REPO" log -1 --format=%ct 2>/dev/null); then
  export SOURCE_DATE_EPOCH=$commit_time
else
  export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(date +%s)}
fi
commit=$(git -C "$REPO" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
scripts/layout.sh "$root" /usr >&2

# Package-only files: copyright, changelog, lintian's overrides.
doc=$root/usr/share/doc/corral
years=$(git -C "$REPO" log --format=%cd --date=format:%Y 2>/dev/null | sort -u | sed -n '1p;$p' | uniq | paste -sd-)
cat > "$doc/copyright" <<'EOT'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: corral

Files: *
Copyright: __YEARS__ the corral developers
License: Apache-2.0
 Licensed under the Apache License, Version 2.0 (the "License"); you may not
 use this software except in compliance with the License.
 .
 On Debian systems, the full text of the Apache License, Version 2.0 can be
 found in /usr/share/common-licenses/Apache-2.0.
 .
 The static binaries also contain the Rust crates corral depends on (each
 under the MIT or Apache-2.0 license, or both; see the workspace's
 Cargo.lock) and the GNU C Library (LGPL-2.1+,
 /usr/share/common-licenses/LGPL-2.1).
EOT
sed -i "s/__YEARS__/${years:-$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y)}/" "$doc/copyright"
{
  echo "corral ($version) unstable; urgency=medium"
  echo
  echo "  * Built from the corral repository, commit $commit."
  echo
  echo " -- $maintainer  $(date -R -u -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n > "$doc/changelog.gz"
install -d "$root/usr/share/lintian/overrides"
cat > "$root/usr/share/lintian/overrides/corral" <<'EOT'
# corral-shell is a login shell that enters the user's sandbox: it needs root
# for setns and drops every privilege before running anything
# (docs/access.md, docs/security.md).
corral: elevated-privileges 4755 root/root [usr/sbin/corral-shell]
# Static on purpose (glibc static-pie): starting a dynamically linked corral
# was most of what `corral run` adds to a command (docs/architecture.md). A
# static PIE is an ELF shared object without an interpreter, which lintian
# takes for a library without its dependencies.
corral: shared-library-lacks-prerequisites [usr/bin/corral]
corral: shared-library-lacks-prerequisites [usr/bin/corral-init]
corral: shared-library-lacks-prerequisites [usr/lib/corral/corral-cli]
corral: shared-library-lacks-prerequisites [usr/bin/corral-sendmail]
corral: shared-library-lacks-prerequisites [usr/sbin/corral-shell]
EOT

# Library dependencies of the one dynamically linked file, pam_corral.so.
mkdir -p "$work/src/debian"
printf 'Source: corral\n\nPackage: corral\nArchitecture: any\n' > "$work/src/debian/control"
pam=$(cd "$root" && find lib -name pam_corral.so)
install -d -m 0755 "$root/DEBIAN"
shlibs=$(cd "$work/src" && dpkg-shlibdeps -O "$root/$pam" | sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || { echo "$0: dpkg-shlibdeps found no dependencies of $pam" >&2; exit 1; }

units=$(cd "$root/lib/systemd/system" && ls -- *.service | tr '\n' ' ')
daemons=$(cd "$root/lib/systemd/system" && grep -L '^Type=oneshot' -- *.service | tr '\n' ' ')
cat > "$root/DEBIAN/control" <<EOT
Package: corral
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $(du -sk --apparent-size --exclude=DEBIAN "$root" | cut -f1)
Depends: $shlibs, iproute2, nftables
Suggests: nginx | apache2 | lighttpd, php-fpm
Section: admin
Priority: optional
Description: persisted per-tenant sandboxes, cgroup limits and a CGI gateway
 corral gives every tenant of a shared web hosting server (by default a Unix
 user) a sandbox built once from a profile template: mount, pid, ipc, uts,
 cgroup and network namespaces held by a small per-tenant init, which later
 processes join in constant time, with cgroup limits (CPU, memory,
 processes, IO, entry processes), a seccomp filter and no capabilities.
 .
 The package has the corral command, the login shell corral-shell, the PAM
 module pam_corral.so, a FastCGI gateway for nginx (corral gateway), the
 mail broker for PHP's mail() and a Prometheus exporter, with systemd units
 for each (not enabled) and web server examples in /usr/share/corral.
EOT
(cd "$root" && find etc -type f | sort | sed 's|^|/|') > "$root/DEBIAN/conffiles"

cat > "$root/DEBIAN/postinst" <<EOT
#!/bin/sh
# corral starts and enables nothing on install (scripts/build-deb.sh says why).
set -e
if [ "\$1" = configure ]; then
    if command -v update-rc.d >/dev/null 2>&1; then
        update-rc.d corral-services defaults-disabled >/dev/null
    fi
    # Records the units so that purge removes the links of whichever the
    # operator enables (as dh_installsystemd --no-enable does).
    if command -v deb-systemd-helper >/dev/null 2>&1; then
        deb-systemd-helper update-state ${units% } >/dev/null || true
    fi
    if [ -d /run/systemd/system ]; then
        systemctl --system daemon-reload >/dev/null || true
        if [ -n "\$2" ]; then
            deb-systemd-invoke try-restart ${daemons% } >/dev/null || true
        fi
    fi
fi
exit 0
EOT
cat > "$root/DEBIAN/prerm" <<EOT
#!/bin/sh
# Stops corral's daemons on removal; tenants' sandboxes keep running.
set -e
if [ "\$1" = remove ] && [ -d /run/systemd/system ]; then
    deb-systemd-invoke stop ${daemons% } >/dev/null || true
fi
exit 0
EOT
cat > "$root/DEBIAN/postrm" <<EOT
#!/bin/sh
set -e
if [ "\$1" = purge ]; then
    if command -v update-rc.d >/dev/null 2>&1; then
        update-rc.d corral-services remove >/dev/null
    fi
    if command -v deb-systemd-helper >/dev/null 2>&1; then
        deb-systemd-helper purge ${units% } >/dev/null || true
    fi
    rmdir --ignore-fail-on-non-empty /etc/corral 2>/dev/null || true
fi
if [ "\$1" = remove ] && [ -d /run/systemd/system ]; then
    systemctl --system daemon-reload >/dev/null || true
fi
exit 0
EOT
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm" "$root/DEBIAN/postrm"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) \
  > "$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/conffiles" "$root/DEBIAN/md5sums"

deb=$OUT/corral_${version}_${arch}.deb
dpkg-deb --root-owner-group --build "$root" "$deb" >&2
echo "$deb"
