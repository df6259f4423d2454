#!/usr/bin/env python3
"""The kernel's floor of an idle tenant, without corral (issue 17, item 3).

N processes each hold what corral's sandbox holds at the least: new mount,
pid, ipc, uts and cgroup namespaces (and with --net a network namespace with a
veth pair, the host end up, as `net = "private"` makes), a procfs of the pid
namespace, and cgroups of their own in the cgroup v1 hierarchies corral puts a
tenant in (cpu, cpuacct, memory, pids, blkio, freezer, where mounted). The
holder is bench/c/ns-holder.c, linked statically.

Memory per tenant is counted as `corral-bench scale` counts it (its memory
module): the growth of the slab objects in use (/proc/slabinfo active_objs x
objsize, cache by cache, growths only), KernelStack, PageTables and Percpu
from /proc/meminfo, tmpfs (Shmem), divided by N; plus the holder's PSS. So
corral's figure minus this floor is what corral's own design adds (the
rootfs, the init's pages, the state files).

Usage: bench/tenant-floor.py [--tenants N] [--net] [--json]     (as root)

Cgroups go under corral/floor-PID in each hierarchy; everything it made
(processes, veths, cgroups, the temp dir) is removed on exit, also on
failure or Ctrl-C. cgroup v1 only (a pure v2 host: say so and exit 2).
"""
import argparse
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HIERARCHIES = ["cpu", "cpuacct", "memory", "pids", "blkio", "freezer"]
MEMINFO_KERNEL = ["KernelStack", "PageTables", "Percpu"]
PR_SET_CHILD_SUBREAPER = 36


def slab_objects():
    out = {}
    with open("/proc/slabinfo") as f:
        for line in f:
            if line.startswith("slabinfo") or line.startswith("#"):
                continue
            p = line.split()
            out[p[0]] = out.get(p[0], 0) + int(p[1]) * int(p[3])
    return out


def meminfo():
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            out[k] = int(v.split()[0])
    return out


def pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tenants", type=int, default=500)
    ap.add_argument("--net", action="store_true", help="a network namespace and a veth pair each")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("tenant-floor.py: run as root")
    if not 1 <= args.tenants <= 20000:
        sys.exit("tenant-floor.py: --tenants takes 1..20000")
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        print("tenant-floor.py: this host has cgroup v2 only; the probe knows v1", file=sys.stderr)
        sys.exit(2)
    hier = [h for h in HIERARCHIES if os.path.exists(f"/sys/fs/cgroup/{h}/cgroup.procs")]
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tmp = tempfile.mkdtemp(prefix="tenant-floor.")
    parent = f"corral/floor-{os.getpid()}"
    holders, veths, made_cg = [], [], []
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

    def cleanup():
        for pid in holders:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.time() + 60
        while holders and time.time() < deadline:
            try:
                pid, _ = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            if pid in holders:
                holders.remove(pid)
        # A veth goes with its namespace; wait for the host ends to go.
        while veths and time.time() < deadline:
            veths[:] = [v for v in veths if os.path.exists(f"/sys/class/net/{v}")]
            time.sleep(0.05)
        for d in reversed(made_cg):
            # corral's own parent, if this run made it, only if now empty.
            if d.endswith("/corral"):
                try:
                    os.rmdir(d)
                except OSError:
                    pass
                continue
            while time.time() < deadline:
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
        shutil.rmtree(tmp, ignore_errors=True)

    def on_signal(sig, _frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    try:
        holder = os.path.join(tmp, "ns-holder")
        subprocess.run(["cc", "-O2", "-static", "-o", holder, os.path.join(repo, "bench/c/ns-holder.c")], check=True)
        for h in hier:
            base = f"/sys/fs/cgroup/{h}/corral"
            if not os.path.isdir(base):
                os.mkdir(base)
                made_cg.append(base)
            os.mkdir(f"{base}/floor-{os.getpid()}")
            made_cg.append(f"{base}/floor-{os.getpid()}")
        time.sleep(1)
        before_slab, before_mem = slab_objects(), meminfo()
        start = time.time()
        for i in range(args.tenants):
            dirs = []
            for h in hier:
                d = f"/sys/fs/cgroup/{h}/{parent}/t{i}"
                os.mkdir(d)
                made_cg.append(d)
                dirs.append(d)
            out = subprocess.run([holder] + (["--net"] if args.net else []) + dirs,
                                 check=True, capture_output=True, text=True).stdout
            pid = int(out.strip())
            holders.append(pid)
            if args.net:
                name = f"fl{os.getpid() % 10000}_{i}"
                subprocess.run(["ip", "link", "add", name, "type", "veth", "peer", "name", "eth0",
                                "netns", str(pid)], check=True)
                veths.append(name)
                subprocess.run(["ip", "link", "set", name, "up"], check=True)
            if (i + 1) % 100 == 0:
                print(f"tenant-floor: {i + 1}/{args.tenants} held", file=sys.stderr)
        took = time.time() - start
        time.sleep(2)
        after_slab, after_mem = slab_objects(), meminfo()
        n = args.tenants
        grown = {k: after_slab.get(k, 0) - before_slab.get(k, 0) for k in after_slab}
        slab = sum(v for v in grown.values() if v > 0) / 1024 / n
        fields = {k: max(0, after_mem[k] - before_mem[k]) / n for k in MEMINFO_KERNEL}
        tmpfs = max(0, after_mem["Shmem"] - before_mem["Shmem"]) / n
        psss = [p for p in (pss_kib(pid) for pid in holders) if p is not None]
        pss = sum(psss) / len(psss) if psss else 0.0
        kernel = slab + sum(fields.values())
        top = sorted(((v / 1024 / n, k) for k, v in grown.items() if v > 0), reverse=True)[:8]
        res = {
            "tenants": n,
            "net": args.net,
            "hierarchies": hier,
            "kib_per_tenant": {
                "slab_objects": round(slab, 1),
                **{k: round(v, 1) for k, v in fields.items()},
                "kernel": round(kernel, 1),
                "tmpfs": round(tmpfs, 1),
                "holder_pss": round(pss, 1),
                "total": round(kernel + tmpfs + pss, 1),
            },
            "top_slab_caches_kib": {k: round(v, 1) for v, k in top},
            "seconds_to_hold": round(took, 2),
        }
        if args.json:
            print(json.dumps(res, indent=1))
        else:
            k = res["kib_per_tenant"]
            print(f"tenant floor, {n} tenants{' with a network namespace and a veth pair each' if args.net else ''} "
                  f"(cgroups in {', '.join(hier)}):")
            print(f"  KiB per tenant: total {k['total']} = kernel {k['kernel']} (slab objects {k['slab_objects']}, "
                  + ", ".join(f"{f} {k[f]}" for f in MEMINFO_KERNEL)
                  + f") + tmpfs {k['tmpfs']} + holder PSS {k['holder_pss']}")
            print("  slab caches that grew most: " + ", ".join(f"{c} {v}" for c, v in res["top_slab_caches_kib"].items()))
    except KeyboardInterrupt:
        print("tenant-floor.py: interrupted", file=sys.stderr)
        return 130
    finally:
        cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
