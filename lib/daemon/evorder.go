package daemon

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// Events from the master take two paths to a daemon: its own connection
// (wire.NodeEvent) and, for an event that goes to more daemons than the
// tree's radix, the tree of daemons (a relay of kind event). Each says
// how many events the master sent this daemon before it (Prev), and the
// daemon hands them to its clients in that order: the session library
// drops an event older than the last it delivered, so an event overtaken
// on the way would be lost to it. The count, not the event's Seq, orders
// them: a new subscription's replay sends older events again, after newer
// ones.

// Bounds on holding: an event whose predecessor does not come (a relay
// refused it, which the master does not send again) must not hold the
// rest forever, nor memory.
const (
	evHoldMax   = 1024
	evHoldLimit = 2 * time.Second
)

// evOrder puts the events back in the order the master sent them. Pure
// logic, under its user's lock.
type evOrder struct {
	next  uint64               // events handed on so far: the Prev of the next one
	held  map[uint64]heldEvent // by Prev
	since time.Time            // when the oldest held event came
}

type heldEvent struct {
	prev      uint64
	kind, job string
	raw       []byte
}

// take files the event ev, the master's prev-th to this daemon (from 0),
// and returns those that can be handed on now, in order: it and the held
// ones that follow it, or nothing while one before it is missing. A copy
// of one handed on (the tree's and the master's resend) is dropped.
func (o *evOrder) take(ev heldEvent, now time.Time) []heldEvent {
	if ev.prev < o.next {
		return nil
	}
	if ev.prev > o.next {
		if o.held == nil {
			o.held = make(map[uint64]heldEvent)
		}
		if len(o.held) == 0 {
			o.since = now
		}
		o.held[ev.prev] = ev
		if len(o.held) > evHoldMax || now.Sub(o.since) >= evHoldLimit {
			return o.flush()
		}
		return nil
	}
	out := []heldEvent{ev}
	o.next++
	for {
		h, ok := o.held[o.next]
		if !ok {
			break
		}
		delete(o.held, o.next)
		out = append(out, h)
		o.next++
	}
	if len(o.held) == 0 {
		o.since = time.Time{}
	}
	return out
}

// flush hands on everything held, in order: what they wait for is not
// coming.
func (o *evOrder) flush() []heldEvent {
	out := make([]heldEvent, 0, len(o.held))
	for _, h := range o.held {
		out = append(out, h)
	}
	clear(o.held)
	o.since = time.Time{}
	slices.SortFunc(out, func(a, b heldEvent) int { return cmp.Compare(a.prev, b.prev) })
	if len(out) > 0 {
		o.next = out[len(out)-1].prev + 1
	}
	return out
}

// evOrdered is a daemon's ordering of the master's events.
type evOrdered struct {
	mu    sync.Mutex // held while handing on, so that the order holds; taken before sessionState.mu
	order evOrder
	timer *time.Timer // flushes what is held too long
}

// deliverEvent hands the encoded event raw, the master's prev-th event to
// this daemon, to the local subscribers in the master's order.
func (d *Daemon) deliverEvent(prev uint64, raw []byte) error {
	s := d.sess
	if s == nil {
		return nil
	}
	kind, job, err := wire.EventHead(raw)
	if err != nil {
		return err
	}
	e := &d.evs
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, h := range e.order.take(heldEvent{prev: prev, kind: kind, job: job, raw: raw}, time.Now()) {
		s.forward(h.kind, h.job, h.raw)
	}
	if len(e.order.held) > 0 && e.timer == nil {
		e.timer = time.AfterFunc(evHoldLimit, d.flushEvents)
	}
	return nil
}

// flushEvents hands on what has been held for evHoldLimit.
func (d *Daemon) flushEvents() {
	e := &d.evs
	e.mu.Lock()
	defer e.mu.Unlock()
	e.timer = nil
	if len(e.order.held) == 0 {
		return
	}
	if wait := evHoldLimit - time.Since(e.order.since); wait > 0 {
		e.timer = time.AfterFunc(wait, d.flushEvents)
		return
	}
	d.log.Warn("daemon: events from the master held too long for one before them; handing them on", "n", len(e.order.held), "next", e.order.next)
	for _, h := range e.order.flush() {
		d.sess.forward(h.kind, h.job, h.raw)
	}
}
