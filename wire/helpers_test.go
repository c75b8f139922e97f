package wire

import (
	"context"
	"net"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// leakCheck fails the test if goroutines started during it are still
// running shortly after it ends (tests in this package do not run in
// parallel, so the count is meaningful).
func leakCheck(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				n := runtime.Stack(buf, true)
				t.Errorf("goroutines leaked: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:n])
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// closeAndWait closes c at test end and waits for its goroutines.
func closeAndWait(t *testing.T, c *Conn) {
	t.Cleanup(func() {
		_ = c.Close()
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Errorf("conn to %s did not finish", c.Peer())
		}
	})
}

// handshakePair runs both sides of the handshake over (cn, sn).
func handshakePair(t *testing.T, cn, sn net.Conn, h Hello, pol AcceptPolicy, cliOpts, srvOpts Options) (cli, srv *Conn, cliErr, srvErr error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type res struct {
		c   *Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := Accept(ctx, sn, pol, srvOpts)
		ch <- res{c, err}
	}()
	cli, cliErr = Client(ctx, cn, h, cliOpts)
	r := <-ch
	srv, srvErr = r.c, r.err
	if cli != nil {
		closeAndWait(t, cli)
	}
	if srv != nil {
		closeAndWait(t, srv)
	}
	return cli, srv, cliErr, srvErr
}

// pipePair connects two Conns over net.Pipe with an open policy.
func pipePair(t *testing.T, cliOpts, srvOpts Options) (cli, srv *Conn) {
	t.Helper()
	cn, sn := net.Pipe()
	cli, srv, cerr, serr := handshakePair(t, cn, sn, Hello{Role: RoleTool, Name: "cli"}, AcceptPolicy{Open: true, Name: "srv", Role: RoleMaster}, cliOpts, srvOpts)
	if cerr != nil || serr != nil {
		t.Fatalf("handshake: client %v, server %v", cerr, serr)
	}
	return cli, srv
}

// unixConns returns a connected pair of real unix sockets (via a listener
// in the test's temp dir).
func unixConns(t testing.TB) (dialed, accepted *net.UnixConn) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan *net.UnixConn, 1)
	go func() {
		c, err := ln.AcceptUnix()
		if err != nil {
			t.Error(err)
		}
		ch <- c
	}()
	d, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	a := <-ch
	if a == nil {
		t.FailNow()
	}
	return d, a
}

// unixPair connects two Conns over a real unix socket, admitted by uid.
func unixPair(t *testing.T, cliOpts, srvOpts Options) (cli, srv *Conn) {
	t.Helper()
	d, a := unixConns(t)
	cli, srv, cerr, serr := handshakePair(t, d, a, Hello{Role: RoleClient, Name: "cli"}, AcceptPolicy{Name: "srv", Role: RoleDaemon}, cliOpts, srvOpts)
	if cerr != nil || serr != nil {
		t.Fatalf("handshake: client %v, server %v", cerr, serr)
	}
	return cli, srv
}

func echoMux() *Mux {
	m := NewMux()
	HandleTyped(m, KindPing, func(ctx context.Context, req *Request, p *Ping) (any, error) {
		return p, nil
	})
	return m
}
