#!/usr/bin/env python3
"""Where `corral up` and `corral down` spend their time as tenants grow,
phase by phase (issue 17, item 4).

For each size N: N idle tenants brought up in bulk (250 names per `corral
up`), then ROUNDS single `corral up` / `corral down` of one more tenant with
the N others up, then `corral down --all`; every command with CORRAL_TIMING=1,
whose per-tenant lines (crates/corral-sandbox/src/phases.rs) give each phase.
Prints, per phase, the median at each size and its ratio to the smallest size:
the whole command (wall), the sum of the phases, and each phase, for the bulk
`up`, the single `up`, the single `down` and `down --all`.

Usage: bench/scale-phases.py --corral PATH [--sizes 10,5000] [--rounds 8] [--tmpfs] [--hold S] [--json]
(as root; run it under `flock /tmp/corral-bench.lock`).

The tenants are the scale suite's users (`corral-s00001`…, group
`corral-scale`, homes under /var/lib/corral-bench/homes): those missing are
added in one edit of the passwd and shadow files and, at the end, removed
in one edit of them (and of group, gshadow, subuid, subgid) under the shadow
suite's lock (`useradd`/`userdel` take ~60 ms each, `newusers` ~20 ms);
users that existed before are kept. State and config live in a private directory under /run/corral-bench,
cgroups under corral/scalephase-PID. Everything it made is removed on exit,
also after a failure or Ctrl-C.
"""
import argparse
import fcntl
import grp
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HOMES = "/var/lib/corral-bench/homes"
GROUP = "corral-scale"
SCALE_LOCK = "/run/lock/corral-bench-scale.lock"
BULK = 250
TIMING = re.compile(r"corral: timing: (up|down) (\S+): (.*?); total ([0-9.]+) ms")


def name(i):
    return f"corral-s{i:05}"


def user_exists(n):
    return subprocess.run(["getent", "passwd", n], capture_output=True).returncode == 0


def rewrite_without(path, names):
    """Drop the lines whose first field is in `names`; atomic, same mode."""
    if not os.path.exists(path):
        return
    with open(path) as f:
        lines = f.readlines()
    kept = [l for l in lines if l.split(":", 1)[0] not in names]
    if len(kept) == len(lines):
        return
    st = os.stat(path)
    tmp = path + ".corral-bench"
    # Owner and mode set before a byte is written: shadow's hashes are
    # never in a file others may read.
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchown(fd, st.st_uid, st.st_gid)
        os.fchmod(fd, st.st_mode & 0o7777)
        f.writelines(kept)
        f.flush()
        os.fsync(fd)
    os.rename(tmp, path)


def add_users(users, gid):
    """One edit of passwd and shadow under lckpwdf's lock: `newusers` hashes
    a password per user (~20 ms each here) and `useradd` rewrites the files
    per user. UIDs are the first free block above every UID in use from
    1000 up; no password (`*`), no login shell, a home each."""
    with open("/etc/.pwd.lock", "a") as lk:
        fcntl.lockf(lk, fcntl.LOCK_EX)
        with open("/etc/passwd") as f:
            fields = [l.split(":") for l in f if l.count(":") >= 6]
        used = [int(x[2]) for x in fields if x[2].isdigit()]
        base = max([u for u in used if 1000 <= u < 60000], default=999) + 1
        if base + len(users) >= 60000:
            sys.exit("scale-phases.py: no free block of UIDs below 60000")
        day = int(time.time() // 86400)
        for p in ["/etc/passwd", "/etc/shadow"]:
            # An entry appended to a last line without its newline would
            # join that account's line.
            with open(p, "rb") as f:
                data = f.read()
            if data and not data.endswith(b"\n"):
                with open(p, "a") as g:
                    g.write("\n")
        with open("/etc/passwd", "a") as pw, open("/etc/shadow", "a") as sh:
            for k, n in enumerate(users):
                pw.write(f"{n}:x:{base + k}:{gid}:corral-bench scale:{HOMES}/{n}:/usr/sbin/nologin\n")
                sh.write(f"{n}:*:{day}:0:99999:7:::\n")
    for k, n in enumerate(users):
        h = os.path.join(HOMES, n)
        os.makedirs(h, mode=0o700, exist_ok=True)
        os.chown(h, base + k, gid)


def remove_users(users, group):
    """One edit of the account files under lckpwdf's lock (/etc/.pwd.lock)."""
    names = set(users)
    with open("/etc/.pwd.lock", "a") as lk:
        fcntl.lockf(lk, fcntl.LOCK_EX)
        for p in ["/etc/passwd", "/etc/shadow", "/etc/subuid", "/etc/subgid"]:
            rewrite_without(p, names)
        for p in ["/etc/group", "/etc/gshadow"]:
            rewrite_without(p, names | ({GROUP} if group else set()))
    for n in users:
        shutil.rmtree(os.path.join(HOMES, n), ignore_errors=True)


def profile_for(corral, tmp_dir, cpus):
    """The bench profile (crates/corral-bench/src/suites/env.rs): the default
    one with /tmp and PHP sessions in the private dir and limits that never bind."""
    p = subprocess.run([corral, "profile", "default"], check=True, capture_output=True, text=True).stdout
    for old, new in [
        ('dir = "/var/lib/corral/tmp/$USER"', f'dir = "{tmp_dir}/tmp/$USER"'),
        ('src = "/var/lib/corral/php-sessions/$USER"', f'src = "{tmp_dir}/php-sessions/$USER"'),
        ("\n[limits]\n", f'\n[limits]\ncpu = "{cpus * 100}%"\nprocesses = 4000\nentry_processes = 500\n'),
    ]:
        if old not in p:
            sys.exit(f"scale-phases.py: the default profile changed: {old!r} not found")
        p = p.replace(old, new)
    return p


def median(xs):
    return statistics.median(xs) if xs else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corral", required=True, help="the corral program (its corral-cli next to it)")
    ap.add_argument("--sizes", default="10,5000")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--tmpfs", action="store_true",
                    help="keep the private directory (state, config, the tenants' /tmp) on a tmpfs of its "
                         "own, as /run is on a stock Debian (on this project's VM /run is ext4)")
    ap.add_argument("--hold", type=int, default=0, metavar="SECONDS",
                    help="at the largest size, before `down --all`, keep the tenants up for up to "
                         "SECONDS (until the hold file it names is removed): for probes by hand")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("scale-phases.py: run as root")
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    if not sizes or sizes[0] < 1 or sizes[-1] > 20000 or not 1 <= args.rounds <= 100 \
            or not 0 <= args.hold <= 3600:
        sys.exit("scale-phases.py: --sizes takes 1..20000 each, --rounds 1..100, --hold 0..3600")
    corral = os.path.abspath(args.corral)
    total = sizes[-1] + 1  # the population and the one sampled tenant

    os.makedirs("/run/lock", exist_ok=True)
    lock = open(SCALE_LOCK, "a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        sys.exit(f"scale-phases.py: another scale run holds {SCALE_LOCK}")

    os.makedirs("/run/corral-bench", exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="scale-phases.", dir="/run/corral-bench")
    mounted = False
    if args.tmpfs:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755,size=4g", "scale-phases", tmp], check=True)
        mounted = True
    parent = f"corral/scalephase-{os.getpid()}"
    env = dict(os.environ, CORRAL_STATE_DIR=f"{tmp}/state", CORRAL_CONFIG_DIR=f"{tmp}/config",
               CORRAL_CGROUP_PARENT=parent, CORRAL_TIMING="1")
    made_users, made_group = [], False

    def corral_cmd(*a, check=True):
        t = time.monotonic()
        r = subprocess.run([corral, *a], env=env, capture_output=True, text=True, timeout=1800)
        wall = (time.monotonic() - t) * 1000
        if check and r.returncode != 0:
            raise RuntimeError(f"corral {' '.join(a[:3])}…: exit {r.returncode}: {r.stderr[-2000:]}")
        lines = []
        for m in TIMING.finditer(r.stderr):
            ph = {}
            for part in m.group(3).split(", "):
                k, _, v = part.rpartition(" ")
                ph[k] = float(v)
            ph["(sum of phases)"] = float(m.group(4))
            lines.append(ph)
        return wall, lines

    def cleanup():
        # Not interrupted half-way: Ctrl-C or a signal now would leave
        # users, mounts and sandboxes behind.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        try:
            r = subprocess.run([corral, "down", "--all"], env=env, capture_output=True, text=True, timeout=3600)
            if r.returncode != 0:
                raise RuntimeError(f"exit {r.returncode}: {r.stderr[-2000:]}")
        except Exception as e:  # noqa: BLE001 - keep what a manual down needs
            print(f"scale-phases.py: down --all failed ({e}); kept the state, config and users for it: "
                  f"CORRAL_STATE_DIR={env['CORRAL_STATE_DIR']} CORRAL_CONFIG_DIR={env['CORRAL_CONFIG_DIR']} "
                  f"CORRAL_CGROUP_PARENT={parent} {corral} down --all", file=sys.stderr)
            return
        # cgroup v1 hierarchies, and v2's unified one.
        for d in [f"/sys/fs/cgroup/{h}/{parent}" for h in os.listdir("/sys/fs/cgroup")] + [f"/sys/fs/cgroup/{parent}"]:
            if os.path.isdir(d):
                for sub in os.listdir(d):
                    if os.path.isdir(f"{d}/{sub}"):
                        try:
                            os.rmdir(f"{d}/{sub}")
                        except OSError:
                            pass
                try:
                    os.rmdir(d)
                except OSError as e:
                    print(f"scale-phases.py: rmdir {d}: {e}", file=sys.stderr)
        if mounted:
            r = subprocess.run(["umount", tmp], capture_output=True, text=True)
            if r.returncode != 0:
                print(f"scale-phases.py: umount {tmp}: {r.stderr.strip()}", file=sys.stderr)
        shutil.rmtree(tmp, ignore_errors=True)
        if made_users or made_group:
            remove_users(made_users, made_group)

    def on_signal(sig, _frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    results = {"sizes": sizes, "rounds": args.rounds, "corral": corral, "phases": {}}
    try:
        if subprocess.run(["getent", "group", GROUP], capture_output=True).returncode != 0:
            subprocess.run(["groupadd", GROUP], check=True)
            made_group = True
        os.makedirs(HOMES, exist_ok=True)
        missing = [name(i) for i in range(1, total + 1) if not user_exists(name(i))]
        if missing:
            t = time.monotonic()
            made_users = missing  # removed at the end even if adding stops half-way
            add_users(missing, grp.getgrnam(GROUP).gr_gid)
            print(f"scale-phases: {len(missing)} users made in {time.monotonic() - t:.1f} s", file=sys.stderr)
        os.makedirs(f"{tmp}/config")
        with open(f"{tmp}/config/profile.toml", "w") as f:
            f.write(profile_for(corral, tmp, os.cpu_count() or 1))

        sample = name(1)
        for n in sizes:
            pop = [name(i) for i in range(2, n + 2)]
            per = {"bulk up": [], "up": [], "down": [], "down --all": []}
            walls = {"bulk up": [], "up": [], "down": [], "down --all": []}
            t0 = time.monotonic()
            for k in range(0, n, BULK):
                chunk = pop[k:k + BULK]
                wall, lines = corral_cmd("up", *chunk)
                walls["bulk up"].append(wall / len(chunk))
                per["bulk up"] += lines
                if (k // BULK) % 4 == 3:
                    print(f"scale-phases: {n}: {k + len(chunk)} up, {time.monotonic() - t0:.0f} s", file=sys.stderr)
            time.sleep(2)
            for _ in range(args.rounds):
                for what in ["up", "down"]:
                    wall, lines = corral_cmd(what, sample)
                    walls[what].append(wall)
                    per[what] += lines
                    time.sleep(0.2)
            if args.hold and n == sizes[-1]:
                hold = f"{tmp}/hold"
                open(hold, "w").close()
                print(f"scale-phases: holding {n} tenants up for up to {args.hold} s; remove {hold} to go on. "
                      f"Their environment: CORRAL_STATE_DIR={env['CORRAL_STATE_DIR']} "
                      f"CORRAL_CONFIG_DIR={env['CORRAL_CONFIG_DIR']} CORRAL_CGROUP_PARENT={parent}; "
                      f"{sample} is down", file=sys.stderr, flush=True)
                end = time.monotonic() + args.hold
                while os.path.exists(hold) and time.monotonic() < end:
                    time.sleep(1)
            wall, lines = corral_cmd("down", "--all")
            walls["down --all"].append(wall / n)
            per["down --all"] += lines
            results["phases"][n] = {
                what: {"(whole command, per tenant)": median(walls[what]),
                       **{k: median([l[k] for l in per[what] if k in l])
                          for k in dict.fromkeys(k for l in per[what] for k in l)}}
                for what in per
            }
            print(f"scale-phases: size {n} done", file=sys.stderr)
    except KeyboardInterrupt:
        print("scale-phases.py: interrupted; cleaning up", file=sys.stderr)
        cleanup()
        sys.exit(130)
    except BaseException:
        cleanup()
        raise
    cleanup()

    if args.json:
        print(json.dumps(results, indent=1))
        return
    first = sizes[0]
    print(f"corral up/down phases (ms, medians; {args.rounds} single up/down rounds per size; "
          f"bulk up {BULK} names per command)")
    for what in ["bulk up", "up", "down", "down --all"]:
        print(f"\n{what}:")
        print(f"  {'phase':30}" + "".join(f"{s:>12}" for s in sizes) + f"{'ratio':>10}")
        keys = list(dict.fromkeys(k for s in sizes for k in results["phases"][s][what]))
        for k in keys:
            vals = [results["phases"][s][what].get(k) for s in sizes]
            cells = "".join(f"{v:12.2f}" if v is not None else f"{'-':>12}" for v in vals)
            ratio = (f"{vals[-1] / vals[0]:10.2f}" if vals[0] and vals[-1] is not None else f"{'':>10}")
            print(f"  {k:30}{cells}{ratio}")


if __name__ == "__main__":
    main()
