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

// fakeDaemon serves session.init and session.fin (and what extra adds) on
// in-memory pipes handed to its listener; stop ends it and waits.
func fakeDaemon(extra ...func(*wire.Mux)) (ln *pipeListener, stop func()) {
	ln = &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	mux := wire.NewMux()
	for _, f := range extra {
		f(mux)
	}
	wire.HandleTyped(mux, wire.KindSessionInit, func(_ context.Context, _ *wire.Request, b *wire.SessionInitReq) (any, error) {
		return &wire.SessionInfo{Job: b.Job, Rank: b.Rank}, nil
	})
	mux.Handle(wire.KindSessionFinalize, func(context.Context, *wire.Request) (any, error) { return nil, nil })
	srv := &wire.Server{
		Policy:  wire.AcceptPolicy{Name: "fake", Role: wire.RoleDaemon, Roles: []string{wire.RoleClient}, Open: true},
		Options: wire.Options{Handler: mux.Serve},
	}
	sctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(sctx, ln)
	}()
	return ln, func() { cancel(); <-served }
}

// initPipe starts the session of rank 3 of job j with the fake daemon ln.
func initPipe(t *testing.T, ln *pipeListener) *Session {
	t.Helper()
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
	return s
}

// TestSubscribeRCOwnJob: a session's subscription to change events names
// its job, so that the master and the daemon send it no other job's
// changes; an event of another job that comes anyway (a subscription of
// every job on the same connection) does not reach it.
func TestSubscribeRCOwnJob(t *testing.T) {
	subs := make(chan wire.EventSubReq, 1)
	ln, stop := fakeDaemon(func(mux *wire.Mux) {
		wire.HandleTyped(mux, wire.KindEventSub, func(_ context.Context, req *wire.Request, b *wire.EventSubReq) (any, error) {
			subs <- *b
			// Events go out before the answer, as a daemon's may.
			for _, job := range []string{"other", "j"} {
				ev := wire.Event{Seq: 1, Kind: wire.EvRCState, Job: job, RC: &wire.RC{Job: job, Delta: job + "-delta", Status: wire.RCAnnounced}}
				if job == "j" {
					ev.Seq = 2
				}
				if err := req.Conn.Notify(wire.KindEvent, &ev); err != nil {
					return nil, err
				}
			}
			return &wire.EventSubReply{ID: 1, Seq: 2}, nil
		})
	})
	defer stop()
	s := initPipe(t, ln)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan string, 2)
	if _, err := s.SubscribeRC(ctx, func(rc wire.RC) { got <- rc.Delta }); err != nil {
		t.Fatal(err)
	}
	if b := <-subs; b.Job != "j" || len(b.Kinds) != 1 || b.Kinds[0] != "rc." {
		t.Errorf("event.sub %+v, want rc. of job j", b)
	}
	select {
	case d := <-got:
		if d != "j-delta" {
			t.Errorf("first change seen: %s, want j-delta", d)
		}
	case <-ctx.Done():
		t.Fatal("no change event of the session's job")
	}
	if err := s.Finalize(ctx); err != nil {
		t.Error(err)
	}
	select {
	case d := <-got:
		t.Errorf("another change seen: %s", d)
	default:
	}
}

// TestConnLostEndsEvents: when the daemon's connection ends without a
// Finalize, the session's event goroutine ends too (a simulated process,
// lib/simnode, would otherwise leave one behind per session).
func TestConnLostEndsEvents(t *testing.T) {
	ln, stop := fakeDaemon()
	defer stop()
	s := initPipe(t, ln)
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

// TestInitRetriesClosedHandshake: a daemon too busy to read a process's
// hello within its timeout closes the connection; Init tries again (and
// succeeds once the daemon answers), at most connectAttempts times in all.
func TestInitRetriesClosedHandshake(t *testing.T) {
	ln, stop := fakeDaemon()
	defer stop()

	env := map[string]string{"DYNRT_DAEMON": "pipe", "DYNRT_JOB": "j", "DYNRT_RANK": "3"}
	// dialer closes the daemon's end of the first closes connections at
	// once, as a daemon whose hello timeout ran out does, then serves.
	dialer := func(closes int, dials *int) Option {
		return WithDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			*dials++
			srvEnd, cliEnd := net.Pipe()
			if *dials <= closes {
				srvEnd.Close()
				return cliEnd, nil
			}
			select {
			case ln.conns <- srvEnd:
				return cliEnd, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dials := 0
	s, err := Init(ctx, WithEnv(func(k string) string { return env[k] }), WithPID(1<<22+1), dialer(connectAttempts-1, &dials))
	if err != nil {
		t.Fatalf("Init after %d closed handshakes: %v", connectAttempts-1, err)
	}
	if s.Rank() != 3 || dials != connectAttempts {
		t.Errorf("rank %d after %d dials, want 3 after %d", s.Rank(), dials, connectAttempts)
	}
	if err := s.Finalize(ctx); err != nil {
		t.Error(err)
	}
	dials = 0
	_, err = Init(ctx, WithEnv(func(k string) string { return env[k] }), WithPID(1<<22+2), dialer(connectAttempts, &dials))
	if wire.CodeOf(err) != wire.CodeClosed || dials != connectAttempts {
		t.Errorf("a daemon that always closes: %v after %d dials, want a closed error after %d", err, dials, connectAttempts)
	}
}
