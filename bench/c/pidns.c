/* pidns: cost of getpid, fork+wait and pthread create+join at a given
 * pid-namespace nesting depth (the measurements of the pid namespaces
 * patch set: getpid() 10^9 times, nptl's perf test of thread creation).
 *
 *   pidns LEVELS OP COUNT      OP: getpid | fork | thread
 *
 * With LEVELS > 0 the program nests itself: LEVELS times it unshares
 * CLONE_NEWPID and forks, so the measuring process is pid 1 of a namespace
 * LEVELS deep below the one it started in (needs CAP_SYS_ADMIN). Then it
 * runs OP COUNT times and prints one line:
 *
 *   pidns LEVELS OP COUNT WALL_NS_PER_OP CPU_NS_PER_OP PID
 *
 * CPU time is user + system of the process and of its reaped children (the
 * forked children's exit work counts) from getrusage. PID is what getpid()
 * returns in the measuring process (1 when nested). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
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
	struct rusage s, c;
	getrusage(RUSAGE_SELF, &s);
	getrusage(RUSAGE_CHILDREN, &c);
	return (s.ru_utime.tv_sec + s.ru_stime.tv_sec + c.ru_utime.tv_sec + c.ru_stime.tv_sec) * 1e9 +
	       (s.ru_utime.tv_usec + s.ru_stime.tv_usec + c.ru_utime.tv_usec + c.ru_stime.tv_usec) * 1e3;
}

static void *noop(void *arg)
{
	return arg;
}

/* Returns in the process that measures; every ancestor waits for its child
 * and exits with its status. */
static void nest(int levels)
{
	int i, st;
	pid_t c;

	for (i = 0; i < levels; i++) {
		if (unshare(CLONE_NEWPID) != 0) {
			fprintf(stderr, "pidns: unshare(CLONE_NEWPID) at level %d: %s\n", i + 1,
				strerror(errno));
			exit(3);
		}
		fflush(stdout);
		c = fork();
		if (c < 0) {
			fprintf(stderr, "pidns: fork: %s\n", strerror(errno));
			exit(3);
		}
		if (c > 0) {
			while (waitpid(c, &st, 0) < 0)
				if (errno != EINTR)
					exit(3);
			exit(WIFEXITED(st) ? WEXITSTATUS(st) : 3);
		}
	}
}

int main(int argc, char **argv)
{
	int levels;
	long count, i;
	const char *op;
	double w0, c0, w, c;
	volatile long sink = 0;

	if (argc != 4) {
		fprintf(stderr, "usage: pidns LEVELS getpid|fork|thread COUNT\n");
		return 2;
	}
	levels = atoi(argv[1]);
	op = argv[2];
	count = atol(argv[3]);
	if (levels < 0 || levels > 32 || count < 1) {
		fprintf(stderr, "pidns: LEVELS 0..32, COUNT >= 1\n");
		return 2;
	}
	if (strcmp(op, "getpid") && strcmp(op, "fork") && strcmp(op, "thread")) {
		fprintf(stderr, "pidns: unknown op %s\n", op);
		return 2;
	}
	nest(levels);

	w0 = now_ns();
	c0 = cpu_ns();
	if (!strcmp(op, "getpid")) {
		for (i = 0; i < count; i++)
			sink += syscall(SYS_getpid);
	} else if (!strcmp(op, "fork")) {
		for (i = 0; i < count; i++) {
			int st;
			pid_t p = fork();
			if (p == 0)
				_exit(0);
			if (p < 0) {
				fprintf(stderr, "pidns: fork: %s\n", strerror(errno));
				return 3;
			}
			while (waitpid(p, &st, 0) < 0)
				if (errno != EINTR)
					return 3;
		}
	} else {
		for (i = 0; i < count; i++) {
			pthread_t t;
			int e = pthread_create(&t, NULL, noop, NULL);
			if (e) {
				fprintf(stderr, "pidns: pthread_create: %s\n", strerror(e));
				return 3;
			}
			pthread_join(t, NULL);
		}
	}
	w = now_ns() - w0;
	c = cpu_ns() - c0;
	printf("pidns %d %s %ld %.3f %.3f %ld\n", levels, op, count, w / count, c / count,
	       (long)syscall(SYS_getpid));
	return sink == -1;
}
