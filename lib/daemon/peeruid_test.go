package daemon

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"testing"
)

// The tables in testdata were written on a little-endian host, where the
// kernel prints 127.0.0.1 as 0100007F.
func littleEndian() bool {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], 1)
	return b[0] == 1
}

func TestTCPOwner(t *testing.T) {
	if !littleEndian() {
		t.Skip("the testdata tables are in little-endian kernel notation")
	}
	ap := netip.MustParseAddrPort
	tests := []struct {
		file          string
		local, remote netip.AddrPort
		uid           int
		found         bool
	}{
		{"proc_net_tcp", ap("127.0.0.1:50000"), ap("127.0.0.1:41394"), 65534, true},
		{"proc_net_tcp", ap("127.0.0.1:41394"), ap("127.0.0.1:50000"), 1000, true},
		{"proc_net_tcp", ap("10.2.0.15:22"), ap("10.0.0.1:54321"), 0, true},
		{"proc_net_tcp", ap("127.0.0.1:50001"), ap("127.0.0.1:41394"), 0, false},
		{"proc_net_tcp6", ap("[::1]:8080"), ap("[::1]:57585"), 1001, true},
		{"proc_net_tcp6", ap("127.0.0.1:57586"), ap("127.0.0.1:8080"), 1002, true}, // v4-mapped
		{"proc_net_tcp6", ap("[::1]:8081"), ap("[::1]:57585"), 0, false},
	}
	for _, tc := range tests {
		b, err := os.ReadFile("testdata/" + tc.file)
		if err != nil {
			t.Fatal(err)
		}
		uid, found := tcpOwner(b, tc.local, tc.remote)
		if uid != tc.uid || found != tc.found {
			t.Errorf("%s %v -> %v: uid %d found %v, want %d %v", tc.file, tc.local, tc.remote, uid, found, tc.uid, tc.found)
		}
	}
}

// On a real loopback connection both ends are ours.
func TestLoopbackPeerUID(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	uid, err := loopbackPeerUID(s)
	if err != nil || uid != os.Getuid() {
		t.Errorf("loopbackPeerUID = %d, %v; want %d", uid, err, os.Getuid())
	}
}
