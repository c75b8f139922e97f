package master

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// Fences (kv.fence). A fence is named by its participant list and its
// optional id; each process's n-th entry into a fence of that name joins
// the n-th instance, so fences over the same processes may follow each
// other without any sequence number on the wire: an entry joins the
// oldest open instance it has not entered yet. An instance completes when
// every participant has entered (the reply then carries the collected
// data) and fails when a participant ends before entering, or was not
// alive when the instance began, so a fence never waits forever for a
// dead process. An entry whose requester gives up (timeout) is taken back.

func (ss *sessState) handleFence(ctx context.Context, req *wire.Request, b *wire.FenceReq) (any, error) {
	if len(b.Parts) > 0 {
		return ss.handleFenceParts(ctx, req, b)
	}
	if b.Job == "" || len(b.Local) == 0 {
		return nil, wire.Errorf(wire.ErrInvalid, "master: kv.fence without the entering processes")
	}
	if err := b.Local.Check(); err != nil {
		return nil, err
	}
	ctx, cancel := ctxTimeout(ctx, b.TimeoutMS)
	defer cancel()
	e := &gentry{data: b.Data, conn: req.Conn, stores: b.Collect && b.Stored}
	for r := range b.Local.All() {
		e.who = append(e.who, procRef{b.Job, r})
	}
	collect := b.Collect
	res := make(chan result[any], 1) // written once, on the loop
	e.finish = func(g *gather, err error) {
		if err != nil {
			res <- result[any]{nil, err}
			return
		}
		if e.stored {
			res <- result[any]{&wire.FenceReply{Stored: true}, nil}
			return
		}
		res <- result[any]{g.fenceAnswer(collect), nil}
	}
	if !ss.m.post(func(s *state) {
		if err := ss.fenceEnter(s, b, e); err != nil {
			res <- result[any]{nil, err}
		}
	}) {
		return nil, errStopped
	}
	select {
	case r := <-res:
		return r.v, r.err
	case <-ctx.Done():
	case <-ss.m.loopDone:
		return nil, errStopped
	}
	// Take the entry back, unless its instance has been decided: then
	// that answer stands. A daemon's entry for several processes relies
	// on this: a timeout means none of them is counted (lib/daemon/fence.go).
	taken := make(chan bool, 1)
	if !ss.m.post(func(*state) { taken <- ss.leaveFence(e) }) {
		return nil, errStopped
	}
	select {
	case ok := <-taken:
		if !ok {
			r := <-res
			return r.v, r.err
		}
	case <-ss.m.loopDone:
		return nil, errStopped
	}
	err := ctx.Err()
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, wire.Errorf(wire.ErrTimeout, "master: %s of %s: timed out", fenceName(b.ID), e.who[0])
	}
	return nil, wire.Errorf(wire.ErrCanceled, "master: %s of %s: %w", fenceName(b.ID), e.who[0], err)
}

// handleFenceParts serves the entries of several daemons gathered up the
// tree (wire.FencePart): each part is entered as the entry of its node's
// daemon would be, and the reply answers them all once every part is
// decided. They belong to one instance (a daemon enters a fence over its
// whole job again only once its last entry was answered), so waiting for
// all costs nothing. At the earliest part's deadline, the parts not yet
// decided are taken back: those whose own time is up get timeout, the
// others Again, and their daemons send them again (as a daemon does with
// the entries it holds when the master times out one of them).
func (ss *sessState) handleFenceParts(ctx context.Context, req *wire.Request, b *wire.FenceReq) (any, error) {
	if req.Conn == nil || req.Conn.Peer().Role != wire.RoleDaemon {
		return nil, wire.Errorf(wire.ErrPermission, "master: kv.fence with parts comes from a daemon")
	}
	if b.Job == "" {
		return nil, wire.Errorf(wire.ErrInvalid, "master: kv.fence with parts: no job (the entering processes' job, which the participant list is read against)")
	}
	n := len(b.Parts)
	start := time.Now()
	first := time.Time{} // the earliest part's deadline
	for i, p := range b.Parts {
		if p.Node == "" || len(p.Local) == 0 {
			return nil, wire.Errorf(wire.ErrInvalid, "master: kv.fence part %d without its node or its entering processes", i)
		}
		if err := p.Local.Check(); err != nil {
			return nil, fmt.Errorf("master: kv.fence part %d: %w", i, err)
		}
		if p.TimeoutMS > 0 {
			if d := start.Add(time.Duration(p.TimeoutMS) * time.Millisecond); first.IsZero() || d.Before(first) {
				first = d
			}
		}
	}
	rep := &wire.FenceReply{Parts: make([]wire.FencePartReply, n)}
	entries := make([]*gentry, n)
	settled := make([]bool, n) // on the loop
	left := n                  // on the loop
	done := make(chan struct{})
	settle := func(i int, r wire.FencePartReply) { // on the loop
		if settled[i] {
			return
		}
		settled[i] = true
		rep.Parts[i] = r
		if left--; left == 0 {
			close(done)
		}
	}
	for i, p := range b.Parts {
		e := &gentry{data: p.Data, stores: p.Collect && p.Stored}
		for r := range p.Local.All() {
			e.who = append(e.who, procRef{b.Job, r})
		}
		collect := p.Collect
		e.finish = func(g *gather, err error) {
			switch {
			case err != nil:
				settle(i, wire.FencePartReply{Err: wire.ToWire(err)})
			case e.stored:
				settle(i, wire.FencePartReply{Stored: true})
			case collect:
				settle(i, wire.FencePartReply{Data: g.collectedOnce()})
			default:
				settle(i, wire.FencePartReply{})
			}
		}
		entries[i] = e
	}
	if !ss.m.post(func(s *state) {
		ss.fenceUp++
		ss.fenceUpParts += uint64(n)
		for i, p := range b.Parts {
			e := entries[i]
			if nd := s.nodeByName[p.Node]; nd != nil {
				e.conn = nd.conn // the collected data goes to the part's node (completeFence)
			}
			body := &wire.FenceReq{ID: b.ID, Job: b.Job, Procs: b.Procs, Collect: p.Collect}
			if err := ss.fenceEnter(s, body, e); err != nil {
				settle(i, wire.FencePartReply{Err: wire.ToWire(err)})
			}
		}
	}) {
		return nil, errStopped
	}
	var timer <-chan time.Time
	if !first.IsZero() {
		t := time.NewTimer(time.Until(first))
		defer t.Stop()
		timer = t.C
	}
	for {
		select {
		case <-done:
			return rep, nil
		case <-ss.m.loopDone:
			return nil, errStopped
		case <-timer:
		case <-ctx.Done():
		}
		timer = nil
		// Take back what is not decided; what is keeps its answer.
		now := time.Now()
		canceled := ctx.Err()
		if !ss.m.post(func(*state) {
			for i, p := range b.Parts {
				if settled[i] || !ss.leaveFence(entries[i]) {
					continue
				}
				switch {
				case canceled != nil:
					settle(i, wire.FencePartReply{Err: wire.ToWire(wire.Errorf(wire.ErrCanceled, "master: %s of %s: %v", fenceName(b.ID), entries[i].who[0], canceled))})
				case p.TimeoutMS > 0 && !now.Before(start.Add(time.Duration(p.TimeoutMS)*time.Millisecond)):
					settle(i, wire.FencePartReply{Err: wire.ToWire(wire.Errorf(wire.ErrTimeout, "master: %s of %s: timed out", fenceName(b.ID), entries[i].who[0]))})
				default:
					settle(i, wire.FencePartReply{Again: true})
				}
			}
		}) {
			return nil, errStopped
		}
		if canceled != nil {
			// The daemon below went away: its answer has nowhere to go.
			select {
			case <-done:
				return rep, nil
			case <-ss.m.loopDone:
				return nil, errStopped
			}
		}
	}
}

func fenceName(id string) string {
	if id == "" {
		return "fence"
	}
	return fmt.Sprintf("fence %q", id)
}

// fenceEnter puts e into the instance it belongs to, completing the
// instance if e was the last one missing.
func (ss *sessState) fenceEnter(s *state, b *wire.FenceReq, e *gentry) error {
	if err := s.rcFenceAborted(b.Job, b.ID); err != nil {
		return err // a fence of an aborted resource change (rc_accept.go)
	}
	spec, err := s.participants(b.Job, b.Procs)
	if err != nil {
		return err
	}
	what := fenceName(b.ID)
	key := b.ID + "\x00" + spec.key
	var g *gather
	for _, x := range ss.fences[key] {
		if !x.enteredAny(e.who) {
			g = x
			break
		}
	}
	parts := map[procRef]bool(nil)
	if g != nil {
		parts = g.parts
	} else {
		parts = s.members(spec)
	}
	for _, p := range e.who {
		if _, ok := parts[p]; !ok {
			return wire.Errorf(wire.ErrInvalid, "master: %s is not among the participants of %s (%s)", p, what, spec.key)
		}
	}
	if g == nil {
		if g, err = s.newGather(key, what, parts, spec.wild); err != nil {
			return err
		}
		g.job, g.procs = b.Job, b.Procs
		ss.fences[key] = append(ss.fences[key], g)
	}
	g.enter(e)
	if g.left == 0 {
		ss.dropFence(g)
		ss.completeFence(s, g)
	}
	return nil
}

// completeFence answers the entries of a completed instance. An answer
// with collect carries every participant's data, so a fence over N daemons
// writes N copies of data that grows with N, and a daemon with several
// entries (its scout and the rest, lib/daemon/fence.go) gets and decodes
// it once per entry. A daemon that keeps the data itself
// (FenceReq.Stored) is spared that: the master sends it the data once as
// kv.fenced and answers its entries with Stored once it has applied it.
//   - With a tree of daemons (Config.TreeRadix) and more such daemons than
//     the radix, the data goes down the tree to all of them: the master
//     writes it radix times.
//   - On a star, only the daemons with more than one entry get it so: for
//     a daemon with one entry the extra round trip would save nothing.
//
// A daemon the data did not reach, even after the master's direct resend,
// gets it in its answers, as do all other entries.
func (ss *sessState) completeFence(s *state, g *gather) {
	if !slices.ContainsFunc(g.entries, func(e *gentry) bool { return e.stores }) {
		g.complete()
		return
	}
	radix := s.m.cfg.TreeRadix
	// The entering daemons only: a fence over a job on a few nodes of a
	// large DVM costs what its nodes do.
	byConn := make(map[*wire.Conn]*node)
	for _, e := range g.entries {
		if e.conn == nil || byConn[e.conn] != nil {
			continue
		}
		n := s.nodeByName[e.conn.Peer().Name]
		if n != nil && n.conn == e.conn && n.up && !n.suspect && (radix <= 0 || n.relay != "") {
			byConn[e.conn] = n
		}
	}
	tree, nodes, per, direct := fenceRoutes(g.entries, radix, byConn)
	if len(nodes) == 0 {
		g.complete()
		return
	}
	g.done = true
	for _, e := range direct {
		e.finish(g, nil)
	}
	ss.lastFenced++
	raw, err := wire.Marshal(&wire.FenceData{Inst: ss.lastFenced, Job: g.job, Procs: g.procs, Data: g.collectedOnce()})
	if err != nil { // cannot be encoded: the answers carry it (and say why it fails)
		for _, n := range nodes {
			for _, e := range per[n] {
				e.finish(g, nil)
			}
		}
		return
	}
	if tree {
		ss.treeFences++
	} else {
		radix = len(nodes) // parts of one node each: straight to every daemon
	}
	// Relay number 0: applied whenever it comes (the daemon applies each
	// instance once by its own number), so it never hides a push's relay.
	s.relay(0, radix, "", wire.KindFenced, raw, nodes, func(s *state, f *relayFlight, i int, err error) {
		for _, e := range per[f.nodes[i]] {
			e.stored = err == nil
			e.finish(g, nil)
		}
	}, nil, nil, nil)
}

// dropFence removes an instance from the open ones.
func (ss *sessState) dropFence(g *gather) {
	list := slices.DeleteFunc(ss.fences[g.key], func(x *gather) bool { return x == g })
	if len(list) == 0 {
		delete(ss.fences, g.key)
		return
	}
	ss.fences[g.key] = list
}

// leaveFence takes e back from its instance. It reports false when e's
// answer has been given (the instance completed or failed, or e never
// entered one): that answer is then in e's result.
func (ss *sessState) leaveFence(e *gentry) bool {
	if e.g == nil || e.g.done {
		return false
	}
	e.g.leave(e)
	return true
}

// fenceAnswer is the reply to an entry of a completed fence instance.
// With collect every entry gets the same data, from every participant:
// it is gathered and encoded once per instance (sharedBody), not once per
// entry, which made a fence over a job on N daemons cost O(N²)
// (BenchmarkFenceCollect).
func (g *gather) fenceAnswer(collect bool) any {
	if !collect {
		return &wire.FenceReply{}
	}
	if g.answer == nil {
		g.answer = share(&wire.FenceReply{Data: g.collectedOnce()})
	}
	return g.answer
}

// collectedOnce is collected, made at the first call: the data of a
// completed instance does not change.
func (g *gather) collectedOnce() []wire.ProcKV {
	if g.all == nil {
		g.all = g.collected()
	}
	return g.all
}

// fenceRoutes decides how the entries of a completed instance with collect
// get the data (completeFence): nodes, in node order, get it as kv.fenced
// (down the tree if tree), answering their entries per[node]; the entries
// in direct get it in their answer. byConn holds the daemons that may get
// kv.fenced, by connection.
func fenceRoutes(entries []*gentry, radix int, byConn map[*wire.Conn]*node) (tree bool, nodes []*node, per map[*node][]*gentry, direct []*gentry) {
	per = map[*node][]*gentry{}
	for _, e := range entries {
		n := byConn[e.conn]
		if !e.stores || n == nil {
			direct = append(direct, e)
			continue
		}
		if per[n] == nil {
			nodes = append(nodes, n)
		}
		per[n] = append(per[n], e)
	}
	tree = radix > 0 && len(nodes) > radix
	if !tree {
		// A star: the data in the answers of daemons with one entry.
		nodes = slices.DeleteFunc(nodes, func(n *node) bool {
			if len(per[n]) > 1 {
				return false
			}
			direct = append(direct, per[n]...)
			delete(per, n)
			return true
		})
	}
	slices.SortFunc(nodes, func(a, b *node) int { return a.idx - b.idx }) // a tree's parts are runs of nodes
	return tree, nodes, per, direct
}
