package master

import (
	"log/slog"
	"sync"

	"github.com/dynrt/dynrt/wire"
)

// outq pushes events to one connection without ever blocking the loop: the
// loop appends, a writer goroutine sends. A barrier lets a request handler
// wait until everything queued before it has been written, so that a reply
// never overtakes the events it follows (the end of a job after its
// output).
type outq struct {
	c     *wire.Conn
	log   *slog.Logger
	limit int

	mu     sync.Mutex
	items  []qitem
	closed bool
	wake   chan struct{} // capacity 1
}

type qitem struct {
	kind    string
	body    any
	barrier chan struct{} // set for barriers; closed when reached
}

func newOutq(c *wire.Conn, limit int, log *slog.Logger) *outq {
	q := &outq{c: c, log: log, limit: limit, wake: make(chan struct{}, 1)}
	go q.run()
	return q
}

// push queues an event; it returns false when the queue is full or closed.
func (q *outq) push(kind string, body any) bool {
	q.mu.Lock()
	if q.closed || len(q.items) >= q.limit {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, qitem{kind: kind, body: body})
	q.mu.Unlock()
	q.signal()
	return true
}

// barrier returns a channel closed once everything queued so far has been
// written (or the connection has failed).
func (q *outq) barrier() <-chan struct{} {
	ch := make(chan struct{})
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		close(ch)
		return ch
	}
	q.items = append(q.items, qitem{barrier: ch})
	q.mu.Unlock()
	q.signal()
	return ch
}

func (q *outq) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// close stops the writer after it has drained the queue.
func (q *outq) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

func (q *outq) run() {
	var batch []qitem
	dead := false
	for {
		q.mu.Lock()
		batch, q.items = q.items, batch[:0]
		closed := q.closed
		q.mu.Unlock()
		for i, it := range batch {
			switch {
			case it.barrier != nil:
				close(it.barrier)
			case !dead:
				if err := q.c.Notify(it.kind, it.body); err != nil {
					dead = true
					q.log.Debug("master: event writer stopped", "peer", q.c.Peer().String(), "err", err)
				}
			}
			batch[i] = qitem{}
		}
		if closed && len(batch) == 0 {
			return
		}
		if len(batch) > 0 {
			continue // look again before sleeping
		}
		select {
		case <-q.wake:
		case <-q.c.Done():
			dead = true
			q.mu.Lock()
			q.closed = true
			q.mu.Unlock()
		}
	}
}
