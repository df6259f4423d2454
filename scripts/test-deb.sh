#!/usr/bin/env bash
# The package test (scripts/test.sh runs it): builds the .deb
# (scripts/build-deb.sh), checks it with lintian, then installs it with a real
# `apt-get install ./corral_*.deb` into a fresh Debian chroot (mmdebstrap
# minbase + man-db, from apt's mirror; its dependencies come from the mirror
# too) and checks, inside it:
#   corral --version, corral check on the shipped /etc/corral, `man corral`
#   (man-db) and other pages, the completions, the conffiles, the units and
#   init script, that installing started nothing, that an edited conffile
#   survives a reinstall, and that purge leaves nothing of the package, not
#   even the links of units and the init script the operator enabled.
# Then scripts/install.sh into a scratch DESTDIR must lay out the same files.
# The chroot runs in a mount namespace of its own (its /proc vanishes with
# it); everything is removed on exit, also on failure.
# The base chroot is cached as a tarball in /var/cache/corral-test (rebuilt
# when older than a week): CORRAL_DEB_TEST_SUITE picks the suite (bookworm).
source "$(dirname "$0")/lib.sh"
need_root
cd "$REPO"
scripts/install-deps.sh --for test >/dev/null
suite=${CORRAL_DEB_TEST_SUITE:-bookworm}
fail() { echo "test-deb: FAIL: $*" >&2; exit 1; }

work=$(mktemp -d /var/tmp/corral-test-deb.XXXXXX)
cleanup() {
  set +e +o pipefail
  # Nothing is mounted here from this namespace; unmount anyway if a
  # mount leaked, never following into the host.
  if [ -n "${work:-}" ] && [ -d "$work" ]; then
    findmnt -rn -o TARGET | grep -F "$work/" | sort -r | while read -r m; do umount -l "$m" || true; done
    rm -rf --one-file-system "$work"
  fi
}
trap cleanup EXIT

echo "== build-deb" >&2
deb=$(scripts/build-deb.sh "$work/out")
version=$(dpkg-deb -f "$deb" Version)
echo "test-deb: $deb ($(du -h "$deb" | cut -f1))" >&2

echo "== lintian" >&2
# lintian says it would rather not run as root; that line is not a finding.
rc=0
lintian --fail-on error,warning "$deb" > "$work/lintian.txt" 2>&1 || rc=$?
grep -v 'running with root privileges is not recommended' "$work/lintian.txt" >&2 || true
[ "$rc" = 0 ] || fail "lintian found errors or warnings (exit $rc)"
echo "test-deb: lintian: no errors or warnings" >&2

echo "== base chroot ($suite minbase + man-db)" >&2
cache=/var/cache/corral-test
base=$cache/$suite-minbase-man-db.tar
mkdir -p "$cache"
if [ ! -s "$base" ] || [ -n "$(find "$base" -mtime +6)" ]; then
  # The .tar ending tells mmdebstrap to write a tarball.
  tmp_base=$cache/.new-$$-$suite.tar
  mmdebstrap --quiet --variant=minbase --include=man-db "$suite" "$tmp_base" ||
    { rm -f "$tmp_base"; fail "mmdebstrap $suite failed (is apt's mirror reachable?)"; }
  mv "$tmp_base" "$base"
fi
root=$work/root
mkdir "$root"
tar -C "$root" -xf "$base"
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp "$deb" "$root/root/"
# Every service start a maintainer script asks for is logged and refused.
cat > "$root/usr/sbin/policy-rc.d" <<'EOT'
#!/bin/sh
echo "$*" >> /var/log/policy-rc.d.log
exit 101
EOT
chmod 0755 "$root/usr/sbin/policy-rc.d"

cat > "$root/root/test-in-chroot.sh" <<EOT
#!/bin/bash
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8
fail() { echo "test-deb (chroot): FAIL: \$*" >&2; exit 1; }
step() { echo "test-deb (chroot): \$*" >&2; }
cd /root
find / -xdev \\( -path /proc -o -path /root -o -path /var/log -o -path /var/cache -o -path /var/lib/apt \\
  -o -path /var/lib/dpkg -o -path /tmp \\) -prune -o -print | sort > /root/before.txt

apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends ./$(basename "$deb") > /root/apt.log 2>&1 ||
  { cat /root/apt.log >&2; fail "apt-get install ./$(basename "$deb")"; }
step "apt-get install ./$(basename "$deb"): ok"

out=\$(corral --version)
[ "\$out" = "corral $version" ] || fail "corral --version: \$out, expected corral $version"
step "corral --version: \$out"

corral check > /root/check.txt 2>&1 || { cat /root/check.txt >&2; fail "corral check"; }
for f in profile access gateway; do
  grep -qx "/etc/corral/\$f.toml: ok" /root/check.txt || { cat /root/check.txt >&2; fail "corral check did not validate /etc/corral/\$f.toml"; }
done
step "corral check: \$(tr '\n' ' ' < /root/check.txt)"
# A broken file is found, with its name.
cp /etc/corral/gateway.toml /root/gateway.toml.orig
echo 'unmapped = "sometimes"' >> /etc/corral/gateway.toml
if corral check > /root/check.txt 2>&1; then fail "corral check accepted a broken gateway.toml"; fi
grep -q '/etc/corral/gateway.toml' /root/check.txt || fail "corral check's error does not name the file: \$(cat /root/check.txt)"
cp /root/gateway.toml.orig /etc/corral/gateway.toml

[ "\$(man -w corral)" = /usr/share/man/man1/corral.1.gz ] || fail "man -w corral: \$(man -w corral 2>&1)"
man -P cat corral 2>/dev/null | grep -q 'Persisted per-tenant sandboxes' || fail "man corral: not corral's page"
man -P cat corral-run 2>/dev/null | grep -q -- '--detach' || fail "man corral-run: no --detach"
for page in corral-service-ls corral-gateway corral-shell corral-init corral-sendmail corral-account-hook; do
  man -w "\$page" >/dev/null 2>&1 || fail "man \$page: no page"
done
step "man corral, corral-run and the other \$(ls /usr/share/man/man1/corral*.1.gz | wc -l) pages: ok"

bash -c 'source /usr/share/bash-completion/completions/corral && complete -p corral' >/dev/null ||
  fail "bash completion does not register for corral"
for f in /usr/share/zsh/vendor-completions/_corral /usr/share/fish/vendor_completions.d/corral.fish; do
  [ -s "\$f" ] || fail "\$f missing"
done
step "completions: ok"

for f in /etc/corral/profile.toml /etc/corral/access.toml /etc/corral/gateway.toml /etc/init.d/corral-services; do
  grep -qx "\$f" /var/lib/dpkg/info/corral.conffiles || fail "\$f is not a conffile"
done
grep -q 'corral = "/usr/bin/corral"' /etc/corral/access.toml || fail "access.toml does not name /usr/bin/corral"
for u in corral-gateway corral-services corral-mail-broker corral-metrics; do
  grep -q '^ExecStart=/usr/bin/corral ' /lib/systemd/system/\$u.service || fail "\$u.service: ExecStart is not /usr/bin/corral"
done
[ "\$(stat -c %a /usr/sbin/corral-shell)" = 4755 ] || fail "corral-shell is not setuid root"
# corral execs the full command line from /usr/lib/corral for all but run's fast path.
[ -x /usr/lib/corral/corral-cli ] || fail "/usr/lib/corral/corral-cli missing"
corral --version | grep -q '^corral ' || fail "corral --version (through corral-cli): \$(corral --version 2>&1)"
# The CGI shim runs corral-cli directly: the path it names must be installed.
shim_cli=\$(awk '\$1 == "exec" {print \$2}' /usr/lib/corral/cgi-bin/corral-cgi | sort -u)
[ "\$shim_cli" = /usr/lib/corral/corral-cli ] || fail "the CGI shim runs '\$shim_cli', not /usr/lib/corral/corral-cli"
ls /lib/*/security/pam_corral.so >/dev/null 2>&1 || fail "pam_corral.so missing"
# Installed, started nothing, enabled nothing (the init script is registered disabled).
if [ -s /var/log/policy-rc.d.log ] && grep -q corral /var/log/policy-rc.d.log; then
  fail "installing asked to start: \$(grep corral /var/log/policy-rc.d.log)"
fi
if ls /etc/rc[2-5].d/S*corral* >/dev/null 2>&1; then fail "corral-services enabled at boot"; fi
ls /etc/rc0.d/K*corral-services >/dev/null 2>&1 || fail "the init script is not registered"
step "conffiles, units, init script (registered, disabled), setuid shell, PAM module: ok"

# An edited conffile survives a reinstall of the package.
echo '# edited by the operator' >> /etc/corral/gateway.toml
dpkg -i --force-confold /root/$(basename "$deb") >/dev/null 2>&1 || fail "reinstall"
grep -q '^# edited by the operator' /etc/corral/gateway.toml || fail "reinstall replaced an edited conffile"
step "reinstall keeps an edited conffile: ok"

# The operator enables the gateway and the boot-time bring-up: the link
# `systemctl enable corral-gateway` makes (no systemd in the chroot), and
# update-rc.d's; purge must take those links away too.
mkdir -p /etc/systemd/system/multi-user.target.wants
ln -s /lib/systemd/system/corral-gateway.service /etc/systemd/system/multi-user.target.wants/
update-rc.d corral-services enable >/dev/null
ls /etc/rc2.d/S*corral-services >/dev/null 2>&1 || fail "update-rc.d corral-services enable made no link"
apt-get purge -y -q corral > /root/apt.log 2>&1 || { cat /root/apt.log >&2; fail "apt-get purge corral"; }
find / -xdev \\( -path /proc -o -path /root -o -path /var/log -o -path /var/cache -o -path /var/lib/apt \\
  -o -path /var/lib/dpkg -o -path /tmp \\) -prune -o -print | sort > /root/after.txt
# What purge left: files of corral's, compared with before the install
# (the dependencies apt pulled in stay, as apt leaves them).
left=\$(comm -13 /root/before.txt /root/after.txt | grep -i corral || true)
[ -z "\$left" ] || fail "purge left: \$left"
dpkg -s corral >/dev/null 2>&1 && fail "corral still known to dpkg after purge"
step "purge (after enabling the gateway and the init script): nothing of corral left"
EOT
chmod 0755 "$root/root/test-in-chroot.sh"

echo "== install, check, reinstall and purge in the chroot" >&2
# A private mount namespace: its /proc goes away with it.
unshare --mount --propagation private --fork bash -c '
  set -e
  mount -t proc proc "$1/proc"
  chroot "$1" /root/test-in-chroot.sh
' _ "$root" || fail "in the chroot (see above)"

echo "== scripts/install.sh into a DESTDIR: the same files as the package" >&2
DESTDIR=$work/src-install scripts/install.sh /usr > "$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; fail "scripts/install.sh"; }
(cd "$work/src-install" && find . -type f | sort) > "$work/install.txt"
dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {print $6}' | grep -v '^./usr/share/doc/corral/\(copyright\|changelog.gz\)$' |
  grep -v '^./usr/share/lintian/' | sort > "$work/deb.txt"
if ! diff -u "$work/deb.txt" "$work/install.txt" >&2; then
  fail "install.sh and the package install different files"
fi
echo "test-deb: install.sh lays out the package's $(wc -l < "$work/deb.txt") files" >&2
echo "test-deb: ok" >&2
