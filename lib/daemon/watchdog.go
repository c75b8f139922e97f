package daemon

import (
	"context"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// The master's heartbeat, seen from the daemon: the master pings every
// interval it gave at registration (lib/master heartbeat.go). A daemon
// that hears nothing (no ping, no other frame) for the silence it was given (a cut link, a hung or
// stopped master) takes the master for lost: Run kills every process it
// started and returns, so that nothing of the DVM runs on without it.

// handleHeartbeat answers the master's ping and notes when it came. It is
// served inline, so a daemon busy forking still answers.
func (d *Daemon) handleHeartbeat(_ context.Context, _ *wire.Request, p *wire.Ping) (any, error) {
	d.lastPing.Store(time.Now().UnixNano())
	return p, nil
}

// watchMaster sends an error on lost once no ping has arrived for dead,
// looking every interval (or more often, for short timeouts).
func (d *Daemon) watchMaster(ctx context.Context, interval, dead time.Duration, lost chan<- error) {
	d.lastPing.Store(time.Now().UnixNano()) // registration counts as a sign of life
	step := min(max(interval, time.Millisecond), dead/4)
	t := time.NewTicker(step)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			// A tick handled late means this process did not run: the
			// silence is ours, not the master's; start counting afresh.
			if now.Sub(last) > 2*step || time.Since(now) > step {
				d.lastPing.Store(max(d.lastPing.Load(), time.Now().Add(-step).UnixNano()))
			}
			last = now
			// Any frame of the master counts, read or still waiting
			// behind work of ours (wire.Conn.Heard).
			heard := time.Unix(0, d.lastPing.Load())
			if h := d.master.Heard(); h.After(heard) {
				heard = h
			}
			if quiet := now.Sub(heard); quiet > dead {
				lost <- wire.Errorf(wire.ErrTimeout, "daemon %s: lost the master: no heartbeat for %v (limit %v)", d.node, quiet.Round(time.Millisecond), dead)
				return
			}
		}
	}
}
