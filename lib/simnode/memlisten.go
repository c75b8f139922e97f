package simnode

import (
	"context"
	"net"
	"sync"

	"github.com/dynrt/dynrt/wire"
)

// memListener is a net.Listener whose connections are in-memory pipes
// made by dial.
type memListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func newMemListener() *memListener {
	return &memListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// dial hands the server end of a new pipe to Accept and returns the
// client end.
func (l *memListener) dial(ctx context.Context) (net.Conn, error) {
	srv, cli := net.Pipe()
	select {
	case l.conns <- srv:
		return cli, nil
	case <-l.done:
	case <-ctx.Done():
	}
	srv.Close()
	cli.Close()
	if ctx.Err() != nil {
		return nil, wire.Errorf(wire.ErrCanceled, "simnode: dial the daemon: %w", ctx.Err())
	}
	return nil, wire.Errorf(wire.ErrClosed, "simnode: the daemon no longer listens")
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr{} }

type memAddr struct{}

func (memAddr) Network() string { return "mem" }
func (memAddr) String() string  { return "simnode" }
