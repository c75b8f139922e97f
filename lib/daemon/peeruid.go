package daemon

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// loopbackPeerUID returns the uid that owns the other end of c, a TCP
// connection between two sockets of this host, from the kernel's socket
// table (/proc/net/tcp or tcp6 of our network namespace; the client's
// socket is in it, since it reached our loopback address). SO_PEERCRED
// exists only for unix sockets, and MPICH's PMI_PORT is TCP.
func loopbackPeerUID(c net.Conn) (int, error) {
	ra, ok1 := c.RemoteAddr().(*net.TCPAddr)
	la, ok2 := c.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return 0, fmt.Errorf("not a TCP connection: %v", c.RemoteAddr())
	}
	remote, local := unmap(ra.AddrPort()), unmap(la.AddrPort())
	table := "/proc/net/tcp"
	if remote.Addr().Is6() {
		table = "/proc/net/tcp6"
	}
	b, err := os.ReadFile(table)
	if err != nil {
		return 0, err
	}
	// The peer's socket has the peer's address as its local one.
	uid, ok := tcpOwner(b, remote, local)
	if !ok {
		return 0, fmt.Errorf("no socket %v -> %v in %s (closed already, or not on this host)", remote, local, table)
	}
	return uid, nil
}

func unmap(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// tcpOwner finds the socket with the given local and remote addresses in
// a /proc/net/tcp{,6} table and returns its uid.
func tcpOwner(table []byte, local, remote netip.AddrPort) (int, bool) {
	sc := bufio.NewScanner(bytes.NewReader(table))
	sc.Scan() // header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 8 {
			continue
		}
		l, err1 := parseProcAddr(f[1])
		r, err2 := parseProcAddr(f[2])
		if err1 != nil || err2 != nil || l != local || r != remote {
			continue
		}
		uid, err := strconv.Atoi(f[7])
		return uid, err == nil
	}
	return 0, false
}

// parseProcAddr decodes "0100007F:1F90": the address as the kernel prints
// it (each 32-bit word of the network-order address in hex, in host byte
// order) and the port in hex.
func parseProcAddr(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok || (len(a) != 8 && len(a) != 32) {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	raw, err := hex.DecodeString(a)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	ip := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(ip[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bad port in %q", s)
	}
	addr, _ := netip.AddrFromSlice(ip)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}
