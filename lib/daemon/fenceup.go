package daemon

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// Fence entries up the tree of daemons (wire.FencePart). When the master
// sends a job's launch or pushes down the tree (wire.NodeRelay.Job), each
// daemon of the job learns where it sits: the daemon that passed the
// relay on is its parent, or the master when this daemon heads a part,
// and the relay's Below is its subtree. A daemon's entries into a fence
// of a process of that job (over the whole job or over named processes)
// then go to its parent instead of the master; a parent gathers its own
// node's and its subtree's entries and sends them on as one request. The master's share of a fence is then
// radix requests instead of one per daemon (docs/scale.md).
//
//   - A parent sends what it holds for a fence once every node of its
//     subtree has sent something (mostly their scouts, which go ahead of a
//     node's whole entry), again once every node's whole entry is in (one
//     per node: scouts and late entries are extra), and otherwise upWait
//     after the first of what it holds, so that a child whose processes
//     are slow, or ended, never holds up the others for long. A second
//     whole entry of a node means the node is in the next instance: what
//     is held goes at once, and if the instance went without some nodes of
//     the subtree (their processes ended, or a newer tree sends their
//     entries elsewhere), the next is expected to do so too, so that the
//     wait is not paid again at every fence.
//   - The master answers a gathered request once all its parts are decided
//     (they are in one instance), and the answers go back down the way the
//     entries came. At the earliest part's deadline, the parts not decided
//     are taken back; those whose time is not up are sent again (Again).
//   - A parent that fails (its connection breaks, it is silent for the
//     master's dead time, or the job's data shows its node without any
//     process of the job, as when the master has declared it lost) fails
//     the entries it carries: in a fence over the whole job its own
//     processes were participants, so the instance fails anyway (in one
//     over named processes it may go on, and a process whose entry failed
//     so may enter again). They are not sent again directly: an entry the
//     master may have entered and answered would join the next instance. The job's later fences go to the master directly until
//     a relay of the job shows this daemon its place again.
//   - A daemon with no parent for the job (a star, a tree that does not
//     span it, a job the tree has not reached yet) sends its entries to the
//     master directly, as before. So does one whose participant list the
//     master will refuse: it says why.
//   - A fence over some of the job's processes gathers like one over all:
//     a parent expects its whole subtree, and when the first instance
//     went without some nodes, the next ones expect only those that came.

// upWait is how long a parent holds the entries of a fence before it
// sends what it has (upState.wait, for tests, if set).
const upWait = 20 * time.Millisecond

// maxUpCycles bounds the fences whose entries a daemon tracks for
// batching (fence names are the processes' choice); past it the tracking
// restarts, which only costs batching.
const maxUpCycles = 4096

type upState struct {
	wait    time.Duration // upWait if 0; set before use
	mu      sync.Mutex
	links   map[string]upLink          // by job: where its fences go
	batches map[fenceKey]*upBatch      // entries waiting to go up
	cycles  map[fenceKey]*upCycle      // what came of each fence since its subtree was last complete
	flights map[*upFlight]struct{}     // requests at a parent daemon, not answered yet
	own     map[fenceKey][]*fenceRound // this node's rounds with entries on their way up, one per entry
}

// upCycle tracks the entries of one fence instance from this daemon's
// subtree, by node.
type upCycle struct {
	seen   map[string]bool // nodes that sent anything (a scout is enough)
	whole  map[string]bool // nodes that sent their whole entry
	early  bool            // what came until every node was seen has gone
	expect int             // nodes that sent their whole entry into the last instance that was not complete (0: all), until the job's tree changes
}

// upLink is this daemon's place in a job's tree.
type upLink struct {
	addr  string // the parent daemon's relay address; "" = the master
	node  string // the parent's node
	below int    // the nodes below this one
}

// upBatch is what a daemon holds of one fence.
type upBatch struct {
	key   fenceKey
	procs []wire.ProcRanges // the participant list, as the first entry gave it
	parts []wire.FencePart
	at    []time.Time // when each part came (its TimeoutMS counts from then)
	waits []*upResult
	timer *time.Timer
}

// upResult is one part's answer.
type upResult struct {
	rep  wire.FencePartReply
	err  error // the request failed as a whole
	done chan struct{}
}

// upFlight is a request sent to a parent daemon.
type upFlight struct {
	job, node string
	cancel    context.CancelCauseFunc
}

// setUpLink records the job's tree as the relay b showed it; from is the
// relay's sender (nil: the master).
func (d *Daemon) setUpLink(b *wire.NodeRelay, from *wire.Conn) {
	l := upLink{below: len(b.Below)}
	if from != nil && from != d.master && b.From != "" {
		l.addr, l.node = b.From, from.Peer().Name
	}
	u := &d.up
	u.mu.Lock()
	if u.links == nil {
		u.links = make(map[string]upLink)
	}
	u.links[b.Job] = l
	for key, c := range u.cycles {
		if key.job == b.Job {
			c.expect = 0 // the subtree may have changed
		}
	}
	u.mu.Unlock()
}

// upJobChanged fails the requests at parents that the job's new data shows
// without any process of the job (data nil: the job has ended), and
// forgets the job's tree once it has ended.
func (d *Daemon) upJobChanged(job string, data *wire.JobData) {
	u := &d.up
	u.mu.Lock()
	defer u.mu.Unlock()
	if data == nil {
		delete(u.links, job)
	}
	for f := range u.flights {
		if f.job != job {
			continue
		}
		if data == nil {
			f.cancel(wire.Errorf(wire.ErrAborted, "daemon %s: job %s has ended", d.node, job))
			continue
		}
		if !hostsRanks(data.Placement, f.node) {
			f.cancel(wire.Errorf(wire.ErrAborted, "daemon %s: node %s, whose daemon carries this node's fence entries of job %s up the tree, has no process of the job left", d.node, f.node, job))
		}
	}
}

// upKey is the key of a fence entry's batch: its job, name and canonical
// participant list (the master's instance key).
func upKey(b *wire.FenceReq) (fenceKey, bool) {
	spec, ok := fenceSpec(b.Job, b.Procs)
	return fenceKey{job: b.Job, id: b.ID, procs: spec}, ok && b.Job != ""
}

func hostsRanks(pl wire.Placements, node string) bool {
	for _, p := range pl {
		if p.Node == node {
			return len(p.Ranks) > 0
		}
	}
	return false
}

// fenceUpward reports whether body, an entry of this node into a fence,
// goes up the job's tree (to a parent daemon, or to the master as the
// head of a part) rather than to the master on its own.
func (d *Daemon) fenceUpward(body *wire.FenceReq) bool {
	if body.Job == "" {
		return false
	}
	u := &d.up
	u.mu.Lock()
	l, ok := u.links[body.Job]
	u.mu.Unlock()
	return ok && (l.addr != "" || l.below > 0)
}

// callFence enters body, an entry of this node's round r into its fence:
// up the tree when the job has one here, else at the master. extra says
// it is not the node's whole entry (a scout, a late process, one of an
// entry split after invalid).
func (d *Daemon) callFence(body *wire.FenceReq, rep *wire.FenceReply, extra bool, r *fenceRound) error {
	if !d.fenceUpward(body) {
		return d.master.Call(context.Background(), wire.KindFence, body, rep)
	}
	key, ok := upKey(body)
	if !ok || !d.upOwn(key, r) {
		// The master explains what is wrong with the list; or another
		// round of this fence is on its way up from here (a process
		// entered it twice at once): this one goes on its own, so that a
		// request up the tree never holds two instances of one fence (the
		// master answers it when all its parts are decided, and the later
		// instance may wait for a process whose earlier answer it holds).
		return d.master.Call(context.Background(), wire.KindFence, body, rep)
	}
	defer d.upOwnDone(key, r)
	var deadline time.Time
	if body.TimeoutMS > 0 {
		deadline = time.Now().Add(time.Duration(body.TimeoutMS) * time.Millisecond)
	}
	for {
		part := wire.FencePart{Node: d.node, Local: body.Local, Data: body.Data, Collect: body.Collect, Stored: body.Stored, Extra: extra}
		if !deadline.IsZero() {
			part.TimeoutMS = ceilMS(time.Until(deadline))
		}
		w := &upResult{done: make(chan struct{})}
		d.gatherUp(key, body.Procs, part, w)
		<-w.done
		switch {
		case w.err != nil:
			return w.err
		case w.rep.Again:
			continue // taken back at another node's deadline
		case w.rep.Err != nil:
			return w.rep.Err
		}
		*rep = wire.FenceReply{Data: w.rep.Data, Stored: w.rep.Stored}
		return nil
	}
}

// handleFenceUp serves a child daemon's gathered entries.
func (d *Daemon) handleFenceUp(_ context.Context, req *wire.Request, b *wire.FenceReq) (any, error) {
	key, ok := upKey(b)
	if len(b.Parts) == 0 || !ok {
		return nil, wire.Errorf(wire.ErrInvalid, "daemon %s: kv.fence from a daemon carries the parts of a fence of a named job, with a valid participant list", d.node)
	}
	waits := make([]*upResult, len(b.Parts))
	for i, p := range b.Parts {
		waits[i] = &upResult{done: make(chan struct{})}
		d.gatherUp(key, b.Procs, p, waits[i])
	}
	// An entry whose sender goes away stays entered (as at the master):
	// its answer is awaited all the same, and then dropped.
	rep := &wire.FenceReply{Parts: make([]wire.FencePartReply, len(b.Parts))}
	for i, w := range waits {
		<-w.done
		if w.err != nil {
			rep.Parts[i] = wire.FencePartReply{Err: wire.ToWire(w.err)}
		} else {
			rep.Parts[i] = w.rep
		}
	}
	return rep, nil
}

// gatherUp adds part to what this daemon holds of the fence key and sends
// it on when the subtree is complete; w gets the part's answer.
func (d *Daemon) gatherUp(key fenceKey, procs []wire.ProcRanges, part wire.FencePart, w *upResult) {
	u := &d.up
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.batches == nil {
		u.batches = make(map[fenceKey]*upBatch)
		u.cycles = make(map[fenceKey]*upCycle)
	}
	cyc := u.cycles[key]
	if cyc == nil {
		if len(u.cycles) >= maxUpCycles {
			clear(u.cycles)
		}
		cyc = &upCycle{seen: map[string]bool{}, whole: map[string]bool{}}
		u.cycles[key] = cyc
	}
	b := u.batches[key]
	if !part.Extra && cyc.whole[part.Node] {
		// That node is in the next instance already; the last one went
		// without some nodes of the subtree (their processes ended, or
		// their entries go elsewhere): expect only those that came.
		if b != nil {
			d.flushUpLocked(b)
			b = nil
		}
		cyc.next(len(cyc.whole))
	}
	if b == nil {
		b = &upBatch{key: key, procs: procs}
		u.batches[key] = b
		wait := u.wait
		if wait <= 0 {
			wait = upWait
		}
		b.timer = time.AfterFunc(wait, func() {
			u.mu.Lock()
			defer u.mu.Unlock()
			if u.batches[key] == b {
				d.flushUpLocked(b)
			}
		})
	}
	b.parts = append(b.parts, part)
	b.at = append(b.at, time.Now())
	b.waits = append(b.waits, w)
	cyc.seen[part.Node] = true
	if !part.Extra {
		cyc.whole[part.Node] = true
	}
	// Two requests per instance when the subtree is complete: the first
	// entries of every node (their scouts, mostly), then the rest.
	nodes := 1 + u.links[key.job].below
	if cyc.expect > 0 {
		nodes = min(nodes, cyc.expect)
	}
	switch {
	case len(cyc.whole) >= nodes:
		d.flushUpLocked(b)
		cyc.next(cyc.expect)
	case len(cyc.seen) >= nodes && !cyc.early:
		cyc.early = true
		d.flushUpLocked(b)
	}
}

// next starts the cycle of the next instance, expecting expect nodes
// (0: the whole subtree).
func (c *upCycle) next(expect int) {
	clear(c.seen)
	clear(c.whole)
	c.early, c.expect = false, expect
}

// flushUpLocked sends b on. d.up.mu must be held.
func (d *Daemon) flushUpLocked(b *upBatch) {
	u := &d.up
	if u.batches[b.key] == b {
		delete(u.batches, b.key)
	}
	b.timer.Stop()
	l := u.links[b.key.job]
	var f *upFlight
	ctx := context.Background()
	if l.addr != "" {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		f = &upFlight{job: b.key.job, node: l.node, cancel: cancel}
		if u.flights == nil {
			u.flights = make(map[*upFlight]struct{})
		}
		u.flights[f] = struct{}{}
	}
	go d.sendUp(ctx, b, l, f)
}

// sendUp sends b to l's parent (the master if none) and hands out the
// answers.
func (d *Daemon) sendUp(ctx context.Context, b *upBatch, l upLink, f *upFlight) {
	now := time.Now()
	for i := range b.parts {
		if p := &b.parts[i]; p.TimeoutMS > 0 {
			p.TimeoutMS = max(p.TimeoutMS-now.Sub(b.at[i]).Milliseconds(), 1)
		}
	}
	body := &wire.FenceReq{ID: b.key.id, Job: b.key.job, Procs: b.procs, Parts: b.parts}
	var rep wire.FenceReply
	var err error
	if f == nil {
		err = d.master.Call(ctx, wire.KindFence, body, &rep)
	} else {
		var c *wire.Conn
		if c, err = d.peer(ctx, l.addr); err == nil {
			stop := make(chan struct{})
			go d.watchParent(c, f, stop)
			err = c.Call(ctx, wire.KindFence, body, &rep)
			close(stop)
		}
		u := &d.up
		u.mu.Lock()
		delete(u.flights, f)
		if err != nil && u.links[b.key.job] == l {
			// Until the job's next relay shows the tree again, its fences
			// go to the master directly rather than to a lost parent.
			delete(u.links, b.key.job)
		}
		u.mu.Unlock()
		f.cancel(nil)
		if err != nil {
			if cause := context.Cause(ctx); errors.Is(cause, wire.ErrAborted) {
				err = cause // upJobChanged: the parent's node is lost
			} else {
				err = wire.Errorf(wire.ErrAborted, "daemon %s: %s of job %s: node %s, whose daemon carries this node's entry up the tree, failed: %v", d.node, fenceWhat(b.key.id), b.key.job, l.node, err)
			}
		}
	}
	if err == nil && len(rep.Parts) != len(b.parts) {
		err = wire.Errorf(wire.ErrInternal, "daemon %s: %s of job %s: %d answers to %d gathered entries", d.node, fenceWhat(b.key.id), b.key.job, len(rep.Parts), len(b.parts))
	}
	for i, w := range b.waits {
		if err != nil {
			w.err = err
		} else {
			w.rep = rep.Parts[i]
		}
		close(w.done)
	}
}

// watchParent fails the request f at a parent daemon that has not been
// heard from for as long as the master waits before it declares a daemon
// dead (NodeRegisterReply.DeadMS): a hung parent's node is lost to the
// master by then, yet nothing else would tell this daemon (a job that goes
// on after a loss gets no new data). It pings the parent meanwhile, so an
// idle but live one is heard.
func (d *Daemon) watchParent(c *wire.Conn, f *upFlight, stop <-chan struct{}) {
	hb, dead := d.peerHeartbeat()
	if hb <= 0 || dead <= 0 {
		return
	}
	t := time.NewTicker(hb)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if quiet := time.Since(c.Heard()); quiet > dead {
			f.cancel(wire.Errorf(wire.ErrAborted, "daemon %s: the daemon of node %s, which carries this node's fence entries of job %s up the tree, has not answered for %v", d.node, f.node, f.job, quiet.Round(time.Millisecond)))
			return
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), hb)
			defer cancel()
			_ = c.Call(ctx, wire.KindPing, &wire.Ping{}, nil)
		}()
	}
}

// peerHeartbeat is the master's heartbeat interval and dead time.
func (d *Daemon) peerHeartbeat() (hb, dead time.Duration) {
	return time.Duration(d.peerHB.Load()) * time.Millisecond, time.Duration(d.peerDead.Load()) * time.Millisecond
}

// upOwn books an entry of round r of this node going up for key, unless
// an entry of another round of key is on its way up already.
func (d *Daemon) upOwn(key fenceKey, r *fenceRound) bool {
	u := &d.up
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, x := range u.own[key] {
		if x != r {
			return false
		}
	}
	if u.own == nil {
		u.own = make(map[fenceKey][]*fenceRound)
	}
	u.own[key] = append(u.own[key], r)
	return true
}

// upOwnDone ends what upOwn booked.
func (d *Daemon) upOwnDone(key fenceKey, r *fenceRound) {
	u := &d.up
	u.mu.Lock()
	defer u.mu.Unlock()
	list := u.own[key]
	if i := slices.Index(list, r); i >= 0 {
		list = slices.Delete(list, i, i+1)
	}
	if len(list) == 0 {
		delete(u.own, key)
		return
	}
	u.own[key] = list
}
