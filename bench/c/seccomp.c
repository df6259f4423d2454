/* seccomp: what a seccomp filter costs per system call (issue 15's target:
 * "the filter costs no more per syscall than the kernel's own seccomp entry
 * cost").
 *
 *   seccomp [--floor | --bpf FILE] OP COUNT     OP: getppid | getpid | read | ioctl
 *
 * --floor installs a one-instruction filter (return ALLOW) before measuring:
 * the kernel's own seccomp entry, the floor any filter pays. --bpf FILE
 * installs the classic-BPF program in FILE (struct sock_filter entries, as
 * corral compiles them). Without either, whatever filter the process
 * inherited applies (none natively, corral's under `corral run`). Both set
 * no_new_privs first, so no privilege is needed.
 *
 * Ops, each a raw system call COUNT times:
 *   getppid   no arguments; allowed by every filter without looking at them,
 *             so the kernel's action cache (5.11+) can skip the program
 *   getpid    the same, another number
 *   read      read(2) of 1 byte from /dev/zero (cached like getppid)
 *   ioctl     ioctl(-1, FIONREAD): corral's filter reads ioctl's request,
 *             so the program runs on every call (EBADF afterwards)
 *
 * Prints one line:  seccomp OP COUNT WALL_NS_PER_CALL CPU_NS_PER_CALL MODE
 * where MODE is the process's Seccomp field of /proc/self/status (0 none,
 * 2 filter) after setup. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double cpu_ns(void)
{
	struct rusage s;
	getrusage(RUSAGE_SELF, &s);
	return (s.ru_utime.tv_sec + s.ru_stime.tv_sec) * 1e9 + (s.ru_utime.tv_usec + s.ru_stime.tv_usec) * 1e3;
}

static void die(const char *what)
{
	fprintf(stderr, "seccomp: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void install(struct sock_filter *prog, unsigned short len)
{
	struct sock_fprog fprog = {.len = len, .filter = prog};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		die("PR_SET_NO_NEW_PRIVS");
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) != 0)
		die("seccomp(SECCOMP_SET_MODE_FILTER)");
}

static void install_file(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0)
		die(path);
	if (st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) || st.st_size > 4096 * (off_t)sizeof(struct sock_filter)) {
		fprintf(stderr, "seccomp: %s: not a BPF program (%lld bytes)\n", path, (long long)st.st_size);
		exit(2);
	}
	struct sock_filter *prog = malloc(st.st_size);
	if (!prog || read(fd, prog, st.st_size) != st.st_size)
		die(path);
	close(fd);
	install(prog, st.st_size / sizeof(struct sock_filter));
	free(prog);
}

static int seccomp_mode(void)
{
	char line[256];
	int mode = -1;
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "Seccomp: %d", &mode) == 1)
			break;
	fclose(f);
	return mode;
}

int main(int argc, char **argv)
{
	int a = 1;
	if (argc > a && !strcmp(argv[a], "--floor")) {
		struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
		install(&allow, 1);
		a++;
	} else if (argc > a + 1 && !strcmp(argv[a], "--bpf")) {
		install_file(argv[a + 1]);
		a += 2;
	}
	if (argc != a + 2) {
		fprintf(stderr, "usage: seccomp [--floor | --bpf FILE] getppid|getpid|read|ioctl COUNT\n");
		return 2;
	}
	const char *op = argv[a];
	long count = atol(argv[a + 1]);
	int mode = seccomp_mode();
	int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die("/dev/zero");
	char byte;
	int n = 0;
	long sys;
	if (!strcmp(op, "getppid"))
		sys = SYS_getppid;
	else if (!strcmp(op, "getpid"))
		sys = SYS_getpid;
	else if (!strcmp(op, "read"))
		sys = SYS_read;
	else if (!strcmp(op, "ioctl"))
		sys = SYS_ioctl;
	else {
		fprintf(stderr, "seccomp: unknown op %s\n", op);
		return 2;
	}
	/* Warm up (page faults, the cache line of the task's seccomp state). */
	for (long i = 0; i < 10000; i++)
		syscall(SYS_getppid);
	double w0 = now_ns(), c0 = cpu_ns();
	switch (sys) {
	case SYS_read:
		for (long i = 0; i < count; i++)
			if (syscall(SYS_read, fd, &byte, 1) != 1)
				die("read /dev/zero");
		break;
	case SYS_ioctl:
		for (long i = 0; i < count; i++)
			syscall(SYS_ioctl, -1, FIONREAD, &n);
		break;
	default:
		for (long i = 0; i < count; i++)
			syscall(sys);
	}
	double w1 = now_ns(), c1 = cpu_ns();
	printf("seccomp %s %ld %.2f %.2f %d\n", op, count, (w1 - w0) / count, (c1 - c0) / count, mode);
	return 0;
}
