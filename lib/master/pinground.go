package master

import (
	"context"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// PingRound sends a ping to every daemon that is up, along the path a push
// round takes (the loop, each node's ordered sender, the daemon's handler,
// the answer back on the loop), and returns how long it took until every
// daemon had answered, and how many did. It is the floor under any round
// to every daemon on the machine it runs on: scripts/scalebench measures
// it beside the rounds of a change (docs/scale.md). With radix > 0 the
// ping goes down a tree of that radix, as a push does (tree.go), to the
// daemons that take relays, and directly to the others.
func (m *Master) PingRound(ctx context.Context, radix int) (time.Duration, int, error) {
	type result struct {
		took time.Duration
		n    int
		err  error
	}
	res, err := ask(ctx, m, func(s *state, reply func(result, error)) {
		t0 := time.Now()
		left, n := 1, 0
		var first error
		finish := func(_ *state, err error) {
			if err != nil && first == nil {
				first = err
			}
			if left--; left == 0 {
				reply(result{time.Since(t0), n, first}, nil)
			}
		}
		mm := s.m
		var tree []*node
		for _, nd := range s.nodes {
			if !nd.up {
				continue
			}
			left++
			n++
			if radix > 0 && nd.relay != "" && !nd.suspect {
				tree = append(tree, nd)
				continue
			}
			s.sendNode(nd, outMsg{kind: wire.KindPing, body: &wire.Ping{Seq: 1, Time: t0.UnixNano()}, done: func(err error) {
				mm.post(func(s *state) { finish(s, err) })
			}})
		}
		if len(tree) > 0 {
			raw, err := wire.Marshal(&wire.Ping{Seq: 1, Time: t0.UnixNano()})
			if err != nil {
				reply(result{}, err)
				return
			}
			// Seq 0: a ping is applied whenever it comes, so it never
			// hides a push's relay number from a daemon.
			s.relay(0, radix, "", wire.KindPing, raw, tree, func(s *state, _ *relayFlight, _ int, err error) { finish(s, err) }, nil, nil, nil)
		}
		finish(s, nil)
	})
	if err != nil {
		return 0, 0, err
	}
	return res.took, res.n, res.err
}
