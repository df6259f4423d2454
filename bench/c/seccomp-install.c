/* What installing a seccomp filter costs a new process: COUNT times fork a
 * child that sets no_new_privs, installs the filter (timing the seccomp()
 * call itself) and exits; prints the mean microseconds of the call and of a
 * whole child (fork to reaped). Modes: `none` (no filter), `allow` (the
 * one-instruction allow-all filter), `file FILE` (a raw struct sock_filter
 * array, e.g. corral's default filter from `corral-bench`'s seccomp suite or
 * Filter::to_bytes). The kernel emulates a new filter once per syscall
 * number and architecture to fill its action cache, so the cost grows with
 * the length of the path each number takes through the program.
 *
 * Usage: seccomp-install none|allow|file COUNT [FILE]
 * Build: cc -O2 -o seccomp-install seccomp-install.c
 */
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[1], "file") == 0 && argc < 4)) {
        fprintf(stderr, "usage: %s none|allow|file COUNT [FILE]\n", argv[0]);
        return 2;
    }
    static struct sock_filter buf[4096];
    int len = 0, n = atoi(argv[2]);
    if (strcmp(argv[1], "file") == 0) {
        int fd = open(argv[3], O_RDONLY);
        ssize_t got = fd < 0 ? -1 : read(fd, buf, sizeof buf);
        if (got <= 0 || got % sizeof buf[0]) {
            fprintf(stderr, "%s: not a filter file\n", argv[3]);
            return 2;
        }
        len = got / sizeof buf[0];
    } else if (strcmp(argv[1], "allow") == 0) {
        buf[0] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
        len = 1;
    } else if (strcmp(argv[1], "none") != 0) {
        fprintf(stderr, "unknown mode %s\n", argv[1]);
        return 2;
    }
    struct sock_fprog prog = {(unsigned short)len, buf};
    double t0 = now_us(), in_call = 0;
    for (int i = 0; i < n; i++) {
        int pipefd[2];
        if (pipe(pipefd)) {
            perror("pipe");
            return 1;
        }
        pid_t c = fork();
        if (c < 0) {
            perror("fork");
            return 1;
        }
        if (c == 0) {
            prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
            double a = now_us();
            if (len && syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog))
                _exit(1);
            double took = now_us() - a;
            _exit(write(pipefd[1], &took, sizeof took) == sizeof took ? 0 : 1);
        }
        double took = 0;
        int st;
        if (read(pipefd[0], &took, sizeof took) != sizeof took || waitpid(c, &st, 0) < 0 || st != 0) {
            fprintf(stderr, "child failed\n");
            return 1;
        }
        close(pipefd[0]);
        close(pipefd[1]);
        in_call += took;
    }
    printf("%s %d instructions: seccomp() %.1f us, whole child %.1f us\n", argv[1], len, in_call / n,
           (now_us() - t0) / n);
    return 0;
}
