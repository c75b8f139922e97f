package master

import (
	"context"
	"slices"

	"github.com/dynrt/dynrt/wire"
)

// Event subscriptions of daemons (for their application processes) and
// application events. A daemon subscribes on its own connection once per
// client subscription; the bus events go to it through an outq, once per
// daemon however many of its subscriptions match, and the daemon hands
// them on to its clients.

// daemonSubs is what the loop keeps for one daemon connection with
// subscriptions.
type daemonSubs struct {
	q       *outq
	subs    map[uint64]*sub
	lastSeq uint64 // last event queued, so overlapping subscriptions send it once
}

func (ss *sessState) handleEventSub(ctx context.Context, req *wire.Request, b *wire.EventSubReq) (any, error) {
	c := req.Conn
	return ask(ctx, ss.m, func(s *state, reply func(*wire.EventSubReply, error)) {
		if err := c.Err(); err != nil {
			reply(nil, err)
			return
		}
		ds := ss.dsubs[c]
		if ds == nil {
			ds = &daemonSubs{q: newOutq(c, outqLimit, s.log), subs: make(map[uint64]*sub)}
			ss.dsubs[c] = ds
			m := ss.m
			go func() {
				<-c.Done()
				m.post(func(*state) { ss.dropDaemonSubs(s, c) })
			}()
		}
		sb := &sub{kinds: slices.Clone(b.Kinds), job: b.Job, deliver: func(ev *wire.Event) bool {
			if ds.lastSeq == ev.Seq {
				return true
			}
			ds.lastSeq = ev.Seq
			return ds.q.push(wire.KindEvent, s.bus.body(ev))
		}}
		id := s.subscribe(sb, b.Since)
		ds.subs[id] = sb
		reply(&wire.EventSubReply{ID: id, Seq: s.bus.seq}, nil)
	})
}

func (ss *sessState) dropDaemonSubs(s *state, c *wire.Conn) {
	ds := ss.dsubs[c]
	if ds == nil {
		return
	}
	delete(ss.dsubs, c)
	for _, sb := range ds.subs {
		s.unsubscribe(sb)
	}
	ds.q.close()
}

func (ss *sessState) handleEventUnsub(ctx context.Context, req *wire.Request, b *wire.EventUnsubReq) (any, error) {
	return nil, do(ctx, ss.m, func(s *state) error {
		ds := ss.dsubs[req.Conn]
		if ds == nil {
			return nil
		}
		for id, sb := range ds.subs {
			if b.ID == 0 || b.ID == id {
				s.unsubscribe(sb)
				delete(ds.subs, id)
			}
		}
		return nil
	})
}

// handleEventNotify raises an application event on the bus.
func (ss *sessState) handleEventNotify(ctx context.Context, _ *wire.Request, b *wire.EventNotifyReq) (any, error) {
	if b.Job == "" {
		return nil, wire.Errorf(wire.ErrInvalid, "master: event.notify without the raiser's job")
	}
	return nil, do(ctx, ss.m, func(s *state) error {
		s.publish(wire.Event{
			Kind: wire.EvApp, Job: b.Job, Ranks: wire.Span(b.Rank, b.Rank),
			Source: &wire.ProcID{Job: b.Job, Rank: b.Rank}, Msg: b.Msg, Data: b.Data,
		})
		return nil
	})
}
