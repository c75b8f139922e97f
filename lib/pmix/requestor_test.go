//go:build pmix

package pmix

import (
	"net/netip"
	"testing"
)

func TestProcOfEnviron(t *testing.T) {
	for _, tc := range []struct {
		name, env string
		want      Proc
		ok        bool
	}{
		{"both", "A=1\x00PMIX_NAMESPACE=dvm.3\x00PMIX_RANK=7\x00", Proc{"dvm.3", 7}, true},
		{"last entry without NUL", "PMIX_RANK=0\x00PMIX_NAMESPACE=j", Proc{"j", 0}, true},
		{"no namespace", "PMIX_RANK=1\x00", Proc{}, false},
		{"no rank", "PMIX_NAMESPACE=j\x00", Proc{}, false},
		{"bad rank", "PMIX_NAMESPACE=j\x00PMIX_RANK=x\x00", Proc{}, false},
		{"undefined rank", "PMIX_NAMESPACE=j\x00PMIX_RANK=4294967295\x00", Proc{}, false},
		{"a longer name is not the key", "XPMIX_NAMESPACE=j\x00PMIX_RANK=1\x00", Proc{}, false},
		{"empty", "", Proc{}, false},
	} {
		if got, ok := procOfEnviron([]byte(tc.env)); got != tc.want || ok != tc.ok {
			t.Errorf("%s: %v %v, want %v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// procNetTCP is /proc/net/tcp of a little-endian machine with a server
// listening on 127.0.0.1:40000 (9C40), one client 127.0.0.1:50001 (C351)
// connected to it (both ends listed) and a socket of another connection.
const procNetTCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:9C40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1 0000000000000000 100 0 0 10 0
   1: 0100007F:C351 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 1002 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:9C40 0100007F:C351 01 00000000:00000000 00:00000000 00000000     0        0 1003 1 0000000000000000 20 4 30 10 -1
   3: 0100000A:C351 0200000A:9C40 01 00000000:00000000 00:00000000 00000000     0        0 1004 1 0000000000000000 20 4 30 10 -1
`

func TestTCPInode(t *testing.T) {
	if procNetAddr(netip.MustParseAddrPort("127.0.0.1:40000")) != "0100007F:9C40" {
		t.Skipf("not a little-endian machine: the table is written for one (%s)", procNetAddr(netip.MustParseAddrPort("127.0.0.1:40000")))
	}
	for _, tc := range []struct {
		conn, inode string
		ok          bool
	}{
		{"127.0.0.1:50001 127.0.0.1:40000", "1002", true}, // the client's end, not the server's (1003)
		{"10.0.0.1:50001 10.0.0.2:40000", "1004", true},
		{"127.0.0.1:50002 127.0.0.1:40000", "", false},
	} {
		c, s, err := parseConn(tc.conn)
		if err != nil {
			t.Fatal(err)
		}
		if inode, ok := tcpInode([]byte(procNetTCP), c, s); inode != tc.inode || ok != tc.ok {
			t.Errorf("%s: inode %q %v, want %q %v", tc.conn, inode, ok, tc.inode, tc.ok)
		}
	}
	for _, bad := range []string{"", "127.0.0.1:1", "x 127.0.0.1:1", "[::1]:5 [::1]:6"} {
		if _, _, err := parseConn(bad); err == nil {
			t.Errorf("parseConn(%q) accepted", bad)
		}
	}
	if p, ok := requestorOf("127.0.0.1:1 127.0.0.1:2"); ok {
		t.Errorf("requestorOf of no connection = %v", p)
	}
}
