package master

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/wire"
)

// Process set operations (phase 2 of a resource change, thesis §6.3;
// DESIGN §4) and the ordered pushes to the daemons they and the resource
// changes need.
//
// An operation runs on the loop, so operations are serialised; the result
// and every set the recursion of Definition 4 changed are pushed to the
// daemons that hold the job (node.hasJob), and the requester is answered
// once all of them have acked: a process that learns a new set from the
// reply can use it with any daemon (one that does not hold the job asks
// the master).

func (m *Master) handlePsetOpTool(ctx context.Context, _ *wire.Request, b *wire.PsetOpReq) (any, error) {
	return ask(ctx, m, func(s *state, reply func(*wire.PsetOpReply, error)) { s.psetOp(b, false, reply) })
}

// handlePsetOpApp serves pset.op relayed by a daemon: Job and Rank are the
// caller's, which resolves mpi://SELF and mpi://SHARED operands.
func (m *Master) handlePsetOpApp(ctx context.Context, _ *wire.Request, b *wire.PsetOpReq) (any, error) {
	return ask(ctx, m, func(s *state, reply func(*wire.PsetOpReply, error)) { s.psetOp(b, true, reply) })
}

func (s *state) psetOp(b *wire.PsetOpReq, app bool, reply func(*wire.PsetOpReply, error)) {
	j, err := s.rcJob(b.Job)
	if err != nil {
		reply(nil, err)
		return
	}
	if j.done {
		reply(nil, wire.Errorf(wire.ErrState, "master: job %s (%s) has ended", j.app, j.ns))
		return
	}
	if strings.EqualFold(b.Op, wire.OpSplit) {
		s.psetSplit(j, b, app, reply)
		return
	}
	op, err := pset.ParseOp(b.Op)
	if err != nil {
		reply(nil, err)
		return
	}
	if b.Mode != "" || b.K != 0 || len(b.Lists) > 0 || len(b.Names) > 0 {
		reply(nil, wire.Errorf(wire.ErrInvalid, "%s: mode, k, lists and names are fields of a split; %s takes p1, p2 and the target", op, op))
		return
	}
	if op != pset.OpNull {
		if err := s.rcAbortedDelta(j, b.P1, b.P2); err != nil {
			reply(nil, err)
			return
		}
	}
	req := pset.OpRequest{Op: op, P1: b.P1, P2: b.P2, Target: b.Target, Active: b.Active, Sched: schedOf(b.Hints), Caller: caller(j, b, app)}
	res, err := j.reg.ApplyOp(req)
	if err != nil {
		reply(nil, err)
		return
	}
	names := []string{res.Result.Name}
	for _, a := range res.Affected {
		names = append(names, a.Name)
	}
	defs, err := s.definedSets(j, names)
	if err != nil {
		reply(nil, err)
		return
	}
	rep := &wire.PsetOpReply{Name: defs[0].Name, Version: defs[0].Version, Size: defs[0].Size, Members: defs[0].Members}
	for _, d := range defs[1:] {
		rep.Updated = append(rep.Updated, wire.PsetRef{Name: d.Name, Version: d.Version})
	}
	s.pushSets(j, defs, nil, func() { reply(rep, nil) })
}

// psetSplit serves pset.op "split": the parts are stored in one step,
// announced and pushed to every daemon before the reply, like the result
// of the other operations. A split by node takes the members' nodes from
// the job's placement (the registry knows no nodes); the parts follow the
// node order of the DVM.
func (s *state) psetSplit(j *job, b *wire.PsetOpReq, app bool, reply func(*wire.PsetOpReply, error)) {
	mode, err := pset.ParseSplitMode(b.Mode)
	if err != nil {
		reply(nil, err)
		return
	}
	if b.P2 != "" {
		reply(nil, wire.Errorf(wire.ErrInvalid, "split %s: takes one set (p1), not a second operand (p2 %s)", b.P1, b.P2))
		return
	}
	req := pset.SplitRequest{Set: b.P1, Mode: mode, Parts: int(b.K), Ranks: b.Lists, Names: b.Names, Target: b.Target,
		Active: b.Active, Sched: schedOf(b.Hints), Caller: caller(j, b, app)}
	if mode == pset.SplitByNode {
		req.Nodes = j.nodes // live ranks by node index; Split only reads it, here on the loop
	}
	res, err := j.reg.Split(req)
	if err != nil {
		reply(nil, err)
		return
	}
	names := make([]string, len(res.Parts))
	for i, p := range res.Parts {
		names[i] = p.Result.Name
	}
	defs, err := s.definedSets(j, names)
	if err != nil {
		reply(nil, err)
		return
	}
	rep := &wire.PsetOpReply{Parts: defs}
	for _, idx := range res.Nodes {
		rep.Nodes = append(rep.Nodes, s.nodes[idx].name)
	}
	s.pushSets(j, defs, nil, func() { reply(rep, nil) })
}

// schedOf turns the hints of a request into mpi_ps_sched_* attributes.
func schedOf(hints map[string]string) map[string]string {
	var sched map[string]string
	for k, v := range hints {
		if sched == nil {
			sched = make(map[string]string, len(hints))
		}
		sched[pset.SchedPrefix+k] = v
	}
	return sched
}

// caller identifies the requesting process of an application's request,
// which resolves mpi://SELF and mpi://SHARED; tools have none.
func caller(j *job, b *wire.PsetOpReq, app bool) *pset.Caller {
	if p := j.procs.at(b.Rank); app && p != nil {
		return &pset.Caller{Rank: b.Rank, NodePeers: j.nodes[p.node].Ranks()}
	}
	return nil
}

// definedSets describes the named sets as just written, with members, and
// announces each (pset.def events carry no members).
func (s *state) definedSets(j *job, names []string) ([]wire.PsetInfo, error) {
	now := time.Now().UnixNano()
	defs := make([]wire.PsetInfo, 0, len(names))
	for _, name := range names {
		def, err := setInfo(j.reg, j.ns, name, now)
		if err != nil {
			return nil, err
		}
		defs = append(defs, def)
		ev := def
		ev.Members = nil
		s.publish(wire.Event{Kind: wire.EvPsetDef, Job: j.ns, Pset: &ev})
	}
	return defs, nil
}

func (m *Master) handlePsetDelete(ctx context.Context, _ *wire.Request, b *wire.PsetDeleteReq) (any, error) {
	_, err := ask(ctx, m, func(s *state, reply func(struct{}, error)) {
		j, err := s.rcJob(b.Job)
		if err != nil {
			reply(struct{}{}, err)
			return
		}
		if err := j.reg.Delete(b.Name); err != nil {
			reply(struct{}{}, err)
			return
		}
		name := b.Name
		if n, err := pset.Parse(name); err == nil {
			name = n.String()
		}
		s.publish(wire.Event{Kind: wire.EvPsetDel, Job: j.ns, Pset: &wire.PsetInfo{Name: name, Job: j.ns}})
		s.pushSets(j, nil, []string{name}, func() { reply(struct{}{}, nil) })
	})
	return nil, err
}

// Ordered pushes. Each node has a FIFO in front of its ordered sender
// (nodeout.go): one push in flight at a time, and set pushes of the same
// job waiting behind it go out merged into one. A push round completes
// once every daemon that was up has answered (or failed); its done
// callback then runs on the loop. A daemon that fails a push (while its
// connection lives) no longer holds what the master thinks it holds: its
// node is declared down, and it must rejoin.

type pushq struct {
	busy   bool
	items  []*pushItem
	flight []*pushItem // the batch in flight while busy
	// relay is the flight of a push or launch in flight down the tree
	// (tree.go): requests wait behind it (sendNode).
	relay *relayFlight
}

type pushItem struct {
	j      *job
	kind   string
	body   any
	shared *sharedBody // body, encoded once for every node of a pushAll
	round  *pushRound
	direct *outMsg // a request sent in order behind the pushes queued before it (sendNode); j and round are nil
	acked  bool    // counted in its round
}

type pushRound struct {
	left int
	done func()
}

// ack counts the item's answer once (a suspect node's items are counted
// when it becomes suspect, and again when they are answered).
func (it *pushItem) ack() {
	if it.acked {
		return
	}
	it.acked = true
	r := it.round
	r.left--
	if r.left == 0 && r.done != nil {
		r.done()
	}
}

// pushSets sends set definitions and deletions of j to the daemons that
// hold it.
func (s *state) pushSets(j *job, defined []wire.PsetInfo, deleted []string, done func()) {
	s.pushAll(j, wire.KindPsetPush, s.setPush(j, defined, deleted), done)
}

// setPush is the next push of set definitions and deletions of j.
func (s *state) setPush(j *job, defined []wire.PsetInfo, deleted []string) *wire.PsetPush {
	st := s.rcs()
	st.psetSeq++
	keep := uint32(s.m.cfg.Limits.Normalize().HistoryVersions) // the daemons prune as the master does (rcRetain)
	return &wire.PsetPush{Seq: st.psetSeq, Job: j.ns, Defined: defined, Deleted: deleted, Keep: keep}
}

// pushAll queues one call of kind with body to every daemon that is up
// and holds j (hasJob). The round does not wait for suspect nodes
// (released): the push still reaches them, in order, if they come back.
func (s *state) pushAll(j *job, kind string, body any, done func()) {
	shared := share(body)
	s.pushAllWith(j, kind, body, func(*node) *sharedBody { return shared }, done)
}

// pushAllWith is pushAll with the body each node gets chosen by bodyFor
// (body itself is what merged pushes start from; only pset.push merges).
//
// With a tree (Config.TreeRadix), the daemons whose queues are idle and
// that get the same body get it down the tree (tree.go), when there are
// more of them than the radix.
func (s *state) pushAllWith(j *job, kind string, body any, bodyFor func(*node) *sharedBody, done func()) {
	round := &pushRound{done: done, left: 1} // held until every item is queued
	var touched []int
	type group struct {
		sh    *sharedBody
		nodes []*node
		items []*pushItem
	}
	var groups []*group // for the tree, in node order
	tree := s.m.cfg.TreeRadix > 0 && wire.Relayable(kind)
	for _, n := range s.nodes {
		if n.up && n.hasJob(j) {
			it := &pushItem{j: j, kind: kind, body: body, shared: bodyFor(n), round: round, acked: n.suspect}
			if !n.suspect {
				round.left++
			}
			if tree && it.shared != nil && s.relayReady(n) {
				i := slices.IndexFunc(groups, func(g *group) bool { return g.sh == it.shared })
				if i < 0 {
					i = len(groups)
					groups = append(groups, &group{sh: it.shared})
				}
				groups[i].nodes = append(groups[i].nodes, n)
				groups[i].items = append(groups[i].items, it)
				continue
			}
			s.queuePush(n, it)
			touched = append(touched, n.idx)
		}
	}
	for _, g := range groups {
		if len(g.nodes) > s.m.cfg.TreeRadix && s.relayPush(kind, g.sh, g.nodes, g.items) {
			continue
		}
		for i, n := range g.nodes { // too few for a tree: one each, as without one
			s.queuePush(n, g.items[i])
			touched = append(touched, n.idx)
		}
	}
	(&pushItem{round: round}).ack()
	for _, idx := range touched {
		s.pump(idx)
	}
}

// release stops the rounds in flight from waiting for node n, which has
// become suspect: its queued and in-flight pushes count as answered, and
// so do the calls of launch rounds that carry no ranks (callRound).
func (s *state) release(n *node) {
	if s.rc != nil {
		if q := s.rc.queues[n.idx]; q != nil {
			for _, it := range slices.Concat(q.flight, q.items) {
				if it.direct == nil {
					it.ack()
				}
			}
		}
	}
	s.relayStalled(n)
	holds := n.holds
	n.holds = nil
	for _, f := range holds {
		f()
	}
}

func (s *state) queuePush(n *node, it *pushItem) {
	q := s.queueOf(n)
	q.items = append(q.items, it)
}

// queueOf returns n's push queue, made on first use.
func (s *state) queueOf(n *node) *pushq {
	st := s.rcs()
	q := st.queues[n.idx]
	if q == nil {
		q = &pushq{}
		st.queues[n.idx] = q
	}
	return q
}

// resync tells the daemon of a node that has rejoined, or joined a
// running DVM, about the jobs not ended that it held before and those
// every daemon holds (hasJob): their data and the latest version of each
// of their sets, ahead of anything else the master sends it.
func (s *state) resync(n *node) {
	for _, j := range s.order {
		if !j.done && n.hasJob(j) {
			data := s.wholeJob(j, s.rcJobData(j))
			s.bringUp(j, n, &data, nil)
		}
	}
	if s.rc != nil && s.rc.queues[n.idx] != nil {
		s.pump(n.idx)
	}
}

// wholeJob is data with the latest version of each of j's sets: what a
// daemon that is to hold j gets first (bringUp).
func (s *state) wholeJob(j *job, data wire.JobData) wire.JobData {
	now := time.Now().UnixNano()
	push := &wire.PsetPush{Job: j.ns}
	for _, in := range j.reg.List() {
		def, err := setInfo(j.reg, j.ns, in.Name, now)
		if err != nil {
			s.log.Error("master: cannot describe a set for a daemon that is to hold its job", "job", j.ns, "set", in.Name, "err", err)
			continue
		}
		push.Defined = append(push.Defined, def)
	}
	data.Psets = push
	return data
}

// bringUp queues data (wholeJob; shared, if not nil, is its encoding) for
// n's daemon. From then on n holds j, and every push of j goes to it too,
// in order behind this one. The caller pumps.
func (s *state) bringUp(j *job, n *node, data *wire.JobData, shared *sharedBody) {
	s.queuePush(n, &pushItem{j: j, kind: wire.KindNodeJobData, body: data, shared: shared, round: &pushRound{left: 1}})
	n.sentJobData(j.ns, data.Gen)
}

// bringUpNodes makes every node in idxs that is up hold j before the
// pushes of a change that places processes there (an ADD, a REPLACE): the
// job's data as last pushed (so that the change's delta applies to it) and
// its sets, described and encoded once for all of them (a job that grows
// from one node onto a thousand would otherwise cost a thousand encodings
// of a thousand nodes' data). A node that holds j already is left alone.
func (s *state) bringUpNodes(j *job, idxs []int) {
	var data *wire.JobData
	var shared *sharedBody
	for _, idx := range idxs {
		n := s.nodes[idx]
		if !n.up || n.hasJob(j) {
			continue
		}
		if data == nil {
			var d wire.JobData
			if j.pushed != nil && j.pushed.Gen == j.gen {
				d = s.wholeJob(j, *j.pushed)
			} else {
				d = s.wholeJob(j, s.rcJobData(j))
			}
			data, shared = &d, share(&d)
		}
		s.bringUp(j, n, data, shared)
		s.pump(idx)
	}
}

// pump sends the next push of node idx if none is in flight.
func (s *state) pump(idx int) {
	q := s.rc.queues[idx]
	n := s.nodes[idx]
	for !q.busy && len(q.items) > 0 {
		first := q.items[0]
		q.items = q.items[1:]
		if first.direct != nil {
			sendNow(n, *first.direct) // the queue is drained up to it: straight to the sender (sendNode would queue it again)
			continue
		}
		batch := []*pushItem{first}
		body := first.body
		if pp, ok := body.(*wire.PsetPush); ok {
			merged := *pp
			for len(q.items) > 0 && q.items[0].kind == wire.KindPsetPush && q.items[0].j == first.j {
				next := q.items[0].body.(*wire.PsetPush)
				merged.Seq = next.Seq
				merged.Defined = append(merged.Defined[:len(merged.Defined):len(merged.Defined)], next.Defined...)
				merged.Deleted = append(merged.Deleted[:len(merged.Deleted):len(merged.Deleted)], next.Deleted...)
				batch = append(batch, q.items[0])
				q.items = q.items[1:]
			}
			body = &merged
		}
		if len(batch) == 1 && first.shared != nil {
			body = first.shared
		}
		if !n.up || first.j.done {
			// Nobody to tell, or the daemons dropped the job already (a
			// late push would bring it back).
			for _, it := range batch {
				it.ack()
			}
			continue
		}
		q.busy, q.flight = true, batch
		conn, kind, j, m := n.conn, first.kind, first.j, s.m
		n.out.send(outMsg{kind: kind, body: body, done: func(err error) {
			m.post(func(s *state) {
				q.busy, q.flight = false, nil
				if err != nil && n.conn == conn && !j.done {
					s.declareDown(n, wire.Errorf(wire.ErrInternal, "its daemon failed a %s of job %s: %v", kind, j.ns, err))
				}
				for _, it := range batch {
					it.ack()
				}
				s.pump(idx)
			})
		}})
	}
}

// dropPushes empties the push queue of a node that went down: its pushes
// count as answered, the requests queued behind them fail.
func (s *state) dropPushes(n *node) {
	if s.rc == nil || s.rc.queues[n.idx] == nil {
		return
	}
	q := s.rc.queues[n.idx]
	items := q.items
	q.items = nil
	for _, it := range items {
		if it.direct != nil {
			sendNow(n, *it.direct) // fails it: the node is down
			continue
		}
		it.ack()
	}
}
