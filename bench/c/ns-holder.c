/* ns-holder: the smallest process that holds an idle tenant's namespaces,
 * for bench/tenant-floor.py (the kernel's floor of an idle tenant, which
 * corral's figure is read against).
 *
 *   ns-holder [--net] CGROUP_DIR...
 *
 * Joins each CGROUP_DIR (writes 0 to its cgroup.procs), makes new mount,
 * pid, ipc, uts and cgroup namespaces (and a network one with --net), then
 * forks the pid namespace's pid 1: it makes its mounts private, mounts a
 * procfs of its pid namespace on /proc (a sandbox needs one) and pauses
 * until killed. The parent prints the child's pid and exits. Link it
 * statically: its own pages are then a few KiB, and what the probe measures
 * is the kernel's. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

static void join_cgroup(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/cgroup.procs", dir);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "0", 1) != 1) {
        perror(path);
        exit(1);
    }
    close(fd);
}

int main(int argc, char **argv) {
    int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
    int i = 1;
    if (i < argc && strcmp(argv[i], "--net") == 0) {
        flags |= CLONE_NEWNET;
        i++;
    }
    for (; i < argc; i++)
        join_cgroup(argv[i]);
    if (unshare(flags) != 0) {
        perror("ns-holder: unshare");
        return 1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("ns-holder: fork");
        return 1;
    }
    if (pid == 0) {
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
            mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) {
            perror("ns-holder: mount");
            _exit(1);
        }
        /* Nothing open but what the kernel needs. */
        for (int fd = 0; fd < 3; fd++)
            close(fd);
        for (;;)
            pause();
    }
    printf("%d\n", pid);
    return 0;
}
