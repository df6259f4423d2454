/* cgi-exec: the per-request trampoline of the cgi suite.
 *
 * fcgiwrap can only exec the file named by SCRIPT_FILENAME; it has no notion
 * of a wrapper command. So for every (mode, tenant, script) corral bench
 * installs a copy of this program at the SCRIPT_FILENAME nginx passes, and
 * next to it a file "<SCRIPT_FILENAME>.argv" holding NUL-terminated strings:
 *
 *   <real SCRIPT_FILENAME> NUL <argv0> NUL <argv1> NUL ...
 *
 * cgi-exec sets SCRIPT_FILENAME to the real script (php-cgi reads it) and
 * execs argv: the script itself (mode bare), or bwrap / nsenter / corral run
 * followed by the script. Every fcgiwrap mode pays this same static exec, so
 * differences between modes are the sandboxes' own. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_ARGS 1024
#define MAX_BYTES 65536

static void fail(const char *what, const char *path)
{
	static const char head[] = "Status: 500 Internal Server Error\r\n"
				   "Content-Type: text/plain\r\n\r\ncgi-exec failed\n";
	if (write(1, head, sizeof(head) - 1) < 0) {
		/* nothing more to do */
	}
	fprintf(stderr, "cgi-exec: %s %s: %s\n", what, path ? path : "", strerror(errno));
	exit(1);
}

int main(void)
{
	static char buf[MAX_BYTES + 1];
	char path[4096];
	char *args[MAX_ARGS + 1];
	const char *self = getenv("SCRIPT_FILENAME");
	int fd, n = 0, argc = 0;
	ssize_t got, total = 0;
	char *p, *end;

	if (!self)
		fail("SCRIPT_FILENAME", "unset");
	if (snprintf(path, sizeof(path), "%s.argv", self) >= (int)sizeof(path))
		fail("path too long", self);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fail("open", path);
	while ((got = read(fd, buf + total, MAX_BYTES - total)) > 0)
		total += got;
	if (got < 0)
		fail("read", path);
	close(fd);
	buf[total] = 0;
	end = buf + total;
	for (p = buf; p < end && argc <= MAX_ARGS; p += strlen(p) + 1, n++) {
		if (n == 0) {
			if (*p && setenv("SCRIPT_FILENAME", p, 1) != 0)
				fail("setenv", p);
		} else {
			args[argc++] = p;
		}
	}
	if (argc == 0 || argc > MAX_ARGS) {
		errno = EINVAL;
		fail("bad argument file", path);
	}
	args[argc] = NULL;
	execv(args[0], args);
	fail("exec", args[0]);
	return 1;
}
