/* joinwrap: the floor for any wrapper that sits between a caller and its
 * command (the join suite's `c-wrapper` mode): open the persisted namespace
 * files named on the command line, setns into each, drop to uid/gid, fork,
 * exec, wait. No cgroup, no seccomp, no capability dropping, no checks: one
 * extra exec and the namespace switch, nothing else.
 *
 *   joinwrap UID GID NSFILE... -- PROG ARGS...
 *
 * NSFILE order matters (user first, mnt last), as for corral run. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: joinwrap UID GID NSFILE... -- PROG ARGS...\n");
		return 125;
	}
	uid_t uid = (uid_t)atol(argv[1]);
	gid_t gid = (gid_t)atol(argv[2]);
	int fds[16], n = 0, i = 3;
	for (; i < argc && strcmp(argv[i], "--") != 0 && n < 16; i++) {
		fds[n] = open(argv[i], O_RDONLY | O_CLOEXEC);
		if (fds[n] < 0) {
			perror(argv[i]);
			return 125;
		}
		n++;
	}
	if (i >= argc - 1) {
		fprintf(stderr, "joinwrap: missing -- PROG\n");
		return 125;
	}
	for (int k = 0; k < n; k++) {
		if (setns(fds[k], 0) < 0) {
			perror("setns");
			return 125;
		}
		close(fds[k]);
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return 125;
	}
	if (pid == 0) {
		if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0) {
			perror("drop privileges");
			_exit(125);
		}
		execv(argv[i + 1], argv + i + 1);
		perror(argv[i + 1]);
		_exit(127);
	}
	int st;
	if (waitpid(pid, &st, 0) < 0)
		return 125;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
