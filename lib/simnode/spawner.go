package simnode

import (
	"context"
	"fmt"
	"net"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/dynrt/dynrt/lib/daemon"
	"github.com/dynrt/dynrt/lib/proc"
	"github.com/dynrt/dynrt/lib/session"
	"github.com/dynrt/dynrt/wire"
)

// Program is the body of a simulated process. It returns the exit code;
// when the process is signalled, ctx is canceled and its return value is
// ignored (the process counts as killed by the signal).
type Program func(ctx context.Context, p *Proc) int

// firstPID is above Linux's largest pid_max (2^22): a made-up pid never
// names a real process.
const firstPID = 1 << 22

// pids are unique across the spawners of one host process.
var pids atomic.Int64

// Spawner runs simulated processes for one node daemon (use one per
// daemon: its listener is served, and closed, by that daemon).
type Spawner struct {
	programs map[string]Program
	ln       *memListener
	running  atomic.Int64
}

var _ daemon.ClientListener = (*Spawner)(nil)

// New returns a spawner that knows programs (by the base name of a
// launch's program path) besides the built-in ones (Programs).
func New(programs map[string]Program) *Spawner {
	s := &Spawner{programs: Programs(), ln: newMemListener()}
	for k, v := range programs {
		s.programs[k] = v
	}
	return s
}

// ClientListener is where the processes' sessions reach the daemon.
func (s *Spawner) ClientListener() net.Listener { return s.ln }

// Running is how many processes have started and not yet ended.
func (s *Spawner) Running() int { return int(s.running.Load()) }

// Start runs spec's program on a goroutine.
func (s *Spawner) Start(ctx context.Context, name string, spec proc.Spec, exited func(daemon.Process, proc.ExitStatus)) (daemon.Process, error) {
	for _, f := range spec.ExtraFiles {
		if f != nil {
			return nil, wire.Errorf(wire.ErrInvalid, "%s: a simulated process cannot take file descriptors: launch it without PMI (--pmi none; PMI and PMIx need a real MPI process)", name)
		}
	}
	prog := s.programs[path.Base(spec.Path)]
	if prog == nil {
		return nil, wire.Errorf(wire.ErrNotFound, "%s: no simulated program %q (a simulated node runs one of: %s)", name, spec.Path, strings.Join(s.names(), ", "))
	}
	if err := ctx.Err(); err != nil {
		return nil, wire.Errorf(wire.ErrCanceled, "%s: %w", name, err)
	}
	args := spec.Args
	if len(args) == 0 {
		args = []string{spec.Path}
	}
	pctx, cancel := context.WithCancel(context.Background())
	p := &Proc{
		pid: int(firstPID + pids.Add(1)), args: args, env: spec.Env, output: spec.Output, ln: s.ln,
		cancel: cancel, done: make(chan struct{}),
	}
	s.running.Add(1)
	go func() {
		code := prog(pctx, p)
		st := proc.ExitStatus{ExitCode: code}
		p.mu.Lock()
		if p.killedBy != 0 {
			st = proc.ExitStatus{ExitCode: -1, Signal: p.killedBy}
		}
		p.ended = true
		p.mu.Unlock()
		cancel()
		p.closeSession()
		s.running.Add(-1)
		close(p.done)
		exited(p, st)
	}()
	return p, nil
}

func (s *Spawner) names() []string {
	var out []string
	for k := range s.programs {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Proc is a simulated process: what its Program sees, and what the daemon
// signals.
type Proc struct {
	pid    int
	args   []string
	env    []string
	output func(int, []byte)
	ln     *memListener
	cancel context.CancelFunc
	done   chan struct{}

	outMu sync.Mutex

	mu       sync.Mutex
	killedBy syscall.Signal
	ended    bool
	conns    []net.Conn // the process's connections, closed when it ends
}

// Pid is the made-up pid.
func (p *Proc) Pid() int { return p.pid }

// Done is closed once the process has ended.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Signal acts on sig as its default action would.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return proc.ErrDone
	}
	switch sig {
	case 0, syscall.SIGCONT, syscall.SIGCHLD, syscall.SIGURG, syscall.SIGWINCH, syscall.SIGSTOP, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU:
		return nil
	}
	if p.killedBy == 0 {
		p.killedBy = sig
		p.cancel()
	}
	return nil
}

// Args is the process's argv.
func (p *Proc) Args() []string { return p.args }

// Getenv reads the process's environment.
func (p *Proc) Getenv(key string) string {
	for i := len(p.env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(p.env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// Println writes a line to the process's stdout.
func (p *Proc) Println(a ...any) {
	if p.output == nil {
		return
	}
	line := strings.TrimSuffix(fmt.Sprintln(a...), "\n")
	p.outMu.Lock()
	defer p.outMu.Unlock()
	p.output(proc.Stdout, []byte(line))
}

// Session opens the process's session with its daemon (lib/session over
// an in-memory pipe). Its connection closes when the process ends, as
// a process's sockets do at its exit.
func (p *Proc) Session(ctx context.Context) (*session.Session, error) {
	return session.Init(ctx, session.WithEnv(p.Getenv), session.WithPID(p.pid),
		session.WithDialer(p.dial))
}

func (p *Proc) dial(ctx context.Context, _ string) (net.Conn, error) {
	c, err := p.ln.dial(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		c.Close()
		return nil, wire.Errorf(wire.ErrClosed, "simnode: process %d has ended", p.pid)
	}
	p.conns = append(p.conns, c)
	return c, nil
}

// closeSession ends what the program left open: a process's connections
// close when it exits.
func (p *Proc) closeSession() {
	p.mu.Lock()
	cs := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
}
