package comm

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// An endpoint publishes the node address the daemon chose
// (DYNRT_NODE_ADDR, or Options.Addr) instead of the host name, and peers
// with another address reach it there over TCP. 127.0.0.2 and 127.0.0.3
// stand for two hosts: both are loopback addresses on Linux, so the test
// sends nothing beyond this machine.
func TestEndpointNodeAddr(t *testing.T) {
	t.Setenv(EnvNodeAddr, "127.0.0.2")
	addrs := map[uint32][]byte{}
	lookup := func(_ context.Context, rank uint32) ([]byte, error) {
		if a, ok := addrs[rank]; ok {
			return a, nil
		}
		return nil, wire.Errorf(wire.ErrNotFound, "no rank %d", rank)
	}
	o := Options{Timeout: 10 * time.Second}
	e0, err := listen(context.Background(), 0, "j.1", o, lookup) // from the environment
	if err != nil {
		t.Fatal(err)
	}
	defer e0.Close()
	o.Addr = "127.0.0.3"
	e1, err := listen(context.Background(), 1, "j.1", o, lookup) // the option wins
	if err != nil {
		t.Fatal(err)
	}
	defer e1.Close()
	if e0.addr.host != "127.0.0.2" || e1.addr.host != "127.0.0.3" {
		t.Fatalf("published hosts %q %q, want 127.0.0.2 and 127.0.0.3", e0.addr.host, e1.addr.host)
	}
	addrs[0], addrs[1] = []byte(e0.addr.String()), []byte(e1.addr.String())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w := &world{eps: []*Endpoint{e0, e1}}
	rq := w.comm(1).Irecv(0, 7)
	if err := w.comm(0).Send(ctx, 1, 7, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if b, _, err := rq.Wait(ctx); err != nil || string(b) != "hi" {
		t.Fatalf("receive %q, %v", b, err)
	}
	// The pair's connection is TCP between the published addresses:
	// either rank 0 dialed 127.0.0.3 (its send), or rank 1 dialed
	// 127.0.0.2 first (its receive connects, to notice a peer that is
	// gone) and rank 0 sent on that one. Which, depends on timing.
	e1.mu.Lock()
	p := e1.peers[0]
	e1.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.all) == 0 {
		t.Fatal("rank 1 has no connection from rank 0")
	}
	for _, c := range p.all {
		l, lok := c.LocalAddr().(*net.TCPAddr)
		r, rok := c.RemoteAddr().(*net.TCPAddr)
		if !lok || !rok || (l.IP.String() != "127.0.0.3" && r.IP.String() != "127.0.0.2") {
			t.Errorf("rank 1's connection with rank 0 runs %s -> %s, want TCP to 127.0.0.3 or from rank 1 to 127.0.0.2", c.LocalAddr(), c.RemoteAddr())
		}
	}
}
