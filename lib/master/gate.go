package master

import (
	"context"

	"github.com/dynrt/dynrt/lib/launcher"
	"github.com/dynrt/dynrt/wire"
)

// gate bounds how many daemons are connecting at once: a daemon enters
// before its ssh client starts and leaves once it has registered, its
// process has ended or the DVM stops. A nil gate admits everyone.
type gate chan struct{}

func newGate(max int) gate {
	switch {
	case max < 0:
		return nil
	case max == 0:
		max = DefaultMaxConnecting
	}
	return make(gate, max)
}

// gateFor is the gate daemons of starter go through: the DVM's for ssh
// (each is an ssh connection to a host's sshd), none for the others
// (local forks; join and srun start nothing per node here).
func (m *Master) gateFor(starter launcher.Starter) gate {
	if starter.Kind() == launcher.SSH {
		return m.connecting
	}
	return nil
}

// enter waits for room, or ctx's end.
func (g gate) enter(ctx context.Context) error {
	if g == nil {
		return nil
	}
	select {
	case g <- struct{}{}:
		return nil
	case <-ctx.Done():
		return wire.Errorf(wire.ErrCanceled, "master: start the daemons: %w", ctx.Err())
	}
}

func (g gate) leave() {
	if g != nil {
		<-g
	}
}

// leaveWhen leaves once up is closed (the daemon registered), the
// daemon's process has ended or stop is closed.
func (g gate) leaveWhen(up <-chan struct{}, d *launcher.Daemon, stop <-chan struct{}) {
	if g == nil {
		return
	}
	select {
	case <-up:
	case <-d.Done():
	case <-stop:
	}
	g.leave()
}
