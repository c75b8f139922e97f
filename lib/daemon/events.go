package daemon

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/dynrt/dynrt/wire"
)

// Event subscriptions of local clients. Each client event.sub becomes a
// subscription at the master on the daemon's own connection; the master
// sends every matching bus event once per daemon, and the daemon hands it
// to each client connection with a matching subscription, through a
// per-connection queue so that a slow client never holds up the master
// connection's reader.

// clientQueueLimit bounds the events queued for one client; past it the
// client misses events (and the daemon logs it once).
const clientQueueLimit = 4096

// clientSub is one subscription of a client connection.
type clientSub struct {
	id     uint64 // the id the client knows
	master uint64 // the subscription's id at the master (0 until it answered)
	conn   *wire.Conn
	kinds  []string // prefixes; empty = all
	job    string   // "" = all jobs
}

func (cs *clientSub) match(kind, job string) bool {
	if cs.job != "" && job != cs.job {
		return false
	}
	if len(cs.kinds) == 0 {
		return true
	}
	for _, k := range cs.kinds {
		if strings.HasPrefix(kind, k) {
			return true
		}
	}
	return false
}

func (s *sessionState) handleEventSub(ctx context.Context, req *wire.Request, b *wire.EventSubReq) (any, error) {
	if _, err := CallerOf(req); err != nil {
		return nil, err
	}
	// Registered before the master is asked: events (a replay with Since)
	// may arrive before its answer.
	s.mu.Lock()
	s.lastSub++
	cs := &clientSub{id: s.lastSub, conn: req.Conn, kinds: slices.Clone(b.Kinds), job: b.Job}
	s.subs[cs.id] = cs
	if s.queues[req.Conn] == nil {
		s.queues[req.Conn] = newClientQueue(req.Conn, s.d.log)
		go s.watchClient(req.Conn)
	}
	s.mu.Unlock()

	var rep wire.EventSubReply
	if err := s.d.master.Call(ctx, wire.KindEventSub, b, &rep); err != nil {
		s.mu.Lock()
		delete(s.subs, cs.id)
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Lock()
	cs.master = rep.ID
	_, still := s.subs[cs.id]
	s.mu.Unlock()
	if !still { // the client went away meanwhile
		s.unsubMaster([]uint64{rep.ID})
		return nil, wire.Errorf(wire.ErrClosed, "daemon %s: client went away", s.d.node)
	}
	return &wire.EventSubReply{ID: cs.id, Seq: rep.Seq}, nil
}

func (s *sessionState) handleEventUnsub(ctx context.Context, req *wire.Request, b *wire.EventUnsubReq) (any, error) {
	var ids []uint64
	s.mu.Lock()
	for id, cs := range s.subs {
		if cs.conn == req.Conn && (b.ID == 0 || b.ID == id) {
			delete(s.subs, id)
			if cs.master != 0 {
				ids = append(ids, cs.master)
			}
		}
	}
	s.mu.Unlock()
	for _, id := range ids {
		if err := s.d.master.Call(ctx, wire.KindEventUnsub, &wire.EventUnsubReq{ID: id}, nil); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// watchClient drops the subscriptions of a client connection once it has
// closed.
func (s *sessionState) watchClient(c *wire.Conn) {
	<-c.Done()
	var ids []uint64
	s.mu.Lock()
	for id, cs := range s.subs {
		if cs.conn == c {
			delete(s.subs, id)
			if cs.master != 0 {
				ids = append(ids, cs.master)
			}
		}
	}
	q := s.queues[c]
	delete(s.queues, c)
	s.mu.Unlock()
	if q != nil {
		q.close()
	}
	s.unsubMaster(ids)
}

func (s *sessionState) unsubMaster(ids []uint64) {
	if len(ids) == 0 || s.d.master.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, id := range ids {
		if err := s.d.master.Call(ctx, wire.KindEventUnsub, &wire.EventUnsubReq{ID: id}, nil); err != nil {
			s.d.log.Debug("daemon: event.unsub failed", "err", err)
			return
		}
	}
}

// forward hands a bus event to every client connection with a matching
// subscription, once per connection (the client library sorts it out
// among its subscriptions). The event goes on as the master encoded it
// (raw): the daemon reads only its kind and job (wire.EventHead). A change's record
// lists its processes, so decoding and encoding it again for each client
// cost every daemon O(processes) per event (docs/scale.md).
func (s *sessionState) forward(kind, job string, raw msgpack.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sent []*clientQueue
	for _, cs := range s.subs {
		if !cs.match(kind, job) {
			continue
		}
		q := s.queues[cs.conn]
		if q == nil || slices.Contains(sent, q) {
			continue
		}
		sent = append(sent, q)
		q.push(raw) // shared by the queues: never changed
	}
}

// clientQueue writes events to one client connection from its own
// goroutine.
type clientQueue struct {
	c   *wire.Conn
	log *slog.Logger

	mu      sync.Mutex
	items   []msgpack.RawMessage // encoded wire.Event
	closed  bool
	dropped int
	wake    chan struct{}
}

func newClientQueue(c *wire.Conn, log *slog.Logger) *clientQueue {
	q := &clientQueue{c: c, log: log, wake: make(chan struct{}, 1)}
	go q.run()
	return q
}

func (q *clientQueue) push(ev msgpack.RawMessage) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	if len(q.items) >= clientQueueLimit {
		if q.dropped == 0 {
			q.log.Warn("daemon: client does not read its events; dropping some", "client", q.c.Peer().Name)
		}
		q.dropped++
		q.mu.Unlock()
		return
	}
	q.items = append(q.items, ev)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *clientQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *clientQueue) run() {
	var batch []msgpack.RawMessage
	for {
		q.mu.Lock()
		batch, q.items = q.items, batch[:0]
		closed := q.closed
		q.mu.Unlock()
		for i := range batch {
			if err := q.c.Notify(wire.KindEvent, batch[i]); err != nil {
				q.close()
				return
			}
			batch[i] = nil
		}
		if closed {
			return
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-q.wake:
		case <-q.c.Done():
			return
		}
	}
}
