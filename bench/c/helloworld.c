/* The CGI program of the cgi suite: the smallest useful CGI response, like
 * the helloworld CGI shipped with OpenLiteSpeed that the namespaces article
 * used. Built static (no dynamic loader work per request) by corral bench. */
#include <unistd.h>

int main(void)
{
	static const char reply[] =
		"Content-Type: text/html\r\n"
		"\r\n"
		"<html><body><h1>Hello, world!</h1></body></html>\n";
	ssize_t off = 0, n;

	while (off < (ssize_t)(sizeof(reply) - 1)) {
		n = write(1, reply + off, sizeof(reply) - 1 - off);
		if (n <= 0)
			return 1;
		off += n;
	}
	return 0;
}
