package master

import (
	"context"
	"strings"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// ringSize is how many recent events the bus keeps for replay (event.sub
// with Since).
const ringSize = 1024

// bus is the event bus: every state change the master makes is published
// here, numbered, kept in a ring and handed to matching subscribers.
type bus struct {
	seq    uint64
	ring   []wire.Event // circular, ringSize at most
	head   int          // index of the oldest event once the ring is full
	subs   map[uint64]*sub
	nextID uint64
	// cur is the event being published, encoded at most once for all its
	// subscribers (body).
	cur *wire.Event
	enc *sharedBody
}

// body is what a subscriber's queue sends for ev: the shared encoding of
// the event being published, else (a replay) the event itself.
func (b *bus) body(ev *wire.Event) any {
	if ev == b.cur && b.enc != nil {
		return b.enc
	}
	return *ev
}

// sub is one subscription. deliver must not block; it returns false when
// the subscriber cannot keep up, and the subscription is then dropped.
// Session services can create subscriptions that deliver to a daemon.
type sub struct {
	id      uint64
	kinds   []string // prefixes; empty = all
	job     string   // "" = all jobs
	owner   *peer    // tool connection, nil for other kinds of subscribers
	deliver func(ev *wire.Event) bool
}

func (s *sub) match(ev *wire.Event) bool {
	if s.job != "" && ev.Job != s.job {
		return false
	}
	if len(s.kinds) == 0 {
		return true
	}
	for _, k := range s.kinds {
		if strings.HasPrefix(ev.Kind, k) {
			return true
		}
	}
	return false
}

// publish numbers ev, records it and delivers it to the subscribers.
func (s *state) publish(ev wire.Event) {
	b := &s.bus
	b.seq++
	ev.Seq = b.seq
	if ev.Time == 0 {
		ev.Time = time.Now().UnixNano()
	}
	if len(b.ring) < ringSize {
		b.ring = append(b.ring, ev)
	} else {
		b.ring[b.head] = ev
		b.head = (b.head + 1) % ringSize
	}
	b.cur, b.enc = &ev, share(ev)
	defer func() { b.cur, b.enc = nil, nil }()
	for id, sb := range b.subs {
		if !sb.match(&ev) {
			continue
		}
		// A tool with several matching subscriptions gets the event once.
		if sb.owner != nil {
			if sb.owner.lastSeq == ev.Seq {
				continue
			}
			sb.owner.lastSeq = ev.Seq
		}
		if !sb.deliver(&ev) {
			s.log.Warn("master: dropping a subscriber that does not keep up", "sub", id, "owner", sb.ownerName())
			s.unsubscribe(sb)
		}
	}
	if ss := s.m.sess; ss != nil {
		ss.sendEvents(s, &ev) // the daemons' share, down the tree when it can (events.go)
	}
}

func (sb *sub) ownerName() string {
	if sb.owner == nil {
		return ""
	}
	return sb.owner.c.Peer().String()
}

// subscribe adds sb, first replaying the retained events after since.
func (s *state) subscribe(sb *sub, since uint64) uint64 {
	b := &s.bus
	if b.subs == nil {
		b.subs = make(map[uint64]*sub)
	}
	b.nextID++
	sb.id = b.nextID
	if since > 0 {
		n := len(b.ring)
		for i := range n {
			ev := &b.ring[(b.head+i)%n]
			if ev.Seq > since && sb.match(ev) && !sb.deliver(ev) {
				return sb.id // dropped before it started; the caller sees no events
			}
		}
	}
	b.subs[sb.id] = sb
	if sb.owner != nil {
		sb.owner.subs[sb.id] = sb
	}
	return sb.id
}

func (s *state) unsubscribe(sb *sub) {
	delete(s.bus.subs, sb.id)
	if sb.owner != nil {
		delete(sb.owner.subs, sb.id)
	}
}

// handleEventSub subscribes a tool connection.
func (m *Master) handleEventSub(ctx context.Context, req *wire.Request, b *wire.EventSubReq) (any, error) {
	return ask(ctx, m, func(s *state, reply func(*wire.EventSubReply, error)) {
		p, err := s.peerOf(req.Conn)
		if err != nil {
			reply(nil, err)
			return
		}
		q := p.queue()
		sb := &sub{kinds: b.Kinds, job: b.Job, owner: p, deliver: func(ev *wire.Event) bool {
			return q.push(wire.KindEvent, s.bus.body(ev))
		}}
		id := s.subscribe(sb, b.Since)
		reply(&wire.EventSubReply{ID: id, Seq: s.bus.seq}, nil)
	})
}

func (m *Master) handleEventUnsub(ctx context.Context, req *wire.Request, b *wire.EventUnsubReq) (any, error) {
	return nil, do(ctx, m, func(s *state) error {
		p := s.peers[req.Conn]
		if p == nil {
			return nil
		}
		for id, sb := range p.subs {
			if b.ID == 0 || b.ID == id {
				s.unsubscribe(sb)
			}
		}
		return nil
	})
}
