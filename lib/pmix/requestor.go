//go:build pmix

package pmix

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// requestorKey is the qualifier requestor.c adds to a client's queries:
// the two ends of the client's TCP connection to this server, "client
// server" (libpmix hands the host its queries in the server's own name).
const requestorKey = "dynrt.requestor"

// requestorOf names the PMIx process at the client end of conn (a
// requestorKey value): the process that holds that socket, named by the
// environment the server gave it at fork (PMIX_NAMESPACE, PMIX_RANK). ok
// is false when it cannot be found (the process is gone, the connection
// is not IPv4). It asks the kernel for the socket's inode (sock_diag: an
// exact lookup; reading /proc/net/tcp walks every socket, 15-50 ms here),
// then reads the descriptors of this process's descendants (the daemon's
// processes), and of every process if none of them holds it, as ss -p
// does.
func requestorOf(conn string) (p Proc, ok bool) {
	client, server, err := parseConn(conn)
	if err != nil {
		return Proc{}, false
	}
	inode, err := tcpInode(client, server)
	if err != nil {
		return Proc{}, false
	}
	link := "socket:[" + strconv.FormatUint(uint64(inode), 10) + "]"
	self := strconv.Itoa(os.Getpid())
	seen := map[string]bool{self: true}
	holder := ""
	for _, pid := range descendants(self) {
		if seen[pid] = true; holds(pid, link) {
			holder = pid
			break
		}
	}
	if holder == "" {
		procs, _ := os.ReadDir("/proc")
		for _, e := range procs {
			if pid := e.Name(); !seen[pid] && pid[0] >= '0' && pid[0] <= '9' && holds(pid, link) {
				holder = pid
				break
			}
		}
	}
	if holder == "" {
		return Proc{}, false
	}
	env, err := os.ReadFile("/proc/" + holder + "/environ")
	if err != nil {
		return Proc{}, false
	}
	return procOfEnviron(env)
}

// holds says whether process pid has a descriptor on link ("socket:[N]").
func holds(pid, link string) bool {
	fds, _ := os.ReadDir("/proc/" + pid + "/fd")
	for _, fd := range fds {
		if l, err := os.Readlink("/proc/" + pid + "/fd/" + fd.Name()); err == nil && l == link {
			return true
		}
	}
	return false
}

// descendants lists the descendants of process pid, children first, from
// /proc/<pid>/task/<tid>/children (empty where the kernel lacks it).
func descendants(pid string) []string {
	var out []string
	for i, queue := 0, []string{pid}; i < len(queue); i++ {
		tasks, _ := os.ReadDir("/proc/" + queue[i] + "/task")
		for _, t := range tasks {
			b, _ := os.ReadFile("/proc/" + queue[i] + "/task/" + t.Name() + "/children")
			for _, c := range strings.Fields(string(b)) {
				queue = append(queue, c)
				out = append(out, c)
			}
		}
	}
	return out
}

// parseConn splits a requestorKey value into its two IPv4 endpoints.
func parseConn(conn string) (client, server netip.AddrPort, err error) {
	c, s, found := strings.Cut(conn, " ")
	if !found {
		return client, server, fmt.Errorf("connection %q: want \"client server\"", conn)
	}
	if client, err = netip.ParseAddrPort(c); err != nil {
		return client, server, err
	}
	if server, err = netip.ParseAddrPort(s); err != nil {
		return client, server, err
	}
	if !client.Addr().Is4() || !server.Addr().Is4() {
		return client, server, fmt.Errorf("connection %q: not IPv4", conn)
	}
	return client, server, nil
}

// tcpInode asks the kernel (NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY) for
// the inode of the TCP socket whose local end is local and remote end
// remote.
func tcpInode(local, remote netip.AddrPort) (uint32, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, fmt.Errorf("sock_diag: %w", err)
	}
	defer unix.Close(fd)
	// The kernel answers at once; the bound only guards against a kernel
	// that never does.
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 1}); err != nil {
		return 0, fmt.Errorf("sock_diag: %w", err)
	}
	if err := unix.Sendto(fd, diagRequest(local, remote), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("sock_diag: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return 0, fmt.Errorf("sock_diag: %w", err)
	}
	return diagInode(buf[:n])
}

// Layout of the sock_diag messages (linux/inet_diag.h, linux/netlink.h).
const (
	nlmsgHdrLen   = 16                        // struct nlmsghdr
	diagReqLen    = 56                        // struct inet_diag_req_v2
	diagMsgInode  = nlmsgHdrLen + 4 + 48 + 16 // inet_diag_msg.idiag_inode
	diagMsgLen    = nlmsgHdrLen + 4 + 48 + 20 // nlmsghdr + struct inet_diag_msg
	nlmsgError    = 2                         // NLMSG_ERROR
	nlmFRequest   = 1                         // NLM_F_REQUEST (no NLM_F_DUMP: one socket)
	diagNoCookie  = ^uint32(0)                // INET_DIAG_NOCOOKIE
	ipprotoTCP    = 6
	diagAllStates = ^uint32(0)
)

// diagRequest is the netlink message that looks up the IPv4 TCP socket
// local→remote: the kernel finds it as if a packet came from remote to
// local.
func diagRequest(local, remote netip.AddrPort) []byte {
	b := make([]byte, nlmsgHdrLen+diagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(b[6:], nlmFRequest)
	ne.PutUint32(b[8:], 1) // sequence number
	r := b[nlmsgHdrLen:]
	r[0], r[1] = unix.AF_INET, ipprotoTCP
	ne.PutUint32(r[4:], diagAllStates)
	id := r[8:] // struct inet_diag_sockid: ports and addresses in network order
	binary.BigEndian.PutUint16(id[0:], local.Port())
	binary.BigEndian.PutUint16(id[2:], remote.Port())
	l, rm := local.Addr().As4(), remote.Addr().As4()
	copy(id[4:], l[:])
	copy(id[20:], rm[:])
	ne.PutUint32(id[40:], diagNoCookie)
	ne.PutUint32(id[44:], diagNoCookie)
	return b
}

// diagInode reads the socket's inode from the kernel's answer to
// diagRequest, or the error it sent (ENOENT: no such socket).
func diagInode(b []byte) (uint32, error) {
	ne := binary.NativeEndian
	if len(b) < nlmsgHdrLen {
		return 0, fmt.Errorf("sock_diag: short answer (%d bytes)", len(b))
	}
	if ne.Uint16(b[4:]) == nlmsgError {
		if len(b) < nlmsgHdrLen+4 {
			return 0, fmt.Errorf("sock_diag: short error (%d bytes)", len(b))
		}
		return 0, fmt.Errorf("sock_diag: %w", unix.Errno(-int32(ne.Uint32(b[nlmsgHdrLen:]))))
	}
	if ne.Uint16(b[4:]) != unix.SOCK_DIAG_BY_FAMILY || len(b) < diagMsgLen {
		return 0, fmt.Errorf("sock_diag: unexpected answer (type %d, %d bytes)", ne.Uint16(b[4:]), len(b))
	}
	return ne.Uint32(b[diagMsgInode:]), nil
}

// procOfEnviron reads PMIX_NAMESPACE and PMIX_RANK from an environment
// as /proc/<pid>/environ holds it (NUL-separated).
func procOfEnviron(env []byte) (p Proc, ok bool) {
	var ns, rank string
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if v, found := bytes.CutPrefix(kv, []byte("PMIX_NAMESPACE=")); found {
			ns = string(v)
		} else if v, found := bytes.CutPrefix(kv, []byte("PMIX_RANK=")); found {
			rank = string(v)
		}
	}
	r, err := strconv.ParseUint(rank, 10, 32)
	if ns == "" || err != nil || uint32(r) == RankUndef {
		return Proc{}, false
	}
	return Proc{Nspace: ns, Rank: uint32(r)}, true
}
