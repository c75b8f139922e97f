package daemon

import (
	"context"
	"io"
	"sync"

	"github.com/dynrt/dynrt/wire"
)

// stdinQueue bounds the pieces of stdin waiting for a process. A full
// queue holds the job.stdin request (in its own goroutine) until the
// process reads, which paces the launcher without stalling the master's
// connection.
const stdinQueue = 16

// stdinTable holds the stdin streams of the processes launched with one
// (LaunchReq.Stdin). Its zero value is ready to use.
type stdinTable struct {
	mu      sync.Mutex
	streams map[procKey]*stdinStream
}

// stdinStream feeds one process's stdin: job.stdin pieces are queued and a
// goroutine writes them into the pipe that lib/proc copies to the child,
// so a child that does not read blocks only that goroutine.
type stdinStream struct {
	r    *io.PipeReader // given to lib/proc as Spec.Stdin
	w    *io.PipeWriter
	q    chan stdinPiece
	done chan struct{} // closed when the process has gone

	mu  sync.Mutex // guards eof
	eof bool       // EOF has been queued: no more data
}

type stdinPiece struct {
	data []byte
	eof  bool
}

// open creates the stream of key and starts its writer.
func (t *stdinTable) open(key procKey) *stdinStream {
	r, w := io.Pipe()
	s := &stdinStream{r: r, w: w, q: make(chan stdinPiece, stdinQueue), done: make(chan struct{})}
	t.mu.Lock()
	if t.streams == nil {
		t.streams = make(map[procKey]*stdinStream)
	}
	if old := t.streams[key]; old != nil {
		old.stop()
	}
	t.streams[key] = s
	t.mu.Unlock()
	go s.pump()
	return s
}

// drop ends the stream of key (the process exited or never started):
// queued data is discarded and both pipe ends are closed, which releases
// the writer and lib/proc's copying goroutine.
func (t *stdinTable) drop(key procKey) {
	t.mu.Lock()
	s := t.streams[key]
	delete(t.streams, key)
	t.mu.Unlock()
	if s != nil {
		s.stop()
	}
}

func (t *stdinTable) get(key procKey) *stdinStream {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.streams[key]
}

func (s *stdinStream) stop() {
	close(s.done)
	_ = s.r.Close()
	_ = s.w.Close()
}

// pump writes queued pieces in order until EOF (closing the pipe, so the
// child reads EOF) or until the process has gone.
func (s *stdinStream) pump() {
	for {
		select {
		case p := <-s.q:
			if len(p.data) > 0 {
				if _, err := s.w.Write(p.data); err != nil {
					return // reader closed: the process has gone
				}
			}
			if p.eof {
				_ = s.w.Close()
				return
			}
		case <-s.done:
			return
		}
	}
}

// push queues a piece, waiting while the queue is full.
func (s *stdinStream) push(ctx context.Context, p stdinPiece) error {
	s.mu.Lock()
	defer s.mu.Unlock() // held while waiting: pieces stay in order
	if s.eof {
		return wire.Errorf(wire.ErrState, "stdin already closed")
	}
	select {
	case s.q <- p:
		s.eof = p.eof
		return nil
	case <-s.done:
		return wire.Errorf(wire.ErrState, "the process has exited")
	case <-ctx.Done():
		return wire.Errorf(wire.ErrCanceled, "stdin: %w", ctx.Err())
	}
}

// handleStdin serves job.stdin from the master: data for the stdin of a
// process of this node.
func (d *Daemon) handleStdin(ctx context.Context, _ *wire.Request, b *wire.JobStdin) (any, error) {
	key := procKey{b.Job, b.Rank}
	s := d.stdin.get(key)
	if s == nil {
		return nil, wire.Errorf(wire.ErrNotFound, "daemon %s: rank %d of job %s has no stdin stream (not running here, exited, or launched without one)", d.node, b.Rank, b.Job)
	}
	if err := s.push(ctx, stdinPiece{data: b.Data, eof: b.EOF}); err != nil {
		return nil, wire.Errorf(wire.ErrState, "daemon %s: stdin of rank %d of job %s: %w", d.node, b.Rank, b.Job, err)
	}
	return nil, nil
}
