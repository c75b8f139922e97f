package master

import (
	"context"
	"sync"

	"github.com/dynrt/dynrt/wire"
)

// Ordered sends. Every request the loop makes of a daemon takes effect in
// the order the loop made it: the loop hands it to the node's nodeOut,
// whose writer goroutine writes the frames in that order (wire.Conn.Start)
// and waits for the replies side by side, and the daemon applies what it
// receives in arrival order (its cache updates and the registration part
// of node.launch run on its reader goroutine). A set pushed after a
// launch therefore never reaches a daemon before the job it belongs to
// (issue 11 item 14). The push queues of psetop.go sit in front: a request
// made while pushes wait there waits behind them (sendNode).

// outMsg is one request to a daemon.
type outMsg struct {
	kind string
	body any
	resp any             // reply body is decoded into it; nil = ignored
	done func(err error) // runs on a goroutine (never the loop) once answered or failed; nil = failures logged
}

// nodeOut writes the requests of one daemon connection in order.
type nodeOut struct {
	m *Master
	c *wire.Conn

	mu     sync.Mutex
	items  []outMsg
	closed bool
	wake   chan struct{} // capacity 1
}

func newNodeOut(m *Master, c *wire.Conn) *nodeOut {
	o := &nodeOut{m: m, c: c, wake: make(chan struct{}, 1)}
	go o.run()
	return o
}

// send queues msg; it never blocks.
func (o *nodeOut) send(msg outMsg) {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		go o.finish(msg, o.closedErr(msg.kind))
		return
	}
	o.items = append(o.items, msg)
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

func (o *nodeOut) closedErr(kind string) error {
	return wire.Errorf(wire.ErrClosed, "master: %s to daemon %s: connection closed: %v", kind, o.c.Peer().Name, o.c.Err())
}

func (o *nodeOut) run() {
	var batch []outMsg
	for {
		o.mu.Lock()
		batch, o.items = o.items, batch[:0]
		o.mu.Unlock()
		for i, msg := range batch {
			// Start returns once the frame is written: a write blocked on a
			// hung daemon holds up the later ones, as order requires, until
			// the heartbeat closes the connection.
			wait, err := o.c.Start(msg.kind, msg.body)
			if err != nil {
				o.finish(msg, err)
			} else {
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), o.m.callTimeout)
					defer cancel()
					o.finish(msg, wait(ctx, msg.resp))
				}()
			}
			batch[i] = outMsg{}
		}
		select {
		case <-o.wake:
		case <-o.c.Done():
			o.mu.Lock()
			o.closed = true
			rest := o.items
			o.items = nil
			o.mu.Unlock()
			for _, msg := range rest {
				o.finish(msg, o.closedErr(msg.kind))
			}
			return
		}
	}
}

func (o *nodeOut) finish(msg outMsg, err error) {
	if msg.done != nil {
		msg.done(err)
		return
	}
	if err != nil && o.c.Err() == nil {
		o.m.log.Warn("master: request to daemon failed", "kind", msg.kind, "daemon", o.c.Peer().Name, "err", err)
	}
}

// sendNode sends msg to the daemon of n after everything the loop sent it
// before, pushes still queued included. A node that is not up fails msg.
func (s *state) sendNode(n *node, msg outMsg) {
	if s.rc != nil && n.up {
		if q := s.rc.queues[n.idx]; q != nil && (len(q.items) > 0 || q.relay != nil) {
			q.items = append(q.items, &pushItem{kind: msg.kind, direct: &msg})
			return
		}
	}
	sendNow(n, msg)
}

// sendNow hands msg to the node's sender, or fails it if the node is down.
func sendNow(n *node, msg outMsg) {
	if !n.up {
		if msg.done != nil {
			go msg.done(wire.Errorf(wire.ErrClosed, "master: node %s is down", n.name))
		}
		return
	}
	n.out.send(msg)
}

// callRound sends each call to its node (in order with everything else
// sent there) and runs then on the loop once all are answered or failed.
// A call that starts no processes (node.jobdata) is not waited for once
// its node is suspect (release): it still reaches the daemon in order.
func (s *state) callRound(calls []*nodeCall, then func(s *state)) {
	m := s.m
	left := len(calls)
	finished := func(s *state) {
		if left--; left == 0 {
			then(s)
		}
	}
	for _, c := range calls {
		n := s.nodes[c.node]
		answered := false
		var drop func()
		answer := func(err error) bool {
			if answered {
				return false
			}
			answered = true
			if drop != nil {
				drop()
			}
			c.err = err
			return true
		}
		var resp any
		if c.kind == wire.KindNodeLaunch {
			resp = &c.rep
		}
		s.sendNode(n, outMsg{kind: c.kind, body: c.body, resp: resp, done: func(err error) {
			m.post(func(s *state) {
				if answer(err) {
					finished(s)
				}
			})
		}})
		switch {
		case c.kind == wire.KindNodeLaunch || !n.up:
		case n.suspect:
			answer(nil)
			left--
		default:
			drop = s.hold(n, func() {
				if answer(nil) {
					finished(s)
				}
			})
		}
	}
	if left == 0 {
		go m.post(then) // later, as if answered: callers book other things first
	}
}

// hold registers release to run if node n becomes suspect; drop forgets it.
func (s *state) hold(n *node, release func()) (drop func()) {
	if n.holds == nil {
		n.holds = make(map[uint64]func())
	}
	n.holdSeq++
	id, holds := n.holdSeq, n.holds
	holds[id] = release
	return func() { delete(holds, id) }
}
