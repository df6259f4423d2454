/* ubench: the micro suite's workloads, after the definitions of BYTE
 * UnixBench 5.1 (byte-unixbench: execl.c, fstime.c, pipe.c, context1.c,
 * spawn.c, looper.c + multi.sh + tst.sh, syscall.c "mix"), written for corral
 * so that one binary runs natively, inside a corral sandbox and inside
 * bubblewrap.
 *
 *   ubench execl   MS              re-exec this binary until MS elapsed  (lps)
 *   ubench fcopy   MS BUF BLOCKS   file copy with BUF-byte buffers over a
 *                                  file of BLOCKS KiB, rewound at its end (KBps)
 *   ubench pipe    MS              write+read 512 bytes on one pipe      (lps)
 *   ubench context MS              two processes ping-pong a counter
 *                                  through two pipes                      (lps)
 *   ubench spawn   MS              fork, child exits, wait                (lps)
 *   ubench shell   MS N            run "sh multi.sh N" in a loop: N
 *                                  concurrent copies of a sort/od/grep/
 *                                  tee/wc pipeline script                 (lpm)
 *   ubench syscall MS              close(dup(fd)); getpid via syscall();
 *                                  getuid(); umask(022)                   (lps)
 *
 * Durations are in milliseconds (UnixBench uses whole seconds: 10 s for
 * pipe/context/syscall, 30 s for execl/spawn/file copy, 60 s for shell).
 * Files are created in the current directory (one directory per parallel
 * copy). The result is one line on stdout:
 *
 *   ubench TEST SCORE UNIT ITERATIONS ELAPSED_SECONDS
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_alarm(int sig)
{
	(void)sig;
	stop = 1;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
	fprintf(stderr, "ubench: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* Arm a one-shot timer: `stop` becomes 1 after ms milliseconds. No
 * SA_RESTART: a blocked read/write returns EINTR when time is up. */
static void arm(long ms)
{
	struct sigaction sa;
	struct itimerval it;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL) != 0)
		die("sigaction");
	memset(&it, 0, sizeof(it));
	it.it_value.tv_sec = ms / 1000;
	it.it_value.tv_usec = (ms % 1000) * 1000;
	if (setitimer(ITIMER_REAL, &it, NULL) != 0)
		die("setitimer");
}

static void report(const char *test, double score, const char *unit,
		   unsigned long iter, double elapsed)
{
	printf("ubench %s %.3f %s %lu %.6f\n", test, score, unit, iter, elapsed);
	fflush(stdout);
}

static long parse_ms(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*end || v < 1 || v > 3600L * 1000) {
		fprintf(stderr, "ubench: bad duration %s (milliseconds, 1..3600000)\n", s);
		exit(2);
	}
	return v;
}

/* ---- execl: UnixBench execl.c, with a monotonic clock instead of time() */

static int t_execl(const char *self, int argc, char **argv)
{
	/* first call: execl MS; later calls: execl-next MS ITER START */
	long ms = parse_ms(argv[2]);
	unsigned long iter = 0;
	double start, t;
	char ms_s[32], iter_s[32], start_s[64];

	if (argc >= 5 && strcmp(argv[1], "execl-next") == 0) {
		iter = strtoul(argv[3], NULL, 10);
		start = strtod(argv[4], NULL);
	} else {
		start = now();
	}
	iter++;
	t = now();
	if (t - start >= ms / 1000.0) {
		report("execl", iter / (t - start), "lps", iter, t - start);
		return 0;
	}
	snprintf(ms_s, sizeof(ms_s), "%ld", ms);
	snprintf(iter_s, sizeof(iter_s), "%lu", iter);
	snprintf(start_s, sizeof(start_s), "%.9f", start);
	execl(self, self, "execl-next", ms_s, iter_s, start_s, (char *)NULL);
	die("execl");
	return 2;
}

/* ---- file copy: UnixBench fstime.c -c (copy test) */

static char fbuf[8192];

static int t_fcopy(long ms, int bufsize, int max_blocks)
{
	char name0[64], name1[64];
	long max_buffs, i;
	int f, g;
	unsigned long long bytes = 0;
	unsigned long iter = 0;
	double start, el;
	ssize_t n;

	if (bufsize < 256 || bufsize > (int)sizeof(fbuf) || max_blocks < 1) {
		fprintf(stderr, "ubench: fcopy: bad buffer size or block count\n");
		return 2;
	}
	snprintf(name0, sizeof(name0), "dummy0-%d", (int)getpid());
	snprintf(name1, sizeof(name1), "dummy1-%d", (int)getpid());
	f = open(name0, O_RDWR | O_CREAT | O_TRUNC, 0600);
	g = open(name1, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (f < 0 || g < 0)
		die("fcopy: create");
	unlink(name0);
	unlink(name1);
	for (i = 0; i < bufsize; i++)
		fbuf[i] = i & 0xff;
	/* Prime: write the source file once and read it back (UnixBench runs
	 * timed write and read passes first; only the copy score is used). */
	max_buffs = (long)max_blocks * 1024 / bufsize;
	for (i = 0; i < max_buffs; i++)
		if (write(f, fbuf, bufsize) != bufsize)
			die("fcopy: write");
	sync();
	lseek(f, 0, SEEK_SET);
	while ((n = read(f, fbuf, bufsize)) > 0)
		;
	lseek(f, 0, SEEK_SET);

	arm(ms);
	start = now();
	while (!stop) {
		n = read(f, fbuf, bufsize);
		if (n != bufsize) {
			if (n < 0 && errno == EINTR)
				break;
			if (n < 0)
				die("fcopy: read");
			lseek(f, 0, SEEK_SET); /* end of file: rewind both */
			lseek(g, 0, SEEK_SET);
			continue;
		}
		n = write(g, fbuf, bufsize);
		if (n < 0 && errno == EINTR)
			break;
		if (n != bufsize)
			die("fcopy: write");
		bytes += bufsize;
		iter++;
	}
	el = now() - start;
	close(f);
	close(g);
	report("fcopy", bytes / 1024.0 / el, "KBps", iter, el);
	return 0;
}

/* ---- pipe throughput: UnixBench pipe.c */

static int t_pipe(long ms)
{
	char buf[512];
	int p[2];
	unsigned long iter = 0;
	double start, el;

	memset(buf, 0, sizeof(buf));
	if (pipe(p) != 0)
		die("pipe");
	arm(ms);
	start = now();
	while (!stop) {
		if (write(p[1], buf, sizeof(buf)) != sizeof(buf)) {
			if (errno == EINTR)
				break;
			die("pipe: write");
		}
		if (read(p[0], buf, sizeof(buf)) != sizeof(buf)) {
			if (errno == EINTR)
				break;
			die("pipe: read");
		}
		iter++;
	}
	el = now() - start;
	report("pipe", iter / el, "lps", iter, el);
	return 0;
}

/* ---- pipe-based context switching: UnixBench context1.c */

static int t_context(long ms)
{
	int p1[2], p2[2];
	unsigned long iter = 0, check;
	double start, el;
	pid_t child;
	int st;

	if (pipe(p1) || pipe(p2))
		die("context: pipe");
	signal(SIGPIPE, SIG_IGN);
	child = fork();
	if (child < 0)
		die("context: fork");
	if (child == 0) {
		/* slave: read p1, write it back on p2, until end of stream */
		close(p1[1]);
		close(p2[0]);
		for (;;) {
			if (read(p1[0], &check, sizeof(check)) != sizeof(check))
				_exit(0);
			if (check != iter) {
				fprintf(stderr, "ubench: context: slave sync error\n");
				_exit(3);
			}
			if (write(p2[1], &iter, sizeof(iter)) != sizeof(iter))
				_exit(0);
			iter++;
		}
	}
	close(p1[0]);
	close(p2[1]);
	arm(ms);
	start = now();
	while (!stop) {
		if (write(p1[1], &iter, sizeof(iter)) != sizeof(iter)) {
			if (errno == EINTR)
				break;
			die("context: write");
		}
		if (read(p2[0], &check, sizeof(check)) != sizeof(check)) {
			if (errno == EINTR)
				break;
			die("context: read");
		}
		if (check != iter) {
			fprintf(stderr, "ubench: context: master sync error\n");
			return 3;
		}
		iter++;
	}
	el = now() - start;
	close(p1[1]);
	close(p2[0]);
	waitpid(child, &st, 0);
	report("context", iter / el, "lps", iter, el);
	return 0;
}

/* ---- process creation: UnixBench spawn.c */

static int t_spawn(long ms)
{
	unsigned long iter = 0;
	double start, el;
	pid_t c;
	int st;

	arm(ms);
	start = now();
	while (!stop) {
		c = fork();
		if (c == 0)
			_exit(0);
		if (c < 0)
			die("spawn: fork");
		while (waitpid(c, &st, 0) < 0)
			if (errno != EINTR)
				die("spawn: wait");
		if (st != 0) {
			fprintf(stderr, "ubench: spawn: bad wait status %#x\n", st);
			return 3;
		}
		iter++;
	}
	el = now() - start;
	report("spawn", iter / el, "lps", iter, el);
	return 0;
}

/* ---- shell scripts: UnixBench looper + multi.sh + tst.sh */

static const char tst_sh[] =
	"#!/bin/sh\n"
	"# one unit of the shell test: sort, od | sort, grep | tee | wc\n"
	"sort > sort.$$ < \"$1\"\n"
	"od sort.$$ | sort -n -k 1 > od.$$\n"
	"grep the sort.$$ | tee grep.$$ | wc > wc.$$\n"
	"rm sort.$$ grep.$$ od.$$ wc.$$\n";

static const char multi_sh[] =
	"#!/bin/sh\n"
	"# run $1 copies of tst.sh concurrently and wait for them\n"
	"i=1\n"
	"while [ $i -le \"$1\" ]; do\n"
	"  /bin/sh ./tst.sh sort.src &\n"
	"  i=$((i + 1))\n"
	"done\n"
	"wait\n";

static void write_file(const char *name, const char *text, size_t len)
{
	int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len || close(fd) != 0)
		die(name);
}

/* sort.src: about 8.5 KB of text in 360 lines, like UnixBench's (which is a
 * shell script); deterministic so every mode sorts the same bytes. */
static void write_sort_src(void)
{
	static const char *words[] = {
		"the", "sandbox", "tenant", "process", "namespace", "mount", "join",
		"kernel", "cgroup", "limit", "exec", "fork", "pipe", "file", "copy",
		"shell", "script", "server", "request", "socket", "memory", "time",
	};
	const size_t nw = sizeof(words) / sizeof(words[0]);
	unsigned long x = 12345;
	char line[256];
	FILE *f = fopen("sort.src", "w");
	int i, j, len;

	if (!f)
		die("sort.src");
	for (i = 0; i < 360; i++) {
		len = 0;
		for (j = 0; j < 4; j++) {
			x = x * 1103515245 + 12345;
			len += snprintf(line + len, sizeof(line) - len, "%s%s",
					j ? " " : "", words[(x >> 16) % nw]);
		}
		fprintf(f, "%s %lu\n", line, (x >> 8) % 100000);
	}
	if (fclose(f) != 0)
		die("sort.src");
}

static int t_shell(long ms, int n)
{
	unsigned long iter = 0;
	double start, el;
	char n_s[16];
	pid_t c;
	int st;

	if (n < 1 || n > 64) {
		fprintf(stderr, "ubench: shell: concurrency 1..64\n");
		return 2;
	}
	write_file("tst.sh", tst_sh, sizeof(tst_sh) - 1);
	write_file("multi.sh", multi_sh, sizeof(multi_sh) - 1);
	write_sort_src();
	snprintf(n_s, sizeof(n_s), "%d", n);
	arm(ms);
	start = now();
	while (!stop) {
		c = fork();
		if (c == 0) {
			execl("/bin/sh", "sh", "./multi.sh", n_s, (char *)NULL);
			_exit(99);
		}
		if (c < 0)
			die("shell: fork");
		while (waitpid(c, &st, 0) < 0)
			if (errno != EINTR)
				die("shell: wait");
		if (st != 0) {
			fprintf(stderr, "ubench: shell: multi.sh failed, status %#x\n", st);
			return 3;
		}
		iter++;
	}
	el = now() - start;
	unlink("tst.sh");
	unlink("multi.sh");
	unlink("sort.src");
	report("shell", iter * 60.0 / el, "lpm", iter, el);
	return 0;
}

/* ---- system call overhead: UnixBench syscall.c, test "mix" */

static int t_syscall(long ms)
{
	unsigned long iter = 0;
	double start, el;
	int p[2], fd;

	if (pipe(p) != 0 || close(p[1]) != 0)
		die("syscall: pipe");
	fd = p[0];
	arm(ms);
	start = now();
	while (!stop) {
		close(dup(fd));
		syscall(SYS_getpid);
		getuid();
		umask(022);
		iter++;
	}
	el = now() - start;
	report("syscall", iter / el, "lps", iter, el);
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: ubench execl MS | fcopy MS BUFSIZE MAXBLOCKS | pipe MS | context MS |\n"
		"              spawn MS | shell MS CONCURRENCY | syscall MS\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *t;

	if (argc < 3)
		usage();
	t = argv[1];
	if (!strcmp(t, "execl") || !strcmp(t, "execl-next")) {
		const char *self = argv[0][0] == '/' ? argv[0] : "/proc/self/exe";
		return t_execl(self, argc, argv);
	}
	if (!strcmp(t, "fcopy") && argc == 5)
		return t_fcopy(parse_ms(argv[2]), atoi(argv[3]), atoi(argv[4]));
	if (!strcmp(t, "pipe"))
		return t_pipe(parse_ms(argv[2]));
	if (!strcmp(t, "context"))
		return t_context(parse_ms(argv[2]));
	if (!strcmp(t, "spawn"))
		return t_spawn(parse_ms(argv[2]));
	if (!strcmp(t, "shell") && argc == 4)
		return t_shell(parse_ms(argv[2]), atoi(argv[3]));
	if (!strcmp(t, "syscall"))
		return t_syscall(parse_ms(argv[2]));
	usage();
	return 2;
}
