/*
 * Escape attempts run inside a corral sandbox by crates/corral/tests/escapes.rs.
 *
 * Compiled by the test with `cc -static` (no loader, no libraries needed in
 * the sandbox) and copied into the tenant's home. Usage:
 *
 *     probe ATTEMPT MARKER SECRET [ARGS...]
 *
 * MARKER is the absolute path of a world-readable file the test created on
 * the host, outside anything the sandbox shows; SECRET is its content. Any
 * attempt that manages to read it has reached the host's filesystem.
 *
 * Every line printed starts with "blocked:", "ESCAPED:", "info:" or
 * "setup:", and the last line is "RESULT <code>" (for detached runs, whose
 * exit status the test cannot see). The exit status is the sentinel:
 *
 *     0   every attempt was blocked
 *     99  at least one attempt ESCAPED (or a defence did not hold)
 *     90  setup error: the attempt could not be made at all
 *
 * Nothing here harms the host if a defence fails: files that could change
 * the host are only opened for writing, never written; signals sent to
 * foreign processes are harmless ones unless the target is a process the
 * test started for that purpose.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#define SENTINEL_BLOCKED 0
#define SENTINEL_ESCAPED 99
#define SENTINEL_SETUP 90

#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_move_mount
#define SYS_move_mount 429
#endif
#ifndef SYS_fsopen
#define SYS_fsopen 430
#endif
#ifndef SYS_fspick
#define SYS_fspick 433
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef SYS_io_uring_setup
#define SYS_io_uring_setup 425
#endif
#ifndef SYS_userfaultfd
#define SYS_userfaultfd 323
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif

static int escapes;
static const char *marker = "";
static const char *secret = "";

static void out(const char *tag, const char *fmt, va_list ap) {
    printf("%s: ", tag);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
}
static void ESCAPED(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    out("ESCAPED", fmt, ap);
    va_end(ap);
    escapes++;
}
static void BLOCKED(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    out("blocked", fmt, ap);
    va_end(ap);
}
static void INFO(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    out("info", fmt, ap);
    va_end(ap);
}
static void finish(int code) {
    printf("RESULT %d\n", code);
    fflush(stdout);
    exit(code);
}
static void SETUP(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    out("setup", fmt, ap);
    va_end(ap);
    finish(SENTINEL_SETUP);
}

/* The call must fail (any errno). */
static void must_fail(const char *what, long r) {
    int e = errno;
    if (r >= 0)
        ESCAPED("%s succeeded (returned %ld)", what, r);
    else
        BLOCKED("%s: %s", what, strerror(e));
}

/* The call must fail with exactly `want` (the defence's signature). */
static void must_fail_with(const char *what, long r, int want) {
    int e = errno;
    if (r >= 0)
        ESCAPED("%s succeeded (returned %ld)", what, r);
    else if (e != want)
        ESCAPED("%s failed with %s, not %s: the intended defence did not stop it", what, strerrorname_np(e), strerrorname_np(want));
    else
        BLOCKED("%s: %s", what, strerrorname_np(e));
}

/* Reads up to 4 KiB of an open fd into buf (NUL-terminated); -1 on error. */
static ssize_t read_fd(int fd, char *buf, size_t n) {
    ssize_t r = read(fd, buf, n - 1);
    buf[r > 0 ? r : 0] = 0;
    return r;
}

/* Whether `path` (relative to dirfd) holds the secret. */
static int holds_secret_at(int dirfd, const char *path) {
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char buf[4096];
    ssize_t r = read_fd(fd, buf, sizeof buf);
    close(fd);
    return r > 0 && strstr(buf, secret) != NULL;
}

/* The host marker must not be readable through `prefix` (a path prefix such
 * as "/proc/1/root", or "" for the plain path). */
static void marker_unreachable_via(const char *prefix) {
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s%s", prefix, marker);
    if (holds_secret_at(AT_FDCWD, p))
        ESCAPED("read the host marker through %s", p);
    else
        BLOCKED("host marker not readable through %s (%s)", p, strerror(errno));
}

/* The host marker must not be readable relative to the current directory
 * (after some directory trickery), walking up to 64 levels. */
static void marker_unreachable_from_cwd(const char *ctx) {
    char rel[PATH_MAX] = "";
    for (int up = 0; up < 64; up++) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s%s", rel, marker + 1);
        if (holds_secret_at(AT_FDCWD, p)) {
            ESCAPED("%s: read the host marker as %s from the current directory", ctx, p);
            return;
        }
        strcat(rel, "../");
    }
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        ESCAPED("%s: the current directory is outside the root (getcwd: %s)", ctx, strerror(errno));
    else if (cwd[0] != '/')
        ESCAPED("%s: the current directory is outside the root (%s)", ctx, cwd);
    else
        BLOCKED("%s: host marker not reachable from the current directory %s", ctx, cwd);
}

static int is_pid_dir(const struct dirent *d) {
    if (d->d_name[0] < '1' || d->d_name[0] > '9')
        return 0;
    for (const char *c = d->d_name; *c; c++)
        if (*c < '0' || *c > '9')
            return 0;
    return 1;
}

/* uid of /proc/PID (real uid from status), or -1. */
static long proc_uid(long pid) {
    char p[64], line[256];
    snprintf(p, sizeof p, "/proc/%ld/status", pid);
    FILE *f = fopen(p, "re");
    if (!f)
        return -1;
    long uid = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Uid: %ld", &uid) == 1)
            break;
    fclose(f);
    return uid;
}

static int proc_cmdline(long pid, char *buf, size_t n) {
    char p[64];
    snprintf(p, sizeof p, "/proc/%ld/cmdline", pid);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t r = read(fd, buf, n - 1);
    close(fd);
    if (r < 0)
        return -1;
    for (ssize_t i = 0; i < r; i++)
        if (buf[i] == 0)
            buf[i] = ' ';
    buf[r] = 0;
    return 0;
}

/* Collect the pids visible in /proc (max n). */
static int list_pids(long *pids, int n) {
    DIR *d = opendir("/proc");
    if (!d)
        SETUP("opendir /proc: %s", strerror(errno));
    int k = 0;
    struct dirent *e;
    while ((e = readdir(d)) && k < n)
        if (is_pid_dir(e))
            pids[k++] = atol(e->d_name);
    closedir(d);
    return k;
}

static int file_readable(const char *path, char *buf, size_t n) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t r = read_fd(fd, buf, n);
    int e = errno;
    close(fd);
    errno = e;
    return r > 0;
}

/* ---------------------------------------------------------------- attempts */

/* ARGS: host pids (the test's own, the init's host pid...). */
static void proc_root(int argc, char **argv) {
    DIR *d = opendir("/proc/1/root/");
    if (d) {
        ESCAPED("opened /proc/1/root/ (the init's root is traversable by the tenant)");
        closedir(d);
    } else {
        BLOCKED("opendir /proc/1/root/: %s", strerror(errno));
    }
    marker_unreachable_via("");
    marker_unreachable_via("/proc/1/root");
    marker_unreachable_via("/proc/self/root/../../..");
    struct stat root;
    if (stat("/", &root) < 0)
        SETUP("stat /: %s", strerror(errno));
    for (int i = 0; i < argc; i++) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "/proc/%s/root", argv[i]);
        struct stat st;
        if (stat(p, &st) == 0) {
            if (st.st_dev == root.st_dev && st.st_ino == root.st_ino)
                INFO("%s exists inside: a sandbox process whose root is ours (pid numbers collide, not a host process)", p);
            else
                ESCAPED("%s (a host pid) leads to a root that is not ours", p);
        } else {
            BLOCKED("stat %s (host pid %s): %s", p, argv[i], strerror(errno));
        }
        marker_unreachable_via(p);
    }
    long pids[4096];
    int n = list_pids(pids, 4096);
    int tried = 0;
    for (int i = 0; i < n; i++) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "/proc/%ld/root%s", pids[i], marker);
        tried++;
        if (holds_secret_at(AT_FDCWD, p))
            ESCAPED("read the host marker through %s", p);
    }
    BLOCKED("host marker not readable through /proc/N/root of any of the %d visible processes", tried);
}

/* The "shocker" escape: open the host filesystem's root inode by handle. */
static void handle(int argc, char **argv) {
    (void)argc;
    (void)argv;
    struct {
        struct file_handle fh;
        unsigned char bytes[MAX_HANDLE_SZ];
    } h;
    memset(&h, 0, sizeof h);
    h.fh.handle_bytes = MAX_HANDLE_SZ;
    int mnt_id;
    errno = 0;
    must_fail_with("name_to_handle_at(/usr)", name_to_handle_at(AT_FDCWD, "/usr", &h.fh, &mnt_id, 0), EPERM);
    const char *mounts[] = {"/", "/usr", "/etc/hosts", "/tmp", "/proc"};
    for (unsigned m = 0; m < sizeof mounts / sizeof *mounts; m++) {
        int mfd = open(mounts[m], O_RDONLY | O_CLOEXEC);
        if (mfd < 0) {
            INFO("open %s: %s (skipped)", mounts[m], strerror(errno));
            continue;
        }
        /* ext4/xfs root directory: FILEID_INO32_GEN {ino 2, gen 0}; xfs/btrfs
         * use other layouts, but any success at all is a failure here. */
        memset(&h, 0, sizeof h);
        h.fh.handle_bytes = 8;
        h.fh.handle_type = 1;
        uint32_t ino = 2;
        memcpy(h.fh.f_handle, &ino, 4);
        char what[128];
        snprintf(what, sizeof what, "open_by_handle_at(mount of %s, root inode 2)", mounts[m]);
        int fd = open_by_handle_at(mfd, &h.fh, O_RDONLY | O_DIRECTORY);
        if (fd >= 0) {
            char link[PATH_MAX];
            snprintf(link, sizeof link, "%s", marker + 1);
            ESCAPED("%s returned fd %d; host marker readable through it: %s", what, fd, holds_secret_at(fd, link) ? "yes" : "no");
            close(fd);
        } else {
            must_fail_with(what, -1, EPERM);
        }
        close(mfd);
    }
}

/* ARGS: VICTIM_HOST_PID VICTIM_TAG TEST_HOST_PID
 * The victim is a `sleep VICTIM_TAG` the test started in another tenant's
 * sandbox; it may be killed if reachable. The test's own pid only gets
 * harmless signals (0, SIGCONT). */
static void signal_other(int argc, char **argv) {
    if (argc < 3)
        SETUP("signal: want VICTIM_HOST_PID VICTIM_TAG TEST_HOST_PID");
    long victim = atol(argv[0]), test = atol(argv[2]);
    const char *tag = argv[1];
    long self = getpid(), uid = getuid();
    struct { long pid; int sig; const char *who; } targets[] = {
        {victim, 0, "the other tenant's sleep (host pid)"},
        {victim, SIGKILL, "the other tenant's sleep (host pid)"},
        {test, 0, "the test process (host pid)"},
        {test, SIGCONT, "the test process (host pid)"},
    };
    for (unsigned i = 0; i < sizeof targets / sizeof *targets; i++) {
        long pid = targets[i].pid;
        char what[160];
        long owner = proc_uid(pid);
        if (owner == uid || pid == self) {
            INFO("pid %ld exists inside and is our own process: host pid numbers collide, %s not tried", pid, targets[i].who);
            continue;
        }
        if (owner >= 0 && pid != 1) {
            ESCAPED("%s (pid %ld, uid %ld) is visible in our /proc", targets[i].who, pid, owner);
        }
        if (pid == 1) {
            INFO("host pid %ld is 1 inside (the init): not tried here", pid);
            continue;
        }
        snprintf(what, sizeof what, "kill(%ld, %d) on %s", pid, targets[i].sig, targets[i].who);
        must_fail(what, kill(pid, targets[i].sig));
        snprintf(what, sizeof what, "ptrace(PTRACE_ATTACH, %ld) on %s", pid, targets[i].who);
        must_fail(what, syscall(SYS_ptrace, 16 /* PTRACE_ATTACH */, pid, 0, 0));
        snprintf(what, sizeof what, "pidfd_open(%ld) on %s", pid, targets[i].who);
        long pfd = syscall(SYS_pidfd_open, pid, 0);
        must_fail(what, pfd);
        if (pfd >= 0)
            close(pfd);
        char buf[16];
        struct iovec local = {buf, sizeof buf}, remote = {(void *)0x400000, sizeof buf};
        snprintf(what, sizeof what, "process_vm_readv(%ld) on %s", pid, targets[i].who);
        must_fail(what, process_vm_readv(pid, &local, 1, &remote, 1, 0));
    }
    /* By scanning /proc: nothing of another user (but the init, uid 0). */
    long pids[4096];
    int n = list_pids(pids, 4096), foreign = 0;
    for (int i = 0; i < n; i++) {
        long pid = pids[i];
        if (pid == self)
            continue;
        char cmd[512] = "";
        proc_cmdline(pid, cmd, sizeof cmd);
        long owner = proc_uid(pid);
        int is_victim = strstr(cmd, tag) != NULL && strstr(cmd, "sleep") != NULL;
        if (is_victim || (owner != uid && !(pid == 1 && owner == 0))) {
            foreign++;
            ESCAPED("scanning /proc: pid %ld (uid %ld, \"%s\") belongs to someone else", pid, owner, cmd);
            char what[160];
            snprintf(what, sizeof what, "kill(%ld, %s) on a scanned foreign process", pid, is_victim ? "SIGKILL" : "0");
            must_fail(what, kill(pid, is_victim ? SIGKILL : 0));
            snprintf(what, sizeof what, "ptrace(PTRACE_ATTACH, %ld) on a scanned foreign process", pid);
            must_fail(what, syscall(SYS_ptrace, 16, pid, 0, 0));
        }
    }
    if (!foreign)
        BLOCKED("scanning /proc: %d processes visible, all ours (and the init); the other tenant's sleep is not among them", n);
}

/* kill(0, SIGCONT): every process of our process group, whichever pid
 * namespace it is in. The test put a stopped host process in the group of
 * the `corral run` that started us; whether it was resumed only the host can
 * tell (our own processes are in the group too, so kill returns 0 anyway). */
static void pgrp(int argc, char **argv) {
    (void)argc;
    (void)argv;
    long r = kill(0, SIGCONT);
    INFO("kill(0, SIGCONT) returned %ld (%s): the host checks whether its stopped process in our group was resumed", r, r < 0 ? strerror(errno) : "some process got it");
    r = kill(0, 0);
    INFO("kill(0, 0) returned %ld", r);
}

/* ARGS: SCRATCH_DIR (a directory of ours, inside the sandbox) */
static void mounts(int argc, char **argv) {
    if (argc < 1)
        SETUP("mount: want SCRATCH_DIR");
    char mp[PATH_MAX], jail[PATH_MAX];
    snprintf(mp, sizeof mp, "%s/mnt", argv[0]);
    snprintf(jail, sizeof jail, "%s/jail", argv[0]);
    if ((mkdir(mp, 0700) < 0 && errno != EEXIST) || (mkdir(jail, 0700) < 0 && errno != EEXIST))
        SETUP("mkdir in %s: %s", argv[0], strerror(errno));
    long r;
    r = mount("tmpfs", mp, "tmpfs", 0, NULL);
    must_fail("mount(tmpfs)", r);
    if (r == 0)
        umount2(mp, MNT_DETACH);
    r = mount("/", mp, NULL, MS_BIND | MS_REC, NULL);
    must_fail("mount(/, MS_BIND)", r);
    if (r == 0)
        umount2(mp, MNT_DETACH);
    must_fail("mount(MS_REMOUNT|MS_BIND) of / read-write", mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND, NULL));
    must_fail("mount(proc)", r = mount("proc", mp, "proc", 0, NULL));
    if (r == 0)
        umount2(mp, MNT_DETACH);
    must_fail("mount(MS_PRIVATE) on /", mount(NULL, "/", NULL, MS_PRIVATE | MS_REC, NULL));
    must_fail("umount2(/proc, MNT_DETACH)", umount2("/proc", MNT_DETACH));
    must_fail("umount2(/usr, MNT_DETACH)", umount2("/usr", MNT_DETACH));
    must_fail("umount2(/tmp)", umount2("/tmp", 0));
    must_fail("umount2(/, MNT_DETACH)", umount2("/", MNT_DETACH));
    if (chdir("/") < 0)
        SETUP("chdir /: %s", strerror(errno));
    must_fail("pivot_root(., .)", syscall(SYS_pivot_root, ".", "."));
    must_fail("pivot_root(/, scratch)", syscall(SYS_pivot_root, "/", mp));
    /* The new mount API. */
    must_fail("fsopen(tmpfs)", r = syscall(SYS_fsopen, "tmpfs", 0));
    if (r >= 0)
        close(r);
    must_fail("fspick(/)", r = syscall(SYS_fspick, AT_FDCWD, "/", 0));
    if (r >= 0)
        close(r);
    must_fail("open_tree(/, OPEN_TREE_CLONE)", r = syscall(SYS_open_tree, AT_FDCWD, "/", OPEN_TREE_CLONE));
    if (r >= 0)
        close(r);
    must_fail("move_mount(/tmp -> scratch)", syscall(SYS_move_mount, AT_FDCWD, "/tmp", AT_FDCWD, mp, 0));
    struct { uint64_t set, clr, prop, userns; } attr = {0, 1 /* MOUNT_ATTR_RDONLY */, 0, 0};
    must_fail("mount_setattr(/, clear read-only)", syscall(SYS_mount_setattr, AT_FDCWD, "/", 0, &attr, sizeof attr));
    /* A namespace of our own would hand out CAP_SYS_ADMIN over it. */
    must_fail("unshare(CLONE_NEWUSER|CLONE_NEWNS)", unshare(CLONE_NEWUSER | CLONE_NEWNS));
    must_fail("unshare(CLONE_NEWNS)", unshare(CLONE_NEWNS));
    r = syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0);
    if (r == 0)
        _exit(0);
    must_fail("clone(CLONE_NEWUSER|CLONE_NEWNS)", r);
    if (r > 0)
        waitpid(r, NULL, 0);
    /* chroot, then fchdir out of it and climb: the classic breakout. */
    int here = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (here < 0)
        SETUP("open /: %s", strerror(errno));
    must_fail("chroot(scratch jail)", chroot(jail));
    if (fchdir(here) < 0)
        SETUP("fchdir: %s", strerror(errno));
    for (int i = 0; i < 64; i++)
        if (chdir("..") < 0)
            break;
    must_fail("chroot(.) after climbing", chroot("."));
    marker_unreachable_from_cwd("chroot-then-fchdir breakout");
    marker_unreachable_via("");
    close(here);
}

/* ARGS: SCRATCH_DIR HOST_ROOT_MAJOR HOST_ROOT_MINOR */
static void mknod_dev(int argc, char **argv) {
    if (argc < 3)
        SETUP("mknod: want SCRATCH_DIR MAJOR MINOR");
    dev_t root = makedev(atoi(argv[1]), atoi(argv[2]));
    const char *dirs[] = {argv[0], "/tmp", "/dev/shm"};
    struct { mode_t type; dev_t dev; const char *what; } nodes[] = {
        {S_IFBLK, root, "block device of the host's root filesystem"},
        {S_IFBLK, makedev(8, 0), "block device 8:0 (sda)"},
        {S_IFBLK, makedev(7, 0), "block device 7:0 (loop0)"},
        {S_IFCHR, makedev(1, 1), "character device 1:1 (/dev/mem)"},
    };
    for (unsigned d = 0; d < sizeof dirs / sizeof *dirs; d++) {
        for (unsigned i = 0; i < sizeof nodes / sizeof *nodes; i++) {
            char p[PATH_MAX], what[PATH_MAX + 128];
            snprintf(p, sizeof p, "%s/corral-escape-node%u", dirs[d], i);
            unlink(p);
            snprintf(what, sizeof what, "mknod %s (%s)", p, nodes[i].what);
            long r = mknod(p, nodes[i].type | 0600, nodes[i].dev);
            must_fail(what, r);
            if (r == 0) {
                int fd = open(p, O_RDONLY | O_CLOEXEC);
                INFO("the node %s opened: %s", p, fd >= 0 ? "yes" : strerror(errno));
                if (fd >= 0)
                    close(fd);
                unlink(p);
            }
        }
    }
    /* Block devices already present in /dev? */
    DIR *dd = opendir("/dev");
    int found = 0;
    if (dd) {
        struct dirent *e;
        while ((e = readdir(dd))) {
            char p[PATH_MAX];
            struct stat st;
            snprintf(p, sizeof p, "/dev/%s", e->d_name);
            if (lstat(p, &st) == 0 && S_ISBLK(st.st_mode)) {
                found++;
                int fd = open(p, O_RDONLY | O_CLOEXEC);
                ESCAPED("a block device is present in the sandbox: %s (%u:%u), open: %s", p, major(st.st_rdev), minor(st.st_rdev), fd >= 0 ? "yes" : strerror(errno));
                if (fd >= 0)
                    close(fd);
            }
        }
        closedir(dd);
    }
    if (!found)
        BLOCKED("no block device in /dev");
}

/* Files that change the host when written: opened for writing, never written. */
static void procsys(int argc, char **argv) {
    (void)argc;
    (void)argv;
    const char *wr[] = {
        "/proc/sysrq-trigger", "/proc/sys/kernel/hostname", "/proc/sys/kernel/domainname",
        "/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe", "/proc/sys/kernel/panic",
        "/proc/sys/kernel/randomize_va_space", "/proc/sys/vm/drop_caches", "/proc/sys/vm/overcommit_memory",
        "/proc/sys/fs/suid_dumpable", "/proc/sys/fs/protected_symlinks", "/proc/sys/net/ipv4/ip_forward",
        "/proc/sys/net/ipv4/ip_local_port_range", "/proc/sys/kernel/ns_last_pid", "/proc/sys/user/max_user_namespaces",
    };
    for (unsigned i = 0; i < sizeof wr / sizeof *wr; i++) {
        char what[256], cur[256];
        int fd = open(wr[i], O_WRONLY | O_CLOEXEC);
        if (fd < 0) {
            BLOCKED("open(%s, O_WRONLY): %s", wr[i], strerror(errno));
            continue;
        }
        /* Opened (some files are mode 0666 and check privileges on write):
         * write back the value it already has, which changes nothing. */
        if (file_readable(wr[i], cur, sizeof cur)) {
            snprintf(what, sizeof what, "write %s's current value back to it", wr[i]);
            must_fail(what, write(fd, cur, strlen(cur)));
        } else {
            ESCAPED("open(%s, O_WRONLY) succeeded (not written: it has no value to write back)", wr[i]);
        }
        close(fd);
    }
    char cur[256];
    if (gethostname(cur, sizeof cur) == 0)
        must_fail("sethostname(same name)", sethostname(cur, strlen(cur)));
    /* Kernel memory and logs. */
    const char *rd[] = {"/proc/kcore", "/proc/kmsg", "/dev/kmsg", "/dev/mem", "/dev/port", "/proc/keys", "/proc/timer_list"};
    for (unsigned i = 0; i < sizeof rd / sizeof *rd; i++) {
        char what[256], buf[64];
        int fd = open(rd[i], O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) {
            BLOCKED("open(%s, O_RDONLY): %s", rd[i], strerror(errno));
            continue;
        }
        ssize_t r = read(fd, buf, sizeof buf);
        close(fd);
        snprintf(what, sizeof what, "read(%s)", rd[i]);
        if (r > 0 && (strcmp(rd[i], "/proc/keys") == 0 || strcmp(rd[i], "/proc/timer_list") == 0))
            INFO("%s readable (%zd bytes): shows only what the kernel allows this user", rd[i], r);
        else if (r > 0)
            ESCAPED("%s returned %zd bytes", what, r);
        else
            BLOCKED("%s: %s", what, r == 0 ? "empty" : strerror(errno));
    }
    must_fail("syslog(SYSLOG_ACTION_READ_ALL)", syscall(SYS_syslog, 3, cur, sizeof cur));
    /* /sys: expected absent. */
    struct stat st;
    if (stat("/sys", &st) < 0 && errno == ENOENT) {
        BLOCKED("/sys is not there (ENOENT)");
    } else {
        INFO("/sys exists in the sandbox");
        const char *sys[] = {"/sys/kernel/uevent_helper", "/sys/power/state", "/sys/kernel/mm/transparent_hugepage/enabled",
                             "/sys/fs/cgroup/cgroup.procs", "/sys/block/sda/device/delete", "/sys/module/printk/parameters/time"};
        for (unsigned i = 0; i < sizeof sys / sizeof *sys; i++) {
            char what[256];
            snprintf(what, sizeof what, "open(%s, O_WRONLY)", sys[i]);
            int fd = open(sys[i], O_WRONLY | O_CLOEXEC);
            must_fail(what, fd);
            if (fd >= 0)
                close(fd);
        }
    }
    if (mkdir("/tmp/corral-escape-sysfs", 0700) == 0 || errno == EEXIST) {
        long r = mount("sysfs", "/tmp/corral-escape-sysfs", "sysfs", 0, NULL);
        must_fail("mount(sysfs)", r);
        if (r == 0)
            umount2("/tmp/corral-escape-sysfs", MNT_DETACH);
        rmdir("/tmp/corral-escape-sysfs");
    }
}

/* ARGS: host pids, then paths of persisted ns files on the host. */
static void setns_attempt(int argc, char **argv) {
    const char *kinds[] = {"mnt", "pid", "net", "user", "uts", "ipc", "cgroup", "time", "pid_for_children", "time_for_children"};
    long pids[4096];
    int n = list_pids(pids, 4096);
    int opened = 0, tried = 0;
    char extra[64][PATH_MAX];
    int ne = 0;
    for (int i = 0; i < argc && ne < 64; i++) {
        if (argv[i][0] == '/')
            snprintf(extra[ne++], PATH_MAX, "%s", argv[i]);
        else
            for (unsigned k = 0; k < sizeof kinds / sizeof *kinds && ne < 64; k++)
                snprintf(extra[ne++], PATH_MAX, "/proc/%s/ns/%s", argv[i], kinds[k]);
    }
    /* Every visible process's namespaces, then the extras. */
    for (int i = 0; i < n + 1; i++) {
        int cnt = i < n ? (int)(sizeof kinds / sizeof *kinds) : ne;
        for (int k = 0; k < cnt; k++) {
            char p[PATH_MAX];
            if (i < n)
                snprintf(p, sizeof p, "/proc/%ld/ns/%s", pids[i], kinds[k]);
            else
                snprintf(p, sizeof p, "%s", extra[k]);
            int fd = open(p, O_RDONLY | O_CLOEXEC);
            if (fd < 0) {
                if (i == n || pids[i] == 1)
                    BLOCKED("open %s: %s", p, strerror(errno));
                continue;
            }
            opened++;
            tried++;
            char what[PATH_MAX + 32];
            snprintf(what, sizeof what, "setns(%s)", p);
            long r = setns(fd, 0);
            if (r == 0)
                ESCAPED("%s succeeded", what);
            else if (i < n && pids[i] != 1)
                ; /* reported in the summary below */
            else
                BLOCKED("%s: %s", what, strerror(errno));
            close(fd);
        }
    }
    BLOCKED("setns refused on every one of the %d namespace files that could be opened", tried);
    (void)opened;
}

static void rlimits(int argc, char **argv) {
    (void)argc;
    (void)argv;
    const char *names[] = {"CPU", "FSIZE", "DATA", "STACK", "CORE", "RSS", "NPROC", "NOFILE", "MEMLOCK", "AS", "LOCKS", "SIGPENDING", "MSGQUEUE", "NICE", "RTPRIO", "RTTIME"};
    int finite = 0;
    for (int r = 0; r < RLIM_NLIMITS; r++) {
        struct rlimit l;
        if (getrlimit(r, &l) < 0)
            SETUP("getrlimit(%d): %s", r, strerror(errno));
        if (l.rlim_max == RLIM_INFINITY)
            continue;
        finite++;
        struct rlimit up = {l.rlim_max + 1, l.rlim_max + 1};
        char what[128];
        snprintf(what, sizeof what, "setrlimit(RLIMIT_%s) hard %llu -> %llu", names[r], (unsigned long long)l.rlim_max, (unsigned long long)up.rlim_max);
        must_fail_with(what, setrlimit(r, &up), EPERM);
        struct rlimit inf = {RLIM_INFINITY, RLIM_INFINITY};
        snprintf(what, sizeof what, "prlimit(self, RLIMIT_%s) -> unlimited", names[r]);
        must_fail_with(what, prlimit(0, r, &inf, NULL), EPERM);
    }
    if (!finite)
        SETUP("no finite hard limit to try to raise");
    struct rlimit inf = {RLIM_INFINITY, RLIM_INFINITY};
    must_fail("prlimit(pid 1 = the init, RLIMIT_NOFILE, unlimited)", prlimit(1, RLIMIT_NOFILE, &inf, NULL));
    struct rlimit low = {1, 1};
    must_fail("prlimit(pid 1 = the init, RLIMIT_NOFILE, 1)", prlimit(1, RLIMIT_NOFILE, &low, NULL));
}

static void walk_cgroup(const char *dir, int depth, int *found, const char *self) {
    if (depth > 4)
        return;
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (!strcmp(e->d_name, "cgroup.procs") || !strcmp(e->d_name, "tasks")) {
            (*found)++;
            char what[PATH_MAX + 64];
            snprintf(what, sizeof what, "write our pid into %s", p);
            int fd = open(p, O_WRONLY | O_CLOEXEC);
            if (fd < 0) {
                BLOCKED("open %s for writing: %s", p, strerror(errno));
                continue;
            }
            long r = write(fd, self, strlen(self));
            close(fd);
            must_fail(what, r);
        } else if (e->d_type == DT_DIR) {
            walk_cgroup(p, depth + 1, found, self);
        }
    }
    closedir(d);
}

static void cgroup(int argc, char **argv) {
    (void)argc;
    (void)argv;
    char before[4096] = "", after[4096] = "", self[32];
    snprintf(self, sizeof self, "%d\n", getpid());
    if (!file_readable("/proc/self/cgroup", before, sizeof before))
        SETUP("read /proc/self/cgroup: %s", strerror(errno));
    for (char *c = before; *c; c++)
        if (*c == '\n' && c[1])
            *c = ' ';
    INFO("/proc/self/cgroup: %s", before);
    struct stat st;
    int found = 0;
    if (stat("/sys/fs/cgroup", &st) < 0)
        BLOCKED("/sys/fs/cgroup is not there (%s)", strerror(errno));
    else
        walk_cgroup("/sys/fs/cgroup", 0, &found, self);
    if (found)
        INFO("tried %d cgroup.procs/tasks files", found);
    const char *mp = "/tmp/corral-escape-cg";
    if (mkdir(mp, 0700) == 0 || errno == EEXIST) {
        long r = mount("cgroup2", mp, "cgroup2", 0, NULL);
        must_fail("mount(cgroup2)", r);
        if (r == 0) {
            char p[PATH_MAX];
            snprintf(p, sizeof p, "%s/cgroup.procs", mp);
            int fd = open(p, O_WRONLY | O_CLOEXEC);
            if (fd >= 0) {
                must_fail("write our pid into the freshly mounted cgroup2 root", write(fd, self, strlen(self)));
                close(fd);
            }
            umount2(mp, MNT_DETACH);
        }
        r = mount("cgroup", mp, "cgroup", 0, "cpu");
        must_fail("mount(cgroup v1, cpu)", r);
        if (r == 0)
            umount2(mp, MNT_DETACH);
        rmdir(mp);
    }
    file_readable("/proc/self/cgroup", after, sizeof after);
    for (char *c = after; *c; c++)
        if (*c == '\n' && c[1])
            *c = ' ';
    if (strcmp(before, after))
        ESCAPED("our cgroup changed: %s -> %s", before, after);
    else
        BLOCKED("our cgroup is unchanged");
}

/* ARGS: paths that hold the other tenant's SECRET (the test's secret arg). */
static void read_other(int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        if (holds_secret_at(AT_FDCWD, argv[i]))
            ESCAPED("read the other tenant's secret at %s", argv[i]);
        else
            BLOCKED("%s: %s", argv[i], errno ? strerror(errno) : "not the secret");
    }
    /* Scan: every home, /tmp, and every visible process's cwd and root. */
    const char *scan[] = {"/home", "/tmp", "/var/tmp", "/dev/shm", "/run"};
    int seen = 0;
    for (unsigned s = 0; s < sizeof scan / sizeof *scan; s++) {
        DIR *d = opendir(scan[s]);
        if (!d)
            continue;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
                continue;
            char p[PATH_MAX];
            snprintf(p, sizeof p, "%s/%s", scan[s], e->d_name);
            seen++;
            if (holds_secret_at(AT_FDCWD, p))
                ESCAPED("found the other tenant's secret at %s", p);
            DIR *sub = opendir(p);
            if (sub) {
                struct dirent *f;
                while ((f = readdir(sub))) {
                    char q[PATH_MAX * 2];
                    snprintf(q, sizeof q, "%s/%s", p, f->d_name);
                    if (f->d_type == DT_REG && holds_secret_at(AT_FDCWD, q))
                        ESCAPED("found the other tenant's secret at %s", q);
                }
                closedir(sub);
            }
        }
        closedir(d);
    }
    long pids[4096];
    int n = list_pids(pids, 4096);
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < argc; k++) {
            const char *base = strrchr(argv[k], '/');
            base = base ? base + 1 : argv[k];
            char p[PATH_MAX];
            snprintf(p, sizeof p, "/proc/%ld/cwd/%s", pids[i], base);
            if (holds_secret_at(AT_FDCWD, p))
                ESCAPED("found the other tenant's secret through %s", p);
        }
    }
    BLOCKED("no secret among %d entries of /home /tmp /var/tmp /dev/shm /run, nor in the cwd of %d visible processes", seen, n);
}

static int connect_tcp(int family, const char *addr, int port, int *err) {
    int s = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0) {
        *err = errno;
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t len;
    memset(&ss, 0, sizeof ss);
    if (family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons(port);
        inet_pton(AF_INET, addr, &a->sin_addr);
        len = sizeof *a;
    } else {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(port);
        inet_pton(AF_INET6, addr, &a->sin6_addr);
        len = sizeof *a;
    }
    int r = connect(s, (struct sockaddr *)&ss, len);
    if (r < 0 && errno == EINPROGRESS) {
        struct pollfd p = {s, POLLOUT, 0};
        if (poll(&p, 1, 3000) == 1) {
            int e = 0;
            socklen_t el = sizeof e;
            getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &el);
            r = e ? -1 : 0;
            errno = e;
        } else {
            r = -1;
            errno = ETIMEDOUT;
        }
    }
    *err = errno;
    close(s);
    return r;
}

static int connect_unix(const char *path, int abstract, int type, int *err) {
    int s = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    if (s < 0) {
        *err = errno;
        return -1;
    }
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    size_t n = strlen(path);
    if (n > sizeof a.sun_path - 2)
        n = sizeof a.sun_path - 2;
    memcpy(a.sun_path + (abstract ? 1 : 0), path, n);
    socklen_t len = offsetof(struct sockaddr_un, sun_path) + n + (abstract ? 1 : 0);
    int r = connect(s, (struct sockaddr *)&a, len);
    *err = errno;
    close(s);
    return r;
}

/* ARGS: LO_PORT HOST_ADDR HOST_PORT ABSTRACT_NAME [LO6_PORT] */
static void net(int argc, char **argv) {
    if (argc < 4)
        SETUP("net: want LO_PORT HOST_ADDR HOST_PORT ABSTRACT_NAME [LO6_PORT]");
    int err;
    char what[256];
    snprintf(what, sizeof what, "connect to the host's 127.0.0.1:%s", argv[0]);
    if (connect_tcp(AF_INET, "127.0.0.1", atoi(argv[0]), &err) == 0)
        ESCAPED("%s succeeded", what);
    else
        BLOCKED("%s: %s", what, strerror(err));
    snprintf(what, sizeof what, "connect to the host's interface address %s:%s", argv[1], argv[2]);
    if (connect_tcp(strchr(argv[1], ':') ? AF_INET6 : AF_INET, argv[1], atoi(argv[2]), &err) == 0)
        ESCAPED("%s succeeded", what);
    else
        BLOCKED("%s: %s", what, strerror(err));
    if (argc > 4) {
        snprintf(what, sizeof what, "connect to the host's [::1]:%s", argv[4]);
        if (connect_tcp(AF_INET6, "::1", atoi(argv[4]), &err) == 0)
            ESCAPED("%s succeeded", what);
        else
            BLOCKED("%s: %s", what, strerror(err));
    }
    snprintf(what, sizeof what, "connect to the host's abstract unix socket @%s", argv[3]);
    if (connect_unix(argv[3], 1, SOCK_STREAM, &err) == 0)
        ESCAPED("%s succeeded", what);
    else
        BLOCKED("%s: %s", what, strerror(err));
    /* Interfaces: only lo. */
    char dev[8192];
    if (file_readable("/proc/net/dev", dev, sizeof dev)) {
        int others = 0;
        for (char *line = strtok(dev, "\n"); line; line = strtok(NULL, "\n")) {
            char name[64];
            if (sscanf(line, " %63[^:]:", name) == 1 && strchr(line, ':') && strcmp(name, "lo")) {
                others++;
                ESCAPED("network interface %s is visible", name);
            }
        }
        if (!others)
            BLOCKED("only the loopback interface is visible");
    }
}

/* Lists /proc/self/fd: only 0, 1, 2 and the listing's own descriptor.
 * ARGS: numbers of inherited descriptors to probe specifically. */
static void fds(int argc, char **argv) {
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        SETUP("opendir /proc/self/fd: %s", strerror(errno));
    int own = dirfd(d), extra = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        int fd = atoi(e->d_name);
        char p[64], link[PATH_MAX];
        snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(p, link, sizeof link - 1);
        link[n > 0 ? n : 0] = 0;
        if (fd == own)
            continue;
        if (fd <= 2) {
            INFO("fd %d -> %s", fd, link);
            continue;
        }
        extra++;
        struct stat st;
        int isdir = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
        ESCAPED("inherited fd %d -> %s%s", fd, link, isdir ? " (a directory)" : "");
        if (isdir && holds_secret_at(fd, marker + 1))
            ESCAPED("the host marker is readable through fd %d", fd);
    }
    closedir(d);
    if (!extra)
        BLOCKED("no descriptor beyond 0, 1, 2");
    for (int i = 0; i < argc; i++) {
        int fd = atoi(argv[i]);
        char what[128];
        snprintf(what, sizeof what, "fcntl(%d, F_GETFD) on the caller's leaked descriptor", fd);
        must_fail(what, fcntl(fd, F_GETFD));
        snprintf(what, sizeof what, "fchdir(%d)", fd);
        must_fail(what, fchdir(fd));
        char base[PATH_MAX];
        const char *slash = strrchr(marker, '/');
        snprintf(base, sizeof base, "%s", slash ? slash + 1 : marker);
        snprintf(what, sizeof what, "openat(%d, \"%s\")", fd, base);
        int r = openat(fd, base, O_RDONLY | O_CLOEXEC);
        must_fail(what, r);
        if (r >= 0)
            close(r);
    }
}

/* Where we were started: the current directory must be inside our root.
 * (runc CVE-2024-21626: a cwd that is a leaked host directory.) */
static void cwd(int argc, char **argv) {
    (void)argc;
    (void)argv;
    char buf[PATH_MAX];
    const char *base = strrchr(marker, '/');
    base = base ? base + 1 : marker;
    if (holds_secret_at(AT_FDCWD, base))
        ESCAPED("the current directory is the host's %.*s: read %s in it", (int)(base - marker - 1), marker, base);
    if (!getcwd(buf, sizeof buf)) {
        ESCAPED("the current directory is outside the sandbox's root (getcwd: %s)", strerror(errno));
    } else if (buf[0] != '/') {
        ESCAPED("the current directory is outside the sandbox's root (%s)", buf);
    } else {
        struct stat a, b;
        if (stat(".", &a) == 0 && stat(buf, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
            BLOCKED("the current directory %s is inside the sandbox", buf);
        else
            ESCAPED("the current directory is not the %s the sandbox sees there", buf);
    }
    marker_unreachable_from_cwd("walking up from the starting directory");
}

/* Catch corral processes running as the tenant (the #!/proc/self/exe trick)
 * and try to open their executable for writing (runc CVE-2019-5736).
 * ARGS: SECONDS READY_FILE */
static void exe_watch(int argc, char **argv) {
    if (argc < 2)
        SETUP("exe: want SECONDS READY_FILE");
    char buf[64];
    /* The init's executable. */
    int fd = open("/proc/1/exe", O_RDONLY | O_CLOEXEC);
    must_fail("open(/proc/1/exe, O_RDONLY)", fd);
    if (fd >= 0)
        close(fd);
    must_fail("open(/proc/1/exe, O_WRONLY)", fd = open("/proc/1/exe", O_WRONLY | O_CLOEXEC));
    if (fd >= 0)
        close(fd);
    fd = open("/proc/1/exe", O_PATH | O_CLOEXEC);
    must_fail("open(/proc/1/exe, O_PATH)", fd);
    if (fd >= 0) {
        char p[64];
        snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
        int w = open(p, O_WRONLY | O_CLOEXEC);
        must_fail("reopen the init's executable for writing", w);
        if (w >= 0)
            close(w);
        close(fd);
    }
    /* Our own executable (the probe, not corral): for completeness. */
    fd = open("/proc/self/exe", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        INFO("our own executable (the probe in our home) is writable through /proc/self/exe: expected, it is the tenant's file");
        close(fd);
    }
    int ready = open(argv[1], O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (ready < 0)
        SETUP("create %s: %s", argv[1], strerror(errno));
    close(ready);
    time_t end = time(NULL) + atoi(argv[0]);
    int handles[64], nh = 0;
    long stopped[64];
    int ns = 0, caught = 0;
    long self = getpid();
    while (time(NULL) < end) {
        DIR *d = opendir("/proc");
        if (!d)
            SETUP("opendir /proc: %s", strerror(errno));
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!is_pid_dir(e))
                continue;
            long pid = atol(e->d_name);
            if (pid == self || pid == 1)
                continue;
            char p[64], link[PATH_MAX];
            snprintf(p, sizeof p, "/proc/%ld/exe", pid);
            ssize_t n = readlink(p, link, sizeof link - 1);
            if (n <= 0)
                continue;
            link[n] = 0;
            const char *b = strrchr(link, '/');
            b = b ? b + 1 : link;
            if (strncmp(b, "corral", 6))
                continue;
            int seen = 0;
            for (int i = 0; i < ns; i++)
                seen |= stopped[i] == pid;
            if (seen)
                continue;
            if (kill(pid, SIGSTOP) == 0 && ns < 64)
                stopped[ns++] = pid;
            caught++;
            INFO("caught pid %ld running %s", pid, link);
            int w = open(p, O_WRONLY | O_CLOEXEC);
            snprintf(buf, sizeof buf, "open(/proc/%ld/exe, O_WRONLY)", pid);
            must_fail(buf, w);
            if (w >= 0)
                close(w);
            int h = open(p, O_PATH | O_CLOEXEC);
            if (h >= 0 && nh < 64)
                handles[nh++] = h;
            else if (h >= 0)
                close(h);
            else
                INFO("open(%s, O_PATH): %s", p, strerror(errno));
        }
        closedir(d);
    }
    for (int i = 0; i < ns; i++)
        kill(stopped[i], SIGKILL);
    for (int i = 0; i < ns; i++) {
        char p[64];
        snprintf(p, sizeof p, "/proc/%ld", stopped[i]);
        for (int t = 0; t < 200 && access(p, F_OK) == 0; t++)
            usleep(10000);
    }
    for (int i = 0; i < nh; i++) {
        char p[64], what[128];
        snprintf(p, sizeof p, "/proc/self/fd/%d", handles[i]);
        snprintf(what, sizeof what, "reopen a caught corral executable (O_PATH fd %d) for writing after it exited", handles[i]);
        int w = open(p, O_WRONLY | O_CLOEXEC);
        must_fail(what, w);
        if (w >= 0)
            close(w);
        snprintf(what, sizeof what, "reopen a caught corral executable (O_PATH fd %d) O_RDWR", handles[i]);
        w = open(p, O_RDWR | O_CLOEXEC);
        must_fail(what, w);
        if (w >= 0)
            close(w);
        close(handles[i]);
    }
    INFO("caught %d corral processes running as the tenant, held %d executable handles", caught, nh);
    printf("CAUGHT %d\n", caught);
}

/* ARGS: STATE_DIR CONTROL_SOCKET NS_DIR */
static void sockets(int argc, char **argv) {
    if (argc < 3)
        SETUP("sockets: want STATE_DIR CONTROL_SOCKET PLAN_FILE");
    const char *state = argv[0], *control = argv[1], *plan = argv[2];
    struct stat st;
    char what[PATH_MAX + 64];
    const char *paths[] = {state, control, plan};
    for (int i = 0; i < 3; i++) {
        snprintf(what, sizeof what, "stat %s", paths[i]);
        must_fail(what, stat(paths[i], &st));
    }
    int err;
    int types[] = {SOCK_SEQPACKET, SOCK_STREAM, SOCK_DGRAM};
    for (int t = 0; t < 3; t++) {
        snprintf(what, sizeof what, "connect(%s, type %d)", control, types[t]);
        if (connect_unix(control, 0, types[t], &err) == 0)
            ESCAPED("%s succeeded", what);
        else
            BLOCKED("%s: %s", what, strerror(err));
    }
    /* The init's descriptors (its listener is fd 4). */
    DIR *d = opendir("/proc/1/fd");
    if (d) {
        ESCAPED("listed the init's descriptors in /proc/1/fd");
        closedir(d);
    } else {
        BLOCKED("opendir /proc/1/fd: %s", strerror(errno));
    }
    int fd = open("/proc/1/fd/4", O_RDWR | O_CLOEXEC);
    must_fail("open(/proc/1/fd/4) (the init's control listener)", fd);
    if (fd >= 0)
        close(fd);
    long pfd = syscall(SYS_pidfd_open, 1, 0);
    if (pfd >= 0) {
        long got = syscall(SYS_pidfd_getfd, pfd, 4, 0);
        must_fail("pidfd_getfd(init, 4) (the init's control listener)", got);
        if (got >= 0)
            close(got);
        close(pfd);
    } else {
        BLOCKED("pidfd_open(1): %s", strerror(errno));
    }
    /* Scan /proc/net/unix for socket paths and try each. */
    FILE *f = fopen("/proc/net/unix", "re");
    int paths_seen = 0, abstract_seen = 0, connected = 0, corral_named = 0;
    if (f) {
        char line[1024];
        while (fgets(line, sizeof line, f)) {
            char *path = NULL;
            int fields = 0;
            for (char *tok = strtok(line, " \n"); tok; tok = strtok(NULL, " \n"))
                if (++fields == 8)
                    path = tok;
            if (!path)
                continue;
            if (path[0] == '@') {
                abstract_seen++;
                if (strstr(path, "corral")) {
                    corral_named++;
                    for (int t = 0; t < 3; t++)
                        if (connect_unix(path + 1, 1, types[t], &err) == 0)
                            ESCAPED("connected to abstract socket %s", path);
                }
                continue;
            }
            if (path[0] != '/')
                continue;
            paths_seen++;
            int mine = !strncmp(path, "/tmp/", 5) || !strncmp(path, "/dev/shm/", 9) || !strncmp(path, getenv("HOME") ? getenv("HOME") : "/nonexistent", strlen(getenv("HOME") ? getenv("HOME") : "/nonexistent"));
            for (int t = 0; t < 3; t++) {
                if (connect_unix(path, 0, types[t], &err) == 0) {
                    connected++;
                    if (strstr(path, "control.sock") || strstr(path, state) || !mine)
                        ESCAPED("connected to %s (a host socket seen in /proc/net/unix)", path);
                    else
                        INFO("connected to %s (a socket of our own sandbox)", path);
                    break;
                }
            }
        }
        fclose(f);
    }
    INFO("/proc/net/unix lists %d path sockets and %d abstract ones%s", paths_seen, abstract_seen, paths_seen > 20 ? " (the host's: network namespace shared)" : "");
    if (!connected)
        BLOCKED("no socket path listed in /proc/net/unix could be connected to (%d tried)", paths_seen);
    /* Walk the sandbox's filesystem for sockets. */
    const char *roots[] = {"/run", "/tmp", "/dev", "/var", "/etc", "/home"};
    int sockets_found = 0;
    for (unsigned r = 0; r < sizeof roots / sizeof *roots; r++) {
        char stack[64][PATH_MAX];
        int sp = 0;
        snprintf(stack[sp++], PATH_MAX, "%s", roots[r]);
        while (sp) {
            char dir[PATH_MAX];
            snprintf(dir, sizeof dir, "%s", stack[--sp]);
            DIR *dd = opendir(dir);
            if (!dd)
                continue;
            struct dirent *e;
            while ((e = readdir(dd))) {
                if (e->d_name[0] == '.')
                    continue;
                char p[PATH_MAX];
                snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
                if (e->d_type == DT_SOCK) {
                    sockets_found++;
                    for (int t = 0; t < 3; t++)
                        if (connect_unix(p, 0, types[t], &err) == 0) {
                            if (strstr(p, "control.sock"))
                                ESCAPED("found and connected to %s", p);
                            else
                                INFO("found and connected to %s", p);
                            break;
                        }
                } else if (e->d_type == DT_DIR && sp < 64 && strcmp(p, "/dev/fd")) {
                    snprintf(stack[sp++], PATH_MAX, "%s", p);
                }
            }
            closedir(dd);
        }
    }
    BLOCKED("walked /run /tmp /dev /var /etc /home: %d sockets, no control socket", sockets_found);
    (void)corral_named;
}

/* The calls the brief names must fail with EPERM (seccomp's errno action). */
static void syscalls(int argc, char **argv) {
    (void)argc;
    (void)argv;
    char buf[256];
    memset(buf, 0, sizeof buf);
    long r;
    must_fail_with("io_uring_setup(1, params)", r = syscall(SYS_io_uring_setup, 1, buf), EPERM);
    if (r >= 0)
        close(r);
    must_fail_with("bpf(BPF_MAP_CREATE)", r = syscall(SYS_bpf, 0, buf, 72), EPERM);
    if (r >= 0)
        close(r);
    struct {
        uint32_t type, size;
        uint64_t config;
        char rest[112];
    } pe;
    memset(&pe, 0, sizeof pe);
    pe.type = 1; /* PERF_TYPE_SOFTWARE */
    pe.size = 128;
    pe.config = 0; /* PERF_COUNT_SW_CPU_CLOCK */
    must_fail_with("perf_event_open(software cpu-clock, self)", r = syscall(SYS_perf_event_open, &pe, 0, -1, -1, 0), EPERM);
    if (r >= 0)
        close(r);
    must_fail_with("keyctl(KEYCTL_GET_KEYRING_ID, session)", syscall(SYS_keyctl, 0, -3, 0), EPERM);
    must_fail_with("add_key(user)", syscall(SYS_add_key, "user", "corral-escape", "x", 1, -3), EPERM);
    must_fail_with("request_key(user)", syscall(SYS_request_key, "user", "corral-escape", NULL, 0), EPERM);
    must_fail_with("userfaultfd(0)", r = syscall(SYS_userfaultfd, 0), EPERM);
    if (r >= 0)
        close(r);
    must_fail_with("unshare(CLONE_NEWUSER)", unshare(CLONE_NEWUSER), EPERM);
    int own = open("/proc/self/ns/uts", O_RDONLY | O_CLOEXEC);
    if (own < 0)
        SETUP("open /proc/self/ns/uts: %s", strerror(errno));
    must_fail_with("setns(own uts namespace)", setns(own, 0), EPERM);
    close(own);
    must_fail_with("init_module(empty)", syscall(SYS_init_module, NULL, 0, ""), EPERM);
    must_fail_with("kexec_load(nothing)", syscall(SYS_kexec_load, 0, 0, NULL, 0), EPERM);
    must_fail_with("ptrace(PTRACE_PEEKDATA, parent)", syscall(SYS_ptrace, 2, getppid(), 0, 0), EPERM);
    must_fail_with("open_by_handle_at(bad handle)", syscall(SYS_open_by_handle_at, AT_FDCWD, buf, 0), EPERM);
    must_fail_with("clone3(NULL)", syscall(SYS_clone3, NULL, 0), ENOSYS);
}

/* Issue 15 item 7: what the allow list denies that the old deny list let
 * through, each with exactly the errno the filter answers; and what a web
 * tenant needs still works. */
static void allowlist(int argc, char **argv) {
    (void)argc;
    (void)argv;
    long r;
    /* A child of our own: ptrace-style access to it is the tenant's to take. */
    pid_t child = fork();
    if (child < 0)
        SETUP("fork: %s", strerror(errno));
    if (child == 0) {
        pause();
        _exit(0);
    }
    long pfd = syscall(SYS_pidfd_open, child, 0);
    if (pfd < 0)
        SETUP("pidfd_open(own child): %s", strerror(errno));
    must_fail_with("pidfd_getfd(own child, 0)", r = syscall(SYS_pidfd_getfd, pfd, 0, 0), EPERM);
    if (r >= 0)
        close(r);
    must_fail_with("kcmp(self, own child, KCMP_FILE, 0, 0)", syscall(SYS_kcmp, getpid(), child, 0, 0, 0), EPERM);
    struct iovec iov = {(void *)0x10000, 4096};
    must_fail_with("process_madvise(own child, MADV_COLD)", syscall(SYS_process_madvise, pfd, &iov, 1, 20, 0), EPERM);
    close(pfd);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    must_fail_with("socket(AF_VSOCK, SOCK_STREAM)", r = socket(40, SOCK_STREAM, 0), EPERM);
    if (r >= 0)
        close(r);
    must_fail_with("socket(AF_PACKET, SOCK_DGRAM)", r = socket(17, SOCK_DGRAM, 0), EPERM);
    if (r >= 0)
        close(r);
    must_fail_with("socket(AF_ALG, SOCK_SEQPACKET)", r = socket(38, SOCK_SEQPACKET, 0), EPERM);
    if (r >= 0)
        close(r);
    must_fail_with("socketpair(AF_TIPC)", syscall(SYS_socketpair, 30, SOCK_STREAM, 0, (int[2]){0, 0}), EPERM);
    must_fail_with("personality(ADDR_NO_RANDOMIZE)", syscall(SYS_personality, 0x0040000), EPERM);
    must_fail_with("personality(PER_BSD)", syscall(SYS_personality, 0x0006), EPERM);
    must_fail_with("fanotify_init(FAN_CLASS_NOTIF)", r = syscall(SYS_fanotify_init, 0, 0), EPERM);
    if (r >= 0)
        close(r);
    char buf[512];
    memset(buf, 0, sizeof buf);
    must_fail_with("get_mempolicy", syscall(SYS_get_mempolicy, NULL, NULL, 0, NULL, 0), EPERM);
    must_fail_with("set_mempolicy(MPOL_DEFAULT)", syscall(SYS_set_mempolicy, 0, NULL, 0), EPERM);
    must_fail_with("mbind(MPOL_DEFAULT)", syscall(SYS_mbind, buf, 0, 0, NULL, 0, 0), EPERM);
    must_fail_with("migrate_pages(self)", syscall(SYS_migrate_pages, 0, 0, NULL, NULL), EPERM);
    must_fail_with("move_pages(self, 0 pages)", syscall(SYS_move_pages, 0, 0, NULL, NULL, NULL, 0), EPERM);
    must_fail_with("uselib(/bin/sh)", syscall(SYS_uselib, "/bin/sh"), EPERM);
    must_fail_with("ustat(0)", syscall(SYS_ustat, 0, buf), EPERM);
    must_fail_with("sysfs(3)", syscall(SYS_sysfs, 3), EPERM);
    must_fail_with("statmount", syscall(457, buf, buf, sizeof buf, 0), EPERM);
    must_fail_with("listmount", syscall(458, buf, buf, 4, 0), EPERM);
    must_fail_with("open_tree_attr(/)", r = syscall(467, AT_FDCWD, "/", 1, NULL, 0), EPERM);
    if (r >= 0)
        close(r);
    must_fail_with("listns", syscall(470, buf, buf, 4, 0), EPERM);
    must_fail_with("cachestat(stdin)", syscall(451, 0, buf, buf, 0), EPERM);
    /* A number no kernel has given a meaning yet: ENOSYS, as from a kernel
     * that lacks it, so a libc falls back. */
    must_fail_with("syscall(471)", syscall(471, 0, 0, 0), ENOSYS);
    must_fail_with("syscall(500)", syscall(500, 0, 0, 0), ENOSYS);
    must_fail_with("syscall(1000)", syscall(1000, 0, 0, 0), ENOSYS);
    must_fail_with("syscall(400) (x86_64's unused range)", syscall(400, 0, 0, 0), ENOSYS);

    /* What a web tenant needs still works. */
    int ok = 1;
    int s4 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int s6 = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int su = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int sn = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0);
    int sp[2];
    int pair = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp);
    if (s4 < 0 || s6 < 0 || su < 0 || sn < 0 || pair < 0) {
        ESCAPED("a web socket was refused: inet %d inet6 %d unix %d netlink %d socketpair %d (%s)", s4, s6, su, sn, pair, strerror(errno));
        ok = 0;
    }
    if (s4 >= 0) close(s4);
    if (s6 >= 0) close(s6);
    if (su >= 0) close(su);
    if (sn >= 0) close(sn);
    if (pair == 0) { close(sp[0]); close(sp[1]); }
    long persona = syscall(SYS_personality, 0xffffffffUL);
    if (persona < 0) {
        ESCAPED("personality(query) refused: %s", strerror(errno));
        ok = 0;
    }
    if (ok)
        BLOCKED("inet, inet6, unix, netlink sockets, socketpair and personality(query) still work (persona %#lx)", persona);
}

/* ARGS: UID GID */
static void status(int argc, char **argv) {
    if (argc < 2)
        SETUP("status: want UID GID");
    FILE *f = fopen("/proc/self/status", "re");
    if (!f)
        SETUP("open /proc/self/status: %s", strerror(errno));
    char line[512];
    int seen = 0;
    while (fgets(line, sizeof line, f)) {
        char key[64], val[400];
        if (sscanf(line, "%63[^:]:%*[ \t]%399[^\n]", key, val) != 2)
            continue;
        const char *want = NULL;
        char buf[128];
        if (!strncmp(key, "Cap", 3))
            want = "0000000000000000";
        else if (!strcmp(key, "NoNewPrivs"))
            want = "1";
        else if (!strcmp(key, "Seccomp"))
            want = "2";
        else if (!strcmp(key, "Uid"))
            want = (snprintf(buf, sizeof buf, "%s\t%s\t%s\t%s", argv[0], argv[0], argv[0], argv[0]), buf);
        else if (!strcmp(key, "Gid"))
            want = (snprintf(buf, sizeof buf, "%s\t%s\t%s\t%s", argv[1], argv[1], argv[1], argv[1]), buf);
        else if (!strcmp(key, "Groups")) {
            char g[420];
            snprintf(g, sizeof g, " %s ", val);
            if (strstr(g, " 0 "))
                ESCAPED("Groups contains 0: %s", val);
            else
                BLOCKED("Groups: %s", val);
            seen++;
            continue;
        }
        if (!want)
            continue;
        seen++;
        if (strcmp(val, want))
            ESCAPED("%s is %s, want %s", key, val, want);
        else
            BLOCKED("%s: %s", key, val);
    }
    fclose(f);
    if (seen < 10)
        SETUP("only %d of the expected lines in /proc/self/status", seen);
    /* setuid binaries are inert: nosuid on every path that holds programs. */
    const char *mp[] = {"/usr", "/home", "/tmp", "/dev/shm", "/"};
    for (unsigned i = 0; i < sizeof mp / sizeof *mp; i++) {
        struct statvfs v;
        if (statvfs(mp[i], &v) < 0)
            continue;
        if (v.f_flag & ST_NOSUID)
            BLOCKED("%s is mounted nosuid", mp[i]);
        else
            ESCAPED("%s is not mounted nosuid", mp[i]);
    }
    must_fail("setuid(0)", setuid(0));
    must_fail("setgid(0)", setgid(0));
}

/* The init: no signal, no ptrace, no /proc/1 secrets. */
/* The newest pid of our pid namespace (the next child gets this + 1). */
static long ns_last_pid(void) {
    char b[32];
    if (!file_readable("/proc/sys/kernel/ns_last_pid", b, sizeof b))
        return -1;
    return atol(b);
}

/* The command name of PID (field 2 of its stat), or "" when gone. */
static void pid_comm(long pid, char *comm, size_t n) {
    char p[64], st[512];
    comm[0] = 0;
    snprintf(p, sizeof p, "/proc/%ld/stat", pid);
    if (!file_readable(p, st, sizeof st))
        return;
    char *a = strchr(st, '('), *z = strrchr(st, ')');
    if (a && z && z > a) {
        size_t len = (size_t)(z - a - 1) < n - 1 ? (size_t)(z - a - 1) : n - 1;
        memcpy(comm, a + 1, len);
        comm[len] = 0;
    }
}

/*
 * spawn-window SECONDS: while the test has the init start commands, watch
 * the newest pids and try to open their memory map and their memory. A
 * child of the init runs in the init's memory (a vfork-style clone) from its
 * uid change until its exec: whoever opens /proc/CHILD/mem then holds the
 * root init's memory. Opening a map that shows corral-init is the escape.
 */
static void spawn_window(int argc, char **argv) {
    int secs = argc > 0 ? atoi(argv[0]) : 5;
    time_t end = time(NULL) + secs;
    long tries = 0, opened = 0, self = getpid();
    static char buf[1 << 16];
    while (time(NULL) < end) {
        long last = ns_last_pid();
        for (long p = last; p <= last + 1; p++) {
            if (p == self || p <= 1)
                continue;
            char path[64];
            snprintf(path, sizeof path, "/proc/%ld/maps", p);
            tries++;
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0)
                continue;
            snprintf(path, sizeof path, "/proc/%ld/mem", p);
            int mem = open(path, O_RDWR | O_CLOEXEC);
            ssize_t n = read_fd(fd, buf, sizeof buf - 1);
            close(fd);
            opened++;
            buf[n > 0 ? n : 0] = 0;
            if (strstr(buf, "corral-init")) {
                ESCAPED("opened the memory map of pid %ld while it ran in the root init's memory (between its uid change "
                        "and its exec)%s", p, mem >= 0 ? ", and /proc/PID/mem for writing" : "");
                if (mem >= 0)
                    close(mem);
                return;
            }
            if (mem >= 0)
                close(mem);
        }
    }
    INFO("%ld attempts, %ld maps of the tenant's own commands opened after their exec", tries, opened);
    if (tries < 1000)
        SETUP("only %ld attempts in %d s", tries, secs);
    BLOCKED("no child of the init showed the init's memory between its uid change and its exec");
}

/*
 * stop-spawns SECONDS: SIGSTOP every new process as soon as the tenant may
 * signal it. One caught before its exec (its command name is still the
 * init's) is held stopped until it exec'd after all (a stop that landed
 * during its execve; then it is continued) or is gone (the init killed it),
 * or until the end. The others are continued at once. The test meanwhile
 * checks that the init still starts commands.
 */
static void stop_spawns(int argc, char **argv) {
    int secs = argc > 0 ? atoi(argv[0]) : 5;
    time_t end = time(NULL) + secs;
    long self = getpid(), held[256], nheld = 0, caught = 0, gone = 0, stopped = 0, last_stopped = 0;
    char comm[64];
    while (time(NULL) < end) {
        for (long i = 0; i < nheld; i++) {
            pid_comm(held[i], comm, sizeof comm);
            if (comm[0] && strncmp(comm, "corral", 6) == 0)
                continue;
            if (comm[0])
                kill(held[i], SIGCONT);
            else
                gone++;
            held[i--] = held[--nheld];
        }
        long p = ns_last_pid();
        if (p == self || p <= 1 || p == last_stopped || kill(p, SIGSTOP) < 0)
            continue;
        last_stopped = p;
        stopped++;
        pid_comm(p, comm, sizeof comm);
        if (strncmp(comm, "corral", 6) == 0 && nheld < 256) {
            held[nheld++] = p;
            caught++;
        } else {
            kill(p, SIGCONT);
        }
    }
    for (long i = 0; i < nheld; i++)
        kill(held[i], SIGCONT);
    INFO("%ld processes stopped, %ld of them before their exec; %ld of those were gone while held, %ld still held at the end",
         stopped, caught, gone, nheld);
    if (caught == 0)
        SETUP("no child was caught before its exec in %d s", secs);
    BLOCKED("caught %ld children of the init stopped before their exec", caught);
}

static void init(int argc, char **argv) {
    (void)argc;
    (void)argv;
    /* The init's session and process group (fields 5 and 6 of its stat):
     * SIGCONT is allowed to any process of the caller's own session, and
     * the caller's process group gets terminal signals (Ctrl-C, hangup). */
    char st[1024];
    long init_pgrp = -1, init_sid = -1;
    if (file_readable("/proc/1/stat", st, sizeof st)) {
        char *p = strrchr(st, ')');
        if (p)
            sscanf(p + 2, "%*c %*d %ld %ld", &init_pgrp, &init_sid);
    }
    /* Inside the pid namespace a session or group whose leader is outside
     * it shows as 0: the init is a session leader iff its session is 1. */
    INFO("the init's session is %ld and process group %ld (1 = its own; 0 = inherited from a process outside the sandbox)", init_sid, init_pgrp);
    int sigs[] = {0, SIGHUP, SIGTERM, SIGINT, SIGKILL, SIGSTOP, SIGCONT, SIGCHLD, SIGUSR1};
    for (unsigned i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        char what[160];
        snprintf(what, sizeof what, "kill(1, %s)", sigs[i] ? strsignal(sigs[i]) : "0");
        long r = kill(1, sigs[i]);
        if (r == 0 && sigs[i] == SIGCONT && init_sid != 1)
            ESCAPED("%s succeeded: the init is not a session leader (no setsid), it stays in the session of the process that "
                    "started the sandbox, and so does this tenant process (SIGCONT is allowed within a session)", what);
        else
            must_fail(what, r);
    }
    if (init_sid != 1)
        ESCAPED("the init is not a session leader (session %ld, process group %ld as seen inside): it shares the session and "
                "process group of the process that started the sandbox, so a Ctrl-C or hangup aimed at that job also stops the "
                "whole sandbox", init_sid, init_pgrp);
    long pfd = syscall(SYS_pidfd_open, 1, 0);
    if (pfd >= 0) {
        must_fail("pidfd_send_signal(init, SIGTERM)", syscall(SYS_pidfd_send_signal, pfd, SIGTERM, NULL, 0));
        long got = syscall(SYS_pidfd_getfd, pfd, 4, 0);
        must_fail("pidfd_getfd(init, 4)", got);
        if (got >= 0)
            close(got);
        close(pfd);
    } else {
        INFO("pidfd_open(1): %s", strerror(errno));
    }
    must_fail("ptrace(PTRACE_ATTACH, 1)", syscall(SYS_ptrace, 16, 1, 0, 0));
    must_fail("ptrace(PTRACE_SEIZE, 1)", syscall(SYS_ptrace, 0x4206, 1, 0, 0));
    char buf[64];
    struct iovec local = {buf, sizeof buf}, remote = {(void *)0x400000, sizeof buf};
    must_fail("process_vm_readv(1)", process_vm_readv(1, &local, 1, &remote, 1, 0));
    const char *files[] = {"environ", "mem", "maps", "smaps", "pagemap", "auxv", "stack", "syscall", "exe", "cwd/.", "root/.", "fd/4", "fdinfo/4", "personality", "timers", "io"};
    for (unsigned i = 0; i < sizeof files / sizeof *files; i++) {
        char p[64], data[256];
        snprintf(p, sizeof p, "/proc/1/%s", files[i]);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            BLOCKED("open %s: %s", p, strerror(errno));
            continue;
        }
        ssize_t r = read(fd, data, sizeof data);
        int e = errno;
        close(fd);
        if (r > 0)
            ESCAPED("read %zd bytes of %s", r, p);
        else if (r == 0 && !strcmp(files[i], "environ"))
            ESCAPED("opened %s (empty read)", p);
        else
            BLOCKED("read %s: %s", p, r == 0 ? "nothing" : strerror(e));
    }
    if (getppid() == 1)
        INFO("our parent is the init (a detached spawn)");
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 4) {
        fprintf(stderr, "usage: %s ATTEMPT MARKER SECRET [ARGS...]\n", argv[0]);
        finish(SENTINEL_SETUP);
    }
    const char *a = argv[1];
    marker = argv[2];
    secret = argv[3];
    if (marker[0] != '/' || !secret[0])
        SETUP("MARKER must be an absolute path and SECRET non-empty");
    int n = argc - 4;
    char **args = argv + 4;
    struct { const char *name; void (*fn)(int, char **); } table[] = {
        {"proc-root", proc_root}, {"handle", handle}, {"signal", signal_other}, {"pgrp", pgrp}, {"mount", mounts},
        {"mknod", mknod_dev}, {"procsys", procsys}, {"setns", setns_attempt}, {"rlimit", rlimits},
        {"cgroup", cgroup}, {"read-other", read_other}, {"net", net}, {"fds", fds}, {"cwd", cwd},
        {"exe", exe_watch}, {"sockets", sockets}, {"syscalls", syscalls}, {"allowlist", allowlist}, {"status", status}, {"init", init},
        {"spawn-window", spawn_window}, {"stop-spawns", stop_spawns},
    };
    for (unsigned i = 0; i < sizeof table / sizeof *table; i++) {
        if (!strcmp(a, table[i].name)) {
            table[i].fn(n, args);
            finish(escapes ? SENTINEL_ESCAPED : SENTINEL_BLOCKED);
        }
    }
    SETUP("unknown attempt %s", a);
}
