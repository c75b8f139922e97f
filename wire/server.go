package wire

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Server accepts connections on a listener and runs the handshake for each.
type Server struct {
	Policy  AcceptPolicy
	Options Options // used for every accepted Conn
	// OnConn is called, in the goroutine that did the handshake, for every
	// connection that passed it. The Conn is closed by Serve on shutdown;
	// watch c.Done() to learn when it goes away earlier.
	OnConn func(c *Conn)
	// Logger receives rejected handshakes and accept errors. nil discards.
	Logger *slog.Logger
	// MaxHandshakes bounds the connections of one Serve call (one
	// listener) still in their handshake, i.e. not yet authenticated;
	// <= 0 means DefaultMaxHandshakes. While that many are pending, Serve
	// stops accepting: further dialers wait in the kernel's backlog, not
	// in this process's memory. Each handshake ends within
	// Options.HelloTimeout.
	MaxHandshakes int
}

// DefaultMaxHandshakes is the default of Server.MaxHandshakes.
const DefaultMaxHandshakes = 64

// quietLimit bounds how long Serve's shutdown waits for handlers that are
// still running.
const quietLimit = 500 * time.Millisecond

// Serve accepts on ln until ctx is canceled or ln fails. On return ln is
// closed, every connection it accepted is closed and their goroutines have
// finished. It returns nil after a cancel, else the accept error.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	log := s.Logger
	if log == nil {
		log = discardLogger()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()

	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = make(map[*Conn]struct{})
	)
	defer func() {
		_ = ln.Close()
		cancel() // aborts handshakes in flight
		mu.Lock()
		open := make([]*Conn, 0, len(conns))
		for c := range conns {
			open = append(open, c)
		}
		mu.Unlock()
		// Replies already decided (a job.wait answered by the stop) reach
		// their callers before the connections close.
		qctx, qcancel := context.WithTimeout(context.Background(), quietLimit)
		for _, c := range open {
			c.Quiet(qctx)
		}
		qcancel()
		for _, c := range open {
			_ = c.Close()
		}
		wg.Wait()
	}()

	maxHS := s.MaxHandshakes
	if maxHS <= 0 {
		maxHS = DefaultMaxHandshakes
	}
	handshakes := make(chan struct{}, maxHS) // one token per pending handshake
	var backoff time.Duration
	for {
		select {
		case handshakes <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		nc, err := ln.Accept()
		if err != nil {
			<-handshakes
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				// e.g. EMFILE: wait instead of spinning
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				log.Warn("wire: accept failed; retrying", "err", err, "in", backoff)
				select {
				case <-time.After(backoff):
					continue
				case <-ctx.Done():
					return nil
				}
			}
			return err
		}
		backoff = 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := Accept(ctx, nc, s.Policy, s.Options)
			<-handshakes
			if err != nil {
				log.Info("wire: handshake failed", "remote", nc.RemoteAddr().String(), "err", err)
				return
			}
			mu.Lock()
			if ctx.Err() != nil {
				// Shut down while this handshake finished: the peer may
				// already have a request in flight.
				mu.Unlock()
				qctx, qcancel := context.WithTimeout(context.Background(), quietLimit)
				c.Quiet(qctx)
				qcancel()
				_ = c.Close()
				<-c.Done()
				return
			}
			conns[c] = struct{}{}
			mu.Unlock()
			if s.OnConn != nil {
				s.OnConn(c)
			}
			<-c.Done()
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
		}()
	}
}

func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}
