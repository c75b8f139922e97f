package master

import (
	"context"
	"fmt"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// Failure detection. The master pings every daemon (but the one inside its
// own process) each heartbeat interval, from one goroutine per daemon that
// never waits on the loop's work or on a write to the daemon. A ping still
// unanswered at the next tick, with nothing else heard from the daemon
// since it went out (wire.Conn.Heard), is a miss: the first makes the node suspect
// (placement skips it), an answer makes it up again, and the configured
// number of misses in a row makes it down: the master closes the
// connection and counts the node's processes as lost, exactly as when the
// connection closes by itself. Everything waiting on the node (pushes,
// launch rounds, kills, the stop) then ends at once, so no wait on a hung
// daemon lasts longer than about misses × interval.
//
// The daemon learns the interval at registration and gives the master up
// after DeadMS without a ping (lib/daemon watchdog.go).

// Heartbeat defaults: a silent daemon is declared down within
// (DefaultHeartbeatMisses+1) × DefaultHeartbeatInterval = 4 s.
const (
	DefaultHeartbeatInterval = time.Second
	DefaultHeartbeatMisses   = 3
)

// heartbeat returns the interval and the number of misses in a row that
// make a node down, with the defaults applied.
func (m *Master) heartbeat() (time.Duration, int) {
	iv, misses := m.cfg.HeartbeatInterval, m.cfg.HeartbeatMisses
	if iv <= 0 {
		iv = DefaultHeartbeatInterval
	}
	if misses <= 0 {
		misses = DefaultHeartbeatMisses
	}
	return iv, misses
}

// deadAfter is the silence after which a daemon gives its master up: one
// interval more than the master allows the daemon, so that on a slow link
// the master declares the node down before the daemon leaves.
func (m *Master) deadAfter() time.Duration {
	iv, misses := m.heartbeat()
	return time.Duration(misses+1) * iv
}

// pingNode runs the heartbeat of node idx on connection c until c closes,
// the DVM stops or the node is declared down.
func (m *Master) pingNode(idx int, c *wire.Conn) {
	iv, limit := m.heartbeat()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	answered := make(chan error, 1)
	outstanding := 0
	misses := 0
	var seq uint64
	tick := time.NewTicker(iv)
	defer tick.Stop()
	lastTick := time.Now()
	var sent time.Time // when the last ping went out
	report := func(st, why string) bool {
		return m.post(func(s *state) { s.nodeHeartbeat(idx, c, st, why) })
	}
	for {
		select {
		case <-c.Done():
			return
		case <-m.loopDone:
			return
		case err := <-answered:
			outstanding--
			if err != nil {
				continue // the connection is closing (Done follows), or the ping timed out: counted at the ticks
			}
			if misses > 0 && !report(wire.NodeUp, "answers heartbeats again") {
				return
			}
			misses = 0
		case now := <-tick.C:
			// A tick handled late means this process did not run (an
			// overloaded or suspended host): it cannot blame the daemon
			// for that time, so the tick counts no miss.
			starved := now.Sub(lastTick) > 2*iv || time.Since(now) > iv
			lastTick = now
			switch {
			case outstanding == 0 || starved:
			case c.Heard().After(sent):
				// Any frame of the daemon since the last ping is a sign
				// of life, even if the reply is still unread behind an
				// event this side is slow to take (wire.Conn.Heard).
				if misses > 0 && !report(wire.NodeUp, "heard from again") {
					return
				}
				misses = 0
			default:
				misses++
				switch {
				case misses >= limit:
					report(wire.NodeDown, fmt.Sprintf("nothing heard for %d heartbeats in a row (interval %v)", misses, iv))
					return
				case misses == 1:
					if !report(wire.NodeSuspect, fmt.Sprintf("no answer to a heartbeat for %v", iv)) {
						return
					}
				}
			}
			// A ping every tick, answered or not: the daemon's watchdog
			// waits for them, and a slow reply here is no reason to let
			// it think the master is gone. A silent daemon has at most
			// limit outstanding before it is down; a live one's replies
			// are only late.
			outstanding++
			seq++
			sent = time.Now()
			ping := &wire.Ping{Seq: seq, Time: sent.UnixNano()}
			// Its own goroutine: a write to a hung daemon can block until
			// the connection is closed, and the ticks must go on.
			go func() {
				err := c.Call(ctx, wire.KindPing, ping, nil)
				select {
				case answered <- err:
				case <-ctx.Done(): // the heartbeat ended
				}
			}()
		}
	}
}

// nodeHeartbeat applies what the heartbeat of connection c found out
// about node idx; news about an older connection of the node is stale.
func (s *state) nodeHeartbeat(idx int, c *wire.Conn, st, why string) {
	n := s.nodes[idx]
	if n.conn != c || !n.up {
		return
	}
	switch st {
	case wire.NodeSuspect:
		if n.suspect {
			return
		}
		n.suspect = true
		s.log.Warn("master: node suspect", "node", n.name, "why", why)
		s.publish(wire.Event{Kind: wire.EvNodeSuspect, Node: n.name, Msg: why})
		s.release(n) // rounds in flight stop waiting for it
	case wire.NodeUp:
		if !n.suspect {
			return
		}
		n.suspect = false
		s.log.Info("master: node up again", "node", n.name)
		s.publish(wire.Event{Kind: wire.EvNodeUp, Node: n.name, Msg: why})
	case wire.NodeDown:
		s.declareDown(n, wire.Errorf(wire.ErrTimeout, "%s", why))
	}
}
