// Package simdvm runs a simulated DVM in this process: the real master,
// and one real node daemon per node whose processes are simulated
// (lib/simnode). Tests and the scale benchmark (scripts/bench-scale.sh)
// use it to run a thousand nodes on one host; docs/scale.md says what is
// real and what is simulated.
package simdvm

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/lib/daemon"
	"github.com/dynrt/dynrt/lib/launcher"
	"github.com/dynrt/dynrt/lib/master"
	"github.com/dynrt/dynrt/lib/simnode"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// Options configure a simulated DVM.
type Options struct {
	Nodes, Slots int
	// Dir is the rendezvous directory (a test's temp dir).
	Dir string
	// Programs are simulated programs besides simnode's built-in ones.
	Programs map[string]simnode.Program
	Logger   *slog.Logger
	// Master adjusts the master's configuration before the start.
	Master func(*master.Config)
	// Host, when set, runs the daemons of nodes 1.. in a separate process,
	// this argv (a binary whose main calls HostMain when IsHost), instead
	// of in this one.
	Host []string
}

// DVM is a running simulated DVM.
type DVM struct {
	M     *master.Master
	Nodes []alloc.Node

	host *hostStarter // nil: the daemons run in this process

	mu       sync.Mutex
	spawners map[string]*simnode.Spawner
}

// NodeName is the name of simulated node i.
func NodeName(i int) string { return "sim" + strconv.Itoa(i) }

// Start starts the master and the daemons of o.Nodes nodes of o.Slots
// slots each, and returns once every daemon has registered.
func Start(ctx context.Context, o Options) (*DVM, error) {
	if o.Nodes < 1 || o.Slots < 1 {
		return nil, wire.Errorf(wire.ErrInvalid, "simdvm: %d nodes of %d slots: want at least one of each", o.Nodes, o.Slots)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	d := &DVM{spawners: map[string]*simnode.Spawner{}}
	d.Nodes = make([]alloc.Node, o.Nodes)
	for i := range d.Nodes {
		d.Nodes[i] = alloc.Node{Name: NodeName(i), Slots: o.Slots}
	}
	var st launcher.Starter = &starter{d: d, o: o}
	if len(o.Host) > 0 {
		d.host = &hostStarter{argv: o.Host}
		st = d.host
	}
	cfg := master.Config{
		Dir: o.Dir, Nodes: d.Nodes, Logger: o.Logger, Env: func(string) string { return "" },
		Starter: st, Spawner: d.spawner(d.Nodes[0].Name, o),
		// Generous: one host runs every daemon of the DVM on its few
		// cores, so a ping answered late is a busy host, not a dead node
		// (a DVM of 1,024 nodes missed 12 s under the defaults while a
		// change of 1,024 processes ran).
		HeartbeatInterval: 5 * time.Second, HeartbeatMisses: 12,
		RegisterTimeout: 120 * time.Second,
	}
	if o.Master != nil {
		o.Master(&cfg)
	}
	m, err := master.Start(ctx, cfg)
	if err != nil {
		if d.host != nil {
			d.host.close()
		}
		return nil, fmt.Errorf("simdvm: %w", err)
	}
	d.M = m
	return d, nil
}

func (d *DVM) spawner(node string, o Options) *simnode.Spawner {
	s := simnode.New(o.Programs)
	d.mu.Lock()
	d.spawners[node] = s
	d.mu.Unlock()
	return s
}

// HostPid is the pid of the nodes host (Options.Host), 0 without one.
func (d *DVM) HostPid() int {
	if d.host == nil {
		return 0
	}
	return d.host.Pid()
}

// Running is how many simulated processes run on the nodes of this
// process (all of them without Options.Host).
func (d *DVM) Running() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, s := range d.spawners {
		n += s.Running()
	}
	return n
}

// Client attaches a tool client (as dynrc and dynpset do).
func (d *DVM) Client(ctx context.Context) (*tool.Client, error) {
	return tool.Dial(ctx, d.M.Info(), tool.Options{Name: "simdvm"})
}

// Stop stops the DVM: every daemon and process, then the master.
func (d *DVM) Stop(ctx context.Context) error {
	err := d.M.Stop(ctx)
	if d.host != nil {
		d.host.close()
	}
	return err
}

// starter runs the daemons of nodes 1.. as goroutines of this process.
type starter struct {
	d *DVM
	o Options
}

func (*starter) Kind() string { return launcher.Local }

func (s *starter) Start(_ context.Context, spec launcher.NodeSpec) (*launcher.Daemon, error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	cfg := daemonConfig(spec, s.o.Programs, s.o.Logger)
	s.d.mu.Lock()
	s.d.spawners[spec.Name] = cfg.Spawner.(*simnode.Spawner)
	s.d.mu.Unlock()
	go func() {
		defer close(done)
		if err := daemon.Run(ctx, cfg); err != nil {
			s.o.Logger.Warn("simdvm: daemon ended", "node", spec.Name, "err", err)
		}
	}()
	return launcher.InProcess(spec.Name, done, cancel), nil
}
