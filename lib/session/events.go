package session

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/dynrt/dynrt/wire"
)

// Event subscription. The daemon forwards the runtime's bus events (job
// and process state changes, process set changes, node up/down, events
// raised by applications) to the sessions that subscribed. Callbacks run
// on one goroutine per session, in event order; they may call the session
// (but should return reasonably soon: later events wait for them).

// Event kinds a session may subscribe to (prefixes match: "pset." matches
// both pset kinds).
const (
	EventJob     = wire.EvJobState  // a job changed state
	EventProc    = wire.EvProcState // processes changed state (e.g. exited)
	EventPsetDef = wire.EvPsetDef   // a set was defined or got a new version
	EventPsetDel = wire.EvPsetDel   // a set was deleted
	EventNodeUp  = wire.EvNodeUp    // a daemon registered
	EventNode    = "node."          // node up or down
	EventApp     = wire.EvApp       // raised by an application (Notify)
)

type subscription struct {
	id    uint64
	kinds []string
	job   string // "" = every job
	fn    func(wire.Event)
	last  uint64 // Seq of the last event delivered (events are never delivered twice)
}

func (sb *subscription) match(ev *wire.Event) bool {
	if sb.job != "" && ev.Job != sb.job {
		return false
	}
	if len(sb.kinds) == 0 {
		return true
	}
	for _, k := range sb.kinds {
		if strings.HasPrefix(ev.Kind, k) {
			return true
		}
	}
	return false
}

// Subscribe calls fn for every runtime event whose kind starts with one of
// kinds (all events when kinds is empty), of any job. Events may arrive
// before Subscribe returns. It returns an id for Unsubscribe.
func (s *Session) Subscribe(ctx context.Context, kinds []string, fn func(wire.Event)) (uint64, error) {
	return s.subscribe(ctx, kinds, "", fn)
}

// subscribe is Subscribe to the events of job only ("" = every job): the
// master and the daemon then send this session no other job's events,
// which it would decode only to drop (a change's record lists its
// processes; docs/scale.md).
func (s *Session) subscribe(ctx context.Context, kinds []string, job string, fn func(wire.Event)) (uint64, error) {
	if fn == nil {
		return 0, wire.Errorf(wire.ErrInvalid, "session: subscribe without a callback")
	}
	sb := &subscription{kinds: slices.Clone(kinds), job: job, fn: fn}
	// Known before the request goes out: the first events may overtake
	// the reply.
	s.mu.Lock()
	key := uint64(len(s.subs)) + 1<<63 // provisional key until the id is known
	for s.subs[key] != nil {
		key++
	}
	s.subs[key] = sb
	s.mu.Unlock()
	var rep wire.EventSubReply
	err := s.call(ctx, wire.KindEventSub, &wire.EventSubReq{Kinds: kinds, Job: job}, &rep)
	s.mu.Lock()
	delete(s.subs, key)
	if err == nil {
		sb.id = rep.ID
		s.subs[rep.ID] = sb
	}
	s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return rep.ID, nil
}

// Unsubscribe ends a subscription (every subscription of the session for
// id 0).
func (s *Session) Unsubscribe(ctx context.Context, id uint64) error {
	s.mu.Lock()
	for k := range s.subs {
		if id == 0 || k == id {
			delete(s.subs, k)
		}
	}
	s.mu.Unlock()
	return s.call(ctx, wire.KindEventUnsub, &wire.EventUnsubReq{ID: id}, nil)
}

// Notify raises an application event (kind EventApp) that every
// subscriber sees, with the caller as its source.
func (s *Session) Notify(ctx context.Context, msg string, data map[string]string) error {
	return s.call(ctx, wire.KindEventNotify, &wire.EventNotifyReq{Msg: msg, Data: data}, nil)
}

// onEvent runs on the connection's reader goroutine: it only queues.
func (s *Session) onEvent(req *wire.Request) {
	if req.Kind != wire.KindEvent {
		return
	}
	var ev wire.Event
	if err := req.Decode(&ev); err != nil {
		s.log.Warn("session: bad event", "err", err)
		return
	}
	s.events.push(ev)
}

// dispatch runs on the event goroutine.
func (s *Session) dispatch(ev wire.Event) {
	s.mu.Lock()
	var fns []func(wire.Event)
	for _, sb := range s.subs {
		if ev.Seq > sb.last && sb.match(&ev) {
			sb.last = ev.Seq
			fns = append(fns, sb.fn)
		}
	}
	s.mu.Unlock()
	for _, fn := range fns {
		fn(ev)
	}
}

// eventQueue hands events from the reader goroutine to the callback
// goroutine without ever blocking the reader.
type eventQueue struct {
	mu       sync.Mutex
	items    []wire.Event
	closed   bool
	draining bool // no more events come: stop once the queue is empty
	wake     chan struct{}
	done     chan struct{} // closed when run has returned
}

func newEventQueue(deliver func(wire.Event)) *eventQueue {
	q := &eventQueue{wake: make(chan struct{}, 1), done: make(chan struct{})}
	go q.run(deliver)
	return q
}

func (q *eventQueue) push(ev wire.Event) {
	q.mu.Lock()
	if !q.closed {
		q.items = append(q.items, ev)
	}
	q.mu.Unlock()
	q.signal()
}

func (q *eventQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *eventQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.items = nil
	q.mu.Unlock()
	q.signal()
}

// drain stops the queue once the events already queued are delivered:
// the connection is gone and no more can come.
func (q *eventQueue) drain() {
	q.mu.Lock()
	q.draining = true
	q.mu.Unlock()
	q.signal()
}

func (q *eventQueue) run(deliver func(wire.Event)) {
	defer close(q.done)
	for range q.wake {
		for {
			q.mu.Lock()
			if q.closed || (q.draining && len(q.items) == 0) {
				q.mu.Unlock()
				return
			}
			if len(q.items) == 0 {
				q.mu.Unlock()
				break
			}
			ev := q.items[0]
			q.items = q.items[1:]
			q.mu.Unlock()
			deliver(ev)
		}
	}
}
