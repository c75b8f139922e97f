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
		if q := s.rc.queues[n.idx]; q != nil && len(q.items) > 0 {
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
func (s *state) callRound(calls []*nodeCall, then func(s *state)) {
	m := s.m
	if len(calls) == 0 {
		go m.post(then) // later, as if answered: callers book other things first
		return
	}
	left := len(calls)
	for _, c := range calls {
		var resp any
		if c.kind == wire.KindNodeLaunch {
			resp = &c.rep
		}
		s.sendNode(s.nodes[c.node], outMsg{kind: c.kind, body: c.body, resp: resp, done: func(err error) {
			m.post(func(s *state) {
				c.err = err
				if left--; left == 0 {
					then(s)
				}
			})
		}})
	}
}
