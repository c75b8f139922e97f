package master

import (
	"context"
	"slices"

	"github.com/dynrt/dynrt/wire"
)

// Event subscriptions of daemons (for their application processes) and
// application events. A daemon subscribes on its own connection once per
// client subscription; the bus events go to it once per daemon however
// many of its subscriptions match, and the daemon hands them on to its
// clients. An event for more daemons than the tree's radix
// (Config.TreeRadix) goes down the tree of daemons, else through each
// daemon's outq; each says how many events went to that daemon before it
// (wire.NodeEvent.Prev), and the daemon restores the order
// (lib/daemon/evorder.go).

// maxEventRelays bounds the events in flight down the tree: past it they
// go through the outqs, whose limits drop a daemon that does not keep up.
const maxEventRelays = 64

// daemonSubs is what the loop keeps for one daemon connection with
// subscriptions.
type daemonSubs struct {
	q       *outq
	subs    map[uint64]*sub
	lastSeq uint64 // last event queued, so overlapping subscriptions send it once
	sent    uint64 // events sent to the daemon, by either path (wire.NodeEvent.Prev)
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
			if ev == s.bus.cur && s.m.cfg.TreeRadix > 0 {
				ss.evOut = append(ss.evOut, ds) // once every daemon is known (sendEvents)
				return true
			}
			return ds.send(ev, s.bus.body(ev))
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

// send queues ev (its encoding body) to the daemon.
func (ds *daemonSubs) send(ev *wire.Event, body any) bool {
	var raw []byte
	var err error
	if sh, ok := body.(*sharedBody); ok {
		raw, err = sh.bytes()
	} else {
		raw, err = wire.Marshal(ev)
	}
	if err != nil || !ds.q.push(wire.KindNodeEvent, &wire.NodeEvent{Prev: ds.sent, Ev: raw}) {
		return false
	}
	ds.sent++
	return true
}

// sendEvents sends the event being published (s.bus.cur) to the daemons
// its subscriptions collected: down the tree when they are more than the
// radix, else (and to daemons the tree cannot take: suspect, no relay
// address) through their outqs.
func (ss *sessState) sendEvents(s *state, ev *wire.Event) {
	out := ss.evOut
	ss.evOut = out[:0]
	if len(out) == 0 {
		return
	}
	radix := s.m.cfg.TreeRadix
	var direct []*daemonSubs
	var tree []*node
	by := make(map[*node]*daemonSubs)
	if radix > 0 && len(out) > radix && ss.evRelays < maxEventRelays {
		for _, ds := range out {
			n := s.nodeByName[ds.q.c.Peer().Name]
			if n == nil || n.conn != ds.q.c || !n.up || n.suspect || n.relay == "" || by[n] != nil {
				direct = append(direct, ds)
				continue
			}
			by[n] = ds
			tree = append(tree, n)
		}
	} else {
		direct = out
	}
	raw, err := s.bus.enc.bytes()
	if len(tree) <= radix || err != nil {
		for _, n := range tree {
			direct = append(direct, by[n])
		}
		tree = nil
	}
	if len(tree) > 0 {
		slices.SortFunc(tree, func(a, b *node) int { return a.idx - b.idx }) // a tree's parts are runs of nodes
		prev := make(map[*node]uint64, len(tree))
		for _, n := range tree {
			prev[n] = by[n].sent
			by[n].sent++
		}
		left := len(tree)
		ss.evRelays++
		ss.treeEvents++
		// Relay number 0: applied whenever it comes; the daemon drops a
		// copy by its place in the order (Prev).
		s.relay(0, radix, "", wire.KindEvent, raw, tree, func(*state, *relayFlight, int, error) {
			if left--; left == 0 {
				ss.evRelays--
			}
		}, nil, nil, prev)
	}
	for _, ds := range direct {
		if !ds.send(ev, s.bus.body(ev)) {
			s.log.Warn("master: dropping a daemon's event subscriptions: it does not keep up", "daemon", ds.q.c.Peer().String())
			for id, sb := range ds.subs {
				s.unsubscribe(sb)
				delete(ds.subs, id)
			}
		}
	}
}
