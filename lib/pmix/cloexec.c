//go:build pmix

// libpmix's listener thread takes its clients' connections with accept(2),
// which leaves them inheritable: a process the daemon forks at that moment
// would hold the server's end of another client's connection (and keep it
// open after the daemon closed it). This definition comes before libc's in
// symbol resolution (the executable exports it), so libpmix's accept
// becomes an atomic accept4(SOCK_CLOEXEC) and no fork can see the socket
// inheritable. Go's own accepts call accept4 directly and are unaffected.

#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#define DYN_SOCK_CLOEXEC 02000000 /* SOCK_CLOEXEC (= O_CLOEXEC) on Linux */

struct sockaddr;
int accept(int fd, struct sockaddr *addr, unsigned int *len);

int accept(int fd, struct sockaddr *addr, unsigned int *len)
{
    return (int)syscall(SYS_accept4, fd, addr, len, DYN_SOCK_CLOEXEC);
}
