package daemon

import (
	"context"
	"fmt"
	"net"
	"syscall"

	"github.com/dynrt/dynrt/lib/proc"
)

// Process is a started process as the daemon handles it: *proc.Proc for a
// forked one, a simulated process on a simulated node (lib/simnode).
type Process interface {
	Pid() int
	// Signal signals the process (its group, for a forked one);
	// proc.ErrDone once it has been reaped.
	Signal(sig syscall.Signal) error
	// Done is closed once the process has ended and its output has been
	// delivered.
	Done() <-chan struct{}
}

// Spawner starts the processes of a node. The default forks them
// (lib/proc); a simulated node runs them as Go code, so that one host can
// run the daemons of a thousand nodes with their real code and protocol
// (docs/scale.md).
type Spawner interface {
	// Start starts the process of spec, named name in errors. exited is
	// called once, from another goroutine, after the process has ended and
	// its output has been delivered. Errors carry the wire codes of
	// proc.Start.
	Start(ctx context.Context, name string, spec proc.Spec, exited func(Process, proc.ExitStatus)) (Process, error)
}

// ClientListener is a Spawner whose processes reach the daemon through a
// listener of its own (in memory, for simulated processes): the daemon
// serves its clients there too. Such a spawner's processes are not forked,
// so the daemon starts no guard process for them.
type ClientListener interface {
	Spawner
	ClientListener() net.Listener
}

// forkSpawner forks and execs (lib/proc).
type forkSpawner struct{}

func (forkSpawner) Start(ctx context.Context, name string, spec proc.Spec, exited func(Process, proc.ExitStatus)) (Process, error) {
	p, err := proc.Start(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go func() { exited(p, p.Wait()) }()
	return p, nil
}
