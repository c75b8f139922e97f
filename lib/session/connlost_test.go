package session

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// pipeListener hands the server ends of in-memory pipes to a wire.Server.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}
func (l *pipeListener) Close() error {
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	return nil
}
func (l *pipeListener) Addr() net.Addr { return &net.UnixAddr{Name: "pipe", Net: "unix"} }

// TestConnLostEndsEvents: when the daemon's connection ends without a
// Finalize, the session's event goroutine ends too (a simulated process,
// lib/simnode, would otherwise leave one behind per session).
func TestConnLostEndsEvents(t *testing.T) {
	ln := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	mux := wire.NewMux()
	wire.HandleTyped(mux, wire.KindSessionInit, func(_ context.Context, _ *wire.Request, b *wire.SessionInitReq) (any, error) {
		return &wire.SessionInfo{Job: b.Job, Rank: b.Rank}, nil
	})
	srv := &wire.Server{
		Policy:  wire.AcceptPolicy{Name: "fake", Role: wire.RoleDaemon, Roles: []string{wire.RoleClient}, Open: true},
		Options: wire.Options{Handler: mux.Serve},
	}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(sctx, ln)
	}()
	defer func() { stop(); <-served }()

	env := map[string]string{"DYNRT_DAEMON": "pipe", "DYNRT_JOB": "j", "DYNRT_RANK": "3"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Init(ctx, WithEnv(func(k string) string { return env[k] }), WithPID(1<<22+1),
		WithDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			srvEnd, cliEnd := net.Pipe()
			select {
			case ln.conns <- srvEnd:
				return cliEnd, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	if s.Rank() != 3 {
		t.Fatalf("rank %d, want 3", s.Rank())
	}
	stop() // the daemon goes away; the session is not finalized
	select {
	case <-s.events.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the session's event goroutine still runs 5 s after its connection closed")
	}
}
