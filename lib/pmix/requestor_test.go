//go:build pmix

package pmix

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/dynrt/dynrt/internal/leakcheck"
	"golang.org/x/sys/unix"
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

// TestDiag: the sock_diag request carries the 4-tuple in network order and
// no cookie; the answers are read (an inode, the kernel's error, garbage).
func TestDiag(t *testing.T) {
	req := diagRequest(netip.MustParseAddrPort("127.0.0.1:50001"), netip.MustParseAddrPort("10.1.2.3:40000"))
	ne := binary.NativeEndian
	if len(req) != 72 || ne.Uint32(req[0:]) != 72 || ne.Uint16(req[4:]) != unix.SOCK_DIAG_BY_FAMILY || ne.Uint16(req[6:]) != 1 {
		t.Errorf("header % x", req[:16])
	}
	id := req[24:]
	if req[16] != unix.AF_INET || req[17] != 6 || !bytes.Equal(id[0:4], []byte{0xc3, 0x51, 0x9c, 0x40}) ||
		!bytes.Equal(id[4:8], []byte{127, 0, 0, 1}) || !bytes.Equal(id[20:24], []byte{10, 1, 2, 3}) ||
		!bytes.Equal(id[40:48], bytes.Repeat([]byte{0xff}, 8)) {
		t.Errorf("request % x", req[16:])
	}
	answer := func(typ uint16, n int, at int, v uint32) []byte {
		b := make([]byte, n)
		ne.PutUint16(b[4:], typ)
		if at+4 <= n {
			ne.PutUint32(b[at:], v)
		}
		return b
	}
	for _, tc := range []struct {
		name  string
		b     []byte
		inode uint32
		err   string
	}{
		{"socket", answer(unix.SOCK_DIAG_BY_FAMILY, 88, 84, 4242), 4242, ""},
		{"no such socket", answer(2, 36, 16, ^uint32(unix.ENOENT)+1), 0, "no such file"}, // -ENOENT
		{"short", make([]byte, 8), 0, "short answer"},
		{"short socket", answer(unix.SOCK_DIAG_BY_FAMILY, 40, 84, 0), 0, "unexpected answer"},
		{"other type", answer(3, 88, 84, 1), 0, "unexpected answer (type 3"},
	} {
		inode, err := diagInode(tc.b)
		if inode != tc.inode || (tc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %d, %v; want %d, %q", tc.name, inode, err, tc.inode, tc.err)
		}
	}
	for _, bad := range []string{"", "127.0.0.1:1", "x 127.0.0.1:1", "[::1]:5 [::1]:6"} {
		if _, _, err := parseConn(bad); err == nil {
			t.Errorf("parseConn(%q) accepted", bad)
		}
	}
}

// TestRequestorOf: the process at the other end of a TCP connection to
// this one (a child, as the daemon's processes are) is found and named
// from its environment; a connection nobody holds names nobody.
func TestRequestorOf(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	// bash's /dev/tcp connects; the client waits for the server to close.
	cmd := exec.Command("bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d; read -r _ <&3", port))
	cmd.Env = []string{"PMIX_NAMESPACE=req-a", "PMIX_RANK=3", leakcheck.EnvMark + "=" + leakcheck.NewMark(t)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	conn := c.RemoteAddr().String() + " " + c.LocalAddr().String()
	got, ok := requestorOf(conn)
	c.Close() // the client's read ends
	if !ok || got != (Proc{"req-a", 3}) {
		t.Errorf("requestorOf(%q) = %v %v, want req-a:3", conn, got, ok)
	}
	// The server's end is this process's own socket, which is skipped.
	if p, ok := requestorOf(c.LocalAddr().String() + " " + c.RemoteAddr().String()); ok {
		t.Errorf("requestorOf of the server's end = %v", p)
	}
	if p, ok := requestorOf("127.0.0.1:1 127.0.0.1:2"); ok {
		t.Errorf("requestorOf of no connection = %v", p)
	}
}
