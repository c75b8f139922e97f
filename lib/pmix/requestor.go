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
)

// requestorKey is the qualifier requestor.c adds to a client's queries:
// the two ends of the client's TCP connection to this server, "client
// server" (libpmix hands the host its queries in the server's own name).
const requestorKey = "dynrt.requestor"

// requestorOf names the PMIx process at the client end of conn (a
// requestorKey value): the process that holds that socket, named by the
// environment the server gave it at fork (PMIX_NAMESPACE, PMIX_RANK). ok
// is false when it cannot be found (the process is gone, the connection
// is not IPv4). It reads /proc: the socket's inode in /proc/net/tcp, then
// every process's descriptors for it, as ss -p does (a few milliseconds;
// queries are rare).
func requestorOf(conn string) (p Proc, ok bool) {
	client, server, err := parseConn(conn)
	if err != nil {
		return Proc{}, false
	}
	table, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return Proc{}, false
	}
	inode, ok := tcpInode(table, client, server)
	if !ok {
		return Proc{}, false
	}
	link := "socket:[" + inode + "]"
	procs, _ := os.ReadDir("/proc")
	self := strconv.Itoa(os.Getpid())
	for _, e := range procs {
		pid := e.Name()
		if pid == self || pid[0] < '0' || pid[0] > '9' {
			continue
		}
		fds, _ := os.ReadDir("/proc/" + pid + "/fd")
		for _, fd := range fds {
			if l, err := os.Readlink("/proc/" + pid + "/fd/" + fd.Name()); err == nil && l == link {
				env, err := os.ReadFile("/proc/" + pid + "/environ")
				if err != nil {
					return Proc{}, false
				}
				return procOfEnviron(env)
			}
		}
	}
	return Proc{}, false
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

// tcpInode finds, in the text of /proc/net/tcp, the socket whose local
// end is client and remote end server (the client's side of the
// connection), and returns its inode.
func tcpInode(table []byte, client, server netip.AddrPort) (string, bool) {
	local, remote := procNetAddr(client), procNetAddr(server)
	for line := range bytes.Lines(table) {
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
		f := strings.Fields(string(line))
		if len(f) >= 10 && f[1] == local && f[2] == remote {
			return f[9], true
		}
	}
	return "", false
}

// procNetAddr writes an IPv4 endpoint as /proc/net/tcp does: the address
// as the kernel's 32-bit word in this machine's byte order, the port in
// hex.
func procNetAddr(ap netip.AddrPort) string {
	a := ap.Addr().As4()
	return fmt.Sprintf("%08X:%04X", binary.NativeEndian.Uint32(a[:]), ap.Port())
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
