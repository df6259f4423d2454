/* seccomp: what a seccomp filter costs per system call (issue 15's target:
 * "the filter costs no more per syscall than the kernel's own seccomp entry
 * cost").
 *
 *   seccomp [--floor | --arg-floor | --bpf FILE] OP COUNT
 *           OP: getppid | getpid | read | ioctl | socket | personality | clone
 *
 * --floor installs a one-instruction filter (return ALLOW) before measuring:
 * the kernel's own seccomp entry, the floor any filter pays. --arg-floor
 * installs the smallest filter that checks OP's argument the way corral's
 * allow list does (load the number; if it is OP, load the argument and
 * compare it with corral's values; allow or refuse): the floor of any filter
 * that inspects arguments, which the kernel's action cache cannot skip
 * (for the ops without an argument rule it is the number test alone). --bpf FILE
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
 *   socket    socket(AF_INET, 999, 0): the filter reads the family (allowed),
 *             the kernel refuses the type at once (EINVAL)
 *   personality  personality(0xffffffff): the filter reads the persona
 *             (the query is allowed), the kernel only returns the current one
 *   clone     clone(CLONE_SIGHAND, ...): the filter reads the flags (no
 *             CLONE_NEW*: allowed), the kernel refuses signal handlers shared
 *             without the VM before it copies anything (EINVAL)
 *
 * Prints one line:  seccomp OP COUNT WALL_NS_PER_CALL CPU_NS_PER_CALL MODE
 * where MODE is the process's Seccomp field of /proc/self/status (0 none,
 * 2 filter) after setup. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/fs.h>
#include <sched.h>
#include <stddef.h>
#include <sys/socket.h>
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

/* corral's argument rules (crates/corral-security/src/seccomp/rules.rs):
 * ioctl: none of TIOCSTI, TIOCLINUX, FS_IOC_FSSETXATTR (request, arg 1);
 * socket: one of AF_UNIX, AF_INET, AF_INET6, AF_NETLINK (family, arg 0);
 * personality: one of 0, 8, 0x20000, 0x20008, 0xffffffff (arg 0);
 * clone: none of the CLONE_NEW* bits (flags, arg 0). Low 32 bits only
 * (x86_64 is little-endian: the low half comes first). */
#define ARG_LO(n) (offsetof(struct seccomp_data, args) + 8 * (n))
#define RET_DENY (SECCOMP_RET_ERRNO | EPERM)
#define CLONE_NEW_MASK (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET)

static void install_arg_floor(long sys)
{
	struct sock_filter p[16];
	unsigned short n = 0;
	p[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	if (sys == SYS_ioctl) {
		p[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ioctl, 0, 4);
		p[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(1));
		p[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCSTI, 3, 0);
		p[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCLINUX, 2, 0);
		p[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, FS_IOC_FSSETXATTR, 1, 0);
	} else if (sys == SYS_socket) {
		p[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 0, 5);
		p[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0));
		p[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 3, 0);
		p[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET, 2, 0);
		p[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, 1, 0);
		p[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_NETLINK, 0, 1);
	} else if (sys == SYS_personality) {
		p[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_personality, 0, 6);
		p[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0));
		p[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x0, 4, 0);
		p[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x8, 3, 0);
		p[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x20000, 2, 0);
		p[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x20008, 1, 0);
		p[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xffffffff, 0, 1);
	} else if (sys == SYS_clone) {
		p[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 2);
		p[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0));
		p[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NEW_MASK, 1, 0);
	} else {
		/* No argument rule: the number test alone (the program still runs
		 * unless the action cache answers, which it does here). */
		p[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ioctl, 0, 0);
	}
	p[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	p[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, RET_DENY);
	install(p, n);
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

static long op_number(const char *op)
{
	static const struct {
		const char *name;
		long nr;
	} ops[] = {
		{"getppid", SYS_getppid}, {"getpid", SYS_getpid}, {"read", SYS_read}, {"ioctl", SYS_ioctl},
		{"socket", SYS_socket}, {"personality", SYS_personality}, {"clone", SYS_clone},
	};
	for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
		if (!strcmp(op, ops[i].name))
			return ops[i].nr;
	return -1;
}

int main(int argc, char **argv)
{
	int a = 1;
	const char *how = "";
	if (argc > a && (!strcmp(argv[a], "--floor") || !strcmp(argv[a], "--arg-floor"))) {
		how = argv[a];
		a++;
	} else if (argc > a + 1 && !strcmp(argv[a], "--bpf")) {
		how = "--bpf";
		a++;
	}
	if (argc != a + 2 + (!strcmp(how, "--bpf"))) {
		fprintf(stderr, "usage: seccomp [--floor | --arg-floor | --bpf FILE] "
				"getppid|getpid|read|ioctl|socket|personality|clone COUNT\n");
		return 2;
	}
	const char *op = argv[argc - 2];
	long count = atol(argv[argc - 1]);
	long sys = op_number(op);
	if (sys < 0) {
		fprintf(stderr, "seccomp: unknown op %s\n", op);
		return 2;
	}
	if (!strcmp(how, "--floor")) {
		struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
		install(&allow, 1);
	} else if (!strcmp(how, "--arg-floor")) {
		install_arg_floor(sys);
	} else if (!strcmp(how, "--bpf")) {
		install_file(argv[a]);
	}
	int mode = seccomp_mode();
	int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die("/dev/zero");
	char byte;
	int n = 0;
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
	case SYS_socket:
		for (long i = 0; i < count; i++)
			if (syscall(SYS_socket, AF_INET, 999, 0) != -1 || errno != EINVAL)
				die("socket(AF_INET, 999, 0) should fail with EINVAL");
		break;
	case SYS_personality:
		for (long i = 0; i < count; i++)
			if (syscall(SYS_personality, 0xffffffffUL) == -1)
				die("personality(0xffffffff)");
		break;
	case SYS_clone:
		for (long i = 0; i < count; i++) {
			long r = syscall(SYS_clone, (unsigned long)CLONE_SIGHAND, 0UL, 0UL, 0UL, 0UL);
			if (r == 0)
				_exit(0); /* never: the kernel refuses CLONE_SIGHAND without CLONE_VM */
			if (r != -1 || errno != EINVAL)
				die("clone(CLONE_SIGHAND) should fail with EINVAL");
		}
		break;
	default:
		for (long i = 0; i < count; i++)
			syscall(sys);
	}
	double w1 = now_ns(), c1 = cpu_ns();
	printf("seccomp %s %ld %.2f %.2f %d\n", op, count, (w1 - w0) / count, (c1 - c0) / count, mode);
	return 0;
}
