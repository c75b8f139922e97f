package master

import (
	"log/slog"

	"github.com/dynrt/dynrt/wire"
)

// outqLimit bounds what the master buffers for one tool connection. Past
// it, output lines are dropped (and counted) and event subscriptions are
// dropped, so a tool that stops reading cannot make the master grow.
const outqLimit = 1 << 16

// peer is the loop's record of a tool connection: its subscriptions, the
// jobs it launched (killed if it goes away) and its event queue.
type peer struct {
	c       *wire.Conn
	log     *slog.Logger
	q       *outq
	subs    map[uint64]*sub
	jobs    map[*job]struct{}
	lastSeq uint64 // last bus event queued, so several subscriptions get it once
	dropped int    // output lines dropped because the queue was full
	closed  bool
}

// peerOf returns the record of tool connection c, creating it. A
// connection that has already closed gets ErrClosed: its close
// notification may have been handled before this request.
func (s *state) peerOf(c *wire.Conn) (*peer, error) {
	if p := s.peers[c]; p != nil {
		return p, nil
	}
	if err := c.Err(); err != nil {
		return nil, err
	}
	p := &peer{c: c, log: s.log, subs: make(map[uint64]*sub), jobs: make(map[*job]struct{})}
	s.peers[c] = p
	return p, nil
}

// queue returns the peer's event queue, starting its writer on first use.
func (p *peer) queue() *outq {
	if p.q == nil {
		p.q = newOutq(p.c, outqLimit, p.log)
	}
	return p.q
}

// connClosed cleans up after a connection of any role went away.
func (s *state) connClosed(c *wire.Conn, why error) {
	for _, n := range s.nodes {
		if n.conn == c {
			s.nodeLost(n, why)
		}
	}
	p := s.peers[c]
	if p == nil {
		return
	}
	p.closed = true
	delete(s.peers, c)
	for _, sb := range p.subs {
		s.unsubscribe(sb)
	}
	for j := range p.jobs {
		s.killJob(j, killOrder{reason: reasonLost})
	}
	if p.q != nil {
		p.q.close()
	}
}
