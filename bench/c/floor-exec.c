/* floor-exec: run PROG under the seccomp floor, a one-instruction filter
 * that allows every call: the kernel's own cost of having any filter (every
 * system call takes the seccomp entry path), without anything a real filter
 * decides. The micro suite's `seccomp-floor` mode, between native and
 * corral: what is left between the floor and corral is corral's own.
 *
 *   floor-exec PROG [ARGS...]
 *
 * Sets no_new_privs (no privilege needed), installs the filter, execs PROG. */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: floor-exec PROG [ARGS...]\n");
        return 2;
    }
    struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct sock_fprog prog = {1, &allow};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) {
        perror("floor-exec: seccomp");
        return 126;
    }
    execv(argv[1], argv + 1);
    perror("floor-exec: exec");
    return 127;
}
