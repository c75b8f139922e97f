package master

import (
	"context"
	"errors"
	"slices"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/dynrt/dynrt/wire"
)

// The tree of daemons (Config.TreeRadix, wire.NodeRelay). A push that goes
// alike to more daemons than the radix is written to the heads of radix
// parts of them, and each head passes it on down its part: the master's
// part of a round is radix writes and reads instead of one per daemon.
// The tree only carries what the push queues would have sent at once: a
// daemon whose queue is busy, a suspect one, or one without a relay
// address gets its push as before. The tree is a shortcut, never the only
// path: a daemon the relay did not reach (a daemon on the way failed, hung
// or was replaced) gets the same relay from the master over its own
// connection, and its daemon applies each relay number once.

// relayFlight is one part of a relayed push: nodes[0] got it from the
// master, the others from the daemons above them.
type relayFlight struct {
	seq    uint64
	job    string           // the job whose nodes it spans (NodeRelay.Job), if any
	prev   map[*node]uint64 // an event: the Seq each node got before it (NodeRelay.Prev)
	base   int              // index of nodes[0] among all the nodes of the relay
	kind   string
	raw    msgpack.RawMessage
	radix  int
	nodes  []*node
	conns  []*wire.Conn // each node's connection when it was sent: a rejoined daemon is not blamed for its predecessor
	settle func(s *state, i int, err error)
	got    func(s *state, rep *wire.NodeRelayReply) // each answer, before the nodes it settles (a launch's Started); may be nil
	done   []bool                                   // settled: answered through the tree, or directly
	resent []bool                                   // sent again directly; that answer settles it
	left   int                                      // nodes not settled yet; at 0 the flight leaves rcState.flights
}

// relayReady reports whether n's push may go down the tree now: nothing is
// queued or in flight before it, and its daemon takes relays.
func (s *state) relayReady(n *node) bool {
	if !n.up || n.suspect || n.relay == "" {
		return false
	}
	q := s.rcs().queues[n.idx]
	return q == nil || (!q.busy && len(q.items) == 0)
}

// relayPush sends the pushes items (one per node of nodes, all with the
// body sh) down the tree. It returns false, having done nothing, if the
// body cannot be encoded: the caller queues them as usual.
func (s *state) relayPush(kind string, sh *sharedBody, nodes []*node, items []*pushItem) bool {
	raw, err := sh.bytes()
	if err != nil {
		return false
	}
	st := s.rcs()
	for i, n := range nodes {
		q := s.queueOf(n)
		q.busy, q.flight = true, []*pushItem{items[i]}
	}
	st.relaySeq++
	seq, j := st.relaySeq, items[0].j
	s.relay(seq, s.m.cfg.TreeRadix, j.ns, kind, raw, nodes, func(s *state, f *relayFlight, i int, err error) {
		n := f.nodes[i]
		q := s.rc.queues[n.idx]
		q.busy, q.flight, q.relay = false, nil, nil
		if err != nil && n.up && n.conn == f.conns[i] && !j.done {
			s.declareDown(n, wire.Errorf(wire.ErrInternal, "its daemon failed a relayed %s of job %s: %v", kind, j.ns, err))
		}
		items[f.base+i].ack()
		s.pump(n.idx)
	}, s.markRelay, nil, nil)
	return true
}

// markRelay makes the node at i of f hold back what the loop sends it
// next until f has settled there (sendNode): a relayed push or launch.
func (s *state) markRelay(f *relayFlight, i int) {
	s.queueOf(f.nodes[i]).relay = f
}

// relay sends the relay seq of kind with body raw to nodes, cut into
// parts by radix, and calls settled once per node when it has applied
// it or failed. mark, if not nil, is called for each node's place in its
// flight before anything is sent; got, if not nil, with every answer (a
// head's for its part, a node's own when sent to it directly) before the
// nodes it answers for are settled.
func (s *state) relay(seq uint64, radix int, job, kind string, raw msgpack.RawMessage, nodes []*node,
	settled func(s *state, f *relayFlight, i int, err error), mark func(f *relayFlight, i int),
	got func(s *state, rep *wire.NodeRelayReply), prev map[*node]uint64) {
	wait := (s.m.callTimeout * 3 / 4).Milliseconds() // the head answers before the master's call gives up
	var flights []*relayFlight
	for _, p := range wire.RelayParts(len(nodes), radix) {
		part := nodes[p[0]:p[1]]
		f := &relayFlight{seq: seq, job: job, prev: prev, base: p[0], kind: kind, raw: raw, radix: radix, nodes: part,
			conns: make([]*wire.Conn, len(part)), done: make([]bool, len(part)), resent: make([]bool, len(part)), got: got,
			left: len(part)}
		f.settle = func(s *state, i int, err error) { settled(s, f, i, err) }
		for i, n := range part {
			f.conns[i] = n.conn
			if mark != nil {
				mark(f, i)
			}
		}
		flights = append(flights, f)
	}
	m := s.m
	st := s.rcs()
	if st.flights == nil {
		st.flights = make(map[*relayFlight]struct{})
	}
	for _, f := range flights {
		st.flights[f] = struct{}{}
		st.treeSent++
		below := make([]wire.RelayHop, 0, len(f.nodes)-1)
		for _, n := range f.nodes[1:] {
			below = append(below, wire.RelayHop{Node: n.name, Addr: n.relay, ID: n.relayID, Prev: prev[n]})
		}
		head := f.nodes[0]
		rep := new(wire.NodeRelayReply)
		sendNow(head, outMsg{kind: wire.KindNodeRelay, resp: rep,
			body: &wire.NodeRelay{Seq: seq, To: head.relayID, Kind: kind, Body: wire.Raw(raw), Radix: uint32(radix), Below: below, WaitMS: wait, Job: job, Prev: prev[head]},
			done: func(err error) {
				m.post(func(s *state) {
					if err == nil && f.got != nil {
						f.got(s, rep)
					}
					s.relayAnswered(f, rep, err)
				})
			}})
	}
}

// relayAnswered books the answer of a flight's head for its whole part:
// the nodes it lists as not reached get the relay again directly.
func (s *state) relayAnswered(f *relayFlight, rep *wire.NodeRelayReply, err error) {
	var failed map[string]wire.RelayFailure
	if err == nil && len(rep.Failed) > 0 {
		failed = make(map[string]wire.RelayFailure, len(rep.Failed))
		for _, fl := range rep.Failed {
			failed[fl.Node] = fl
		}
	}
	for i, n := range f.nodes {
		if f.done[i] || f.resent[i] {
			continue
		}
		if err != nil {
			s.resendDirect(f, i) // the head did not answer for any of them
			continue
		}
		fl, bad := failed[n.name]
		switch {
		case !bad:
			s.settleRelay(f, i, nil)
		case fl.Unreached:
			s.resendDirect(f, i)
		default:
			s.settleRelay(f, i, fl.Err)
		}
	}
}

// resendDirect sends node i of f its relay over its own connection.
func (s *state) resendDirect(f *relayFlight, i int) {
	f.resent[i] = true
	s.rcs().treeResent++
	n := f.nodes[i]
	if !n.up || n.conn != f.conns[i] {
		s.settleRelay(f, i, nil) // gone or replaced: a rejoined daemon was brought up to date (resync)
		return
	}
	m := s.m
	rep := new(wire.NodeRelayReply)
	sendNow(n, outMsg{kind: wire.KindNodeRelay, resp: rep,
		body: &wire.NodeRelay{Seq: f.seq, To: n.relayID, Kind: f.kind, Body: wire.Raw(f.raw), Job: f.job, Prev: f.prev[n]},
		done: func(err error) {
			m.post(func(s *state) {
				if err == nil && f.got != nil {
					f.got(s, rep)
				}
				if err == nil && len(rep.Failed) > 0 {
					if fl := rep.Failed[0]; fl.Err != nil {
						err = fl.Err
					} else {
						err = errors.New("not applied")
					}
				}
				s.settleRelay(f, i, err)
			})
		}})
}

func (s *state) settleRelay(f *relayFlight, i int, err error) {
	if f.done[i] {
		return
	}
	f.done[i] = true
	if f.left--; f.left == 0 {
		delete(s.rcs().flights, f)
	}
	if err != nil && wire.CodeOf(err) == wire.CodeClosed && !f.nodes[i].up {
		err = nil // it went down meanwhile: nothing to blame it for
	}
	f.settle(s, i, err)
}

// relayStalled sends each relay in flight directly to the other nodes of
// node n's part, n having become suspect: the nodes below n may not have
// got it, and the others' answers travel up through the part's head, which
// waits for n's branch as long as the daemons above n wait for n. A node
// that has applied the relay answers a direct copy at once (a relay is
// applied once per number; a launch answers what it started). This holds
// for every flight n is in: a push's (one per node at a time, its queue's
// relay), a launch's, and a fence's data or a ping round, which do not
// queue.
func (s *state) relayStalled(n *node) {
	if s.rc == nil {
		return
	}
	for f := range s.rc.flights {
		at := slices.Index(f.nodes, n)
		if at < 0 || f.done[at] {
			continue
		}
		for i := range f.nodes {
			if i != at && !f.done[i] && !f.resent[i] {
				s.resendDirect(f, i)
			}
		}
	}
}

// relayGone settles n's place in every relay in flight, n having gone
// down: nothing will answer for it (its head may wait for it until the
// relay's own timeout), and a launch must learn now that its ranks there
// did not start.
func (s *state) relayGone(n *node) {
	if s.rc == nil {
		return
	}
	for f := range s.rc.flights {
		if at := slices.Index(f.nodes, n); at >= 0 && !f.done[at] {
			s.settleRelay(f, at, wire.Errorf(wire.ErrClosed, "master: node %s went down", n.name))
		}
	}
}

// treeState is the tree's radix and use since the start (dvm status);
// nil without a tree.
func (s *state) treeState() *wire.TreeState {
	r := s.m.cfg.TreeRadix
	if r <= 0 {
		return nil
	}
	st := s.rcs()
	return &wire.TreeState{Radix: uint32(r), Relays: st.treeSent, Resends: st.treeResent, Fences: s.m.sess.treeFences, Up: s.m.sess.fenceUp, UpParts: s.m.sess.fenceUpParts, Events: s.m.sess.treeEvents}
}

// TreeStats returns how the tree has been used (tests, benchmarks); the
// zero value without a tree.
func (m *Master) TreeStats(ctx context.Context) (wire.TreeState, error) {
	return ask(ctx, m, func(s *state, reply func(wire.TreeState, error)) {
		var ts wire.TreeState
		if t := s.treeState(); t != nil {
			ts = *t
		}
		reply(ts, nil)
	})
}
