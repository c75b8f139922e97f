package launcher

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/dynrt/dynrt/lib/dvmdir"
	"github.com/dynrt/dynrt/lib/proc"
	"github.com/dynrt/dynrt/wire"
)

// Launcher kinds.
const (
	Local = "local" // daemons as child processes on this host (virtual nodes)
	SSH   = "ssh"   // daemons started through ssh on remote hosts
	Join  = "join"  // nothing started: daemons are started by hand and join
	Slurm = "slurm" // daemons started by one srun step inside a Slurm allocation
)

// Kinds lists the launcher kinds New accepts.
func Kinds() []string { return []string{Local, SSH, Join, Slurm} }

// Daemon command-line flags. cmd/dynrun's hidden `daemon` command defines
// them; they are listed here because this package builds the command lines.
const (
	FlagMaster     = "--master"      // master address: unix socket path or host:port
	FlagNode       = "--node"        // node name
	FlagSlots      = "--slots"       // slot count
	FlagDVM        = "--dvm"         // DVM id (checked against the master's)
	FlagDir        = "--dir"         // rendezvous directory, for the daemon's socket
	FlagJoin       = "--join"        // started outside the master (ssh, by hand): dial TCP with the token
	FlagTokenStdin = "--token-stdin" // read the token from the first line of stdin
	FlagPrefix     = "--prefix"      // install prefix: DIR/bin and DIR/lib go first in the processes' PATH and LD_LIBRARY_PATH
)

// EnvToken passes the DVM token to a local daemon (the environment of a
// process is readable only by its owner, unlike its argv).
const EnvToken = dvmdir.EnvToken

// NodeSpec is one daemon the master wants started.
type NodeSpec struct {
	Name   string // node name, unique in the DVM
	Host   string // host to run on (ssh); empty means this host
	Slots  int    // slots of the node
	DVM    string // DVM id
	Dir    string // rendezvous directory (local daemons put their socket there)
	Master string // address the daemon dials: unix socket path or host:port
	Token  string // DVM token
}

// DaemonFlags returns the flags of `dynrun daemon` for spec, in a fixed
// order. join selects the form used by ssh: --join, no --dir (the remote
// host has its own directory) and the token on stdin.
func DaemonFlags(spec NodeSpec, join bool) []string {
	args := []string{FlagMaster, spec.Master, FlagNode, spec.Name, FlagSlots, strconv.Itoa(spec.Slots)}
	if spec.DVM != "" {
		args = append(args, FlagDVM, spec.DVM)
	}
	if join {
		return append(args, FlagJoin, FlagTokenStdin)
	}
	if spec.Dir != "" {
		args = append(args, FlagDir, spec.Dir)
	}
	return args
}

func (s NodeSpec) check() error {
	switch {
	case s.Name == "":
		return wire.Errorf(wire.ErrInvalid, "launcher: node without a name")
	case s.Slots < 1:
		return wire.Errorf(wire.ErrInvalid, "launcher: node %s: %d slots", s.Name, s.Slots)
	case s.Master == "":
		return wire.Errorf(wire.ErrInvalid, "launcher: node %s: no master address", s.Name)
	}
	return nil
}

// Options configure a Starter.
type Options struct {
	// Kind is Local, SSH or Join; empty means Local.
	Kind string
	// Command is the argv that runs `dynrun daemon` on this host (local),
	// e.g. {os.Executable(), "daemon"}; the flags are appended.
	Command []string
	// Remote is the argv that runs `dynrun daemon` on a remote host; nil
	// means {Prefix+"/bin/dynrun", "daemon"} with a Prefix, else (ssh)
	// {"dynrun", "daemon"} found in the remote PATH, or (slurm) Command:
	// the nodes of an allocation share this host's software, and srun
	// hands the tasks this environment.
	Remote []string
	// Prefix is the install prefix of dynrt on the remote hosts (as
	// mpirun's --prefix): the daemon runs as DIR/bin/dynrun and puts DIR/bin
	// and DIR/lib first in the PATH and LD_LIBRARY_PATH of its processes.
	Prefix string
	// SSH is the ssh client argv before the host; nil means
	// {"ssh", "-o", "BatchMode=yes"} (never prompt: a launch must fail,
	// not hang, when keys are missing).
	SSH []string
	// Srun is the srun argv before its options (slurm); nil means {"srun"}.
	Srun []string
	// SlurmJob is the Slurm job the daemons' step runs in (slurm); empty
	// means the allocation of Env (SLURM_JOB_ID).
	SlurmJob string
	// Env is the environment of the started processes (the daemon, or the
	// ssh client); nil means os.Environ().
	Env []string
	// Output receives the started processes' stdout/stderr lines; nil
	// logs them to Logger.
	Output func(node string, stream int, line []byte)
	// Logger receives what the starter does; nil discards.
	Logger *slog.Logger
}

// Starter starts the daemon of one node.
type Starter interface {
	// Kind is Local, SSH or Join.
	Kind() string
	// Start starts the daemon of spec and returns at once (it does not wait
	// for the daemon to register with the master).
	Start(ctx context.Context, spec NodeSpec) (*Daemon, error)
}

// Releaser is a Starter that holds resources for a node beyond its daemon
// process (a Slurm allocation made to grow the DVM). The master calls
// Release once the node has left the DVM (dvm shrink) and its daemon is
// gone.
type Releaser interface {
	Release(ctx context.Context, node string) error
}

// New returns the Starter of opts.Kind.
func New(opts Options) (Starter, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	switch opts.Kind {
	case Local, "":
		if len(opts.Command) == 0 {
			return nil, wire.Errorf(wire.ErrInvalid, "launcher: local: no daemon command")
		}
		return &localStarter{opts: opts}, nil
	case SSH:
		if opts.SSH == nil {
			opts.SSH = []string{"ssh", "-o", "BatchMode=yes"}
		}
		if opts.Remote == nil {
			opts.Remote = []string{"dynrun", "daemon"}
			if opts.Prefix != "" {
				opts.Remote[0] = path.Join(opts.Prefix, "bin", "dynrun")
			}
		}
		if opts.Prefix != "" && !path.IsAbs(opts.Prefix) {
			return nil, wire.Errorf(wire.ErrInvalid, "launcher: --prefix %q: want an absolute directory (the same on every host)", opts.Prefix)
		}
		if len(opts.SSH) == 0 || len(opts.Remote) == 0 {
			return nil, wire.Errorf(wire.ErrInvalid, "launcher: ssh: empty ssh or remote command")
		}
		return &sshStarter{opts: opts}, nil
	case Join:
		return joinStarter{}, nil
	case Slurm:
		if opts.Srun == nil {
			opts.Srun = []string{"srun"}
		}
		if opts.Remote == nil {
			opts.Remote = opts.Command
			if opts.Prefix != "" {
				opts.Remote = []string{path.Join(opts.Prefix, "bin", "dynrun"), "daemon"}
			}
		}
		if len(opts.Srun) == 0 || len(opts.Remote) == 0 {
			return nil, wire.Errorf(wire.ErrInvalid, "launcher: slurm: empty srun or daemon command")
		}
		return &slurmStarter{opts: opts}, nil
	}
	return nil, wire.Errorf(wire.ErrInvalid, "launcher: unknown launcher %q (want %s)", opts.Kind, strings.Join(Kinds(), ", "))
}

// Daemon is a started daemon: the local daemon process, the ssh client that
// runs the remote one, or nothing (join).
type Daemon struct {
	Node   string
	Host   string     // host it runs on ("" = this host)
	Agent  []string   // the ssh command (ssh launcher), for error reports
	Master string     // the master address it dials, for error reports
	p      *proc.Proc // nil for join and in-process daemons
	tail   *tail      // last lines of its output, for error reports
	// An in-process daemon (InProcess): closed when it has returned, and
	// how to stop it.
	done <-chan struct{}
	stop func()
}

// InProcess is a daemon that runs as goroutines of this process (the
// simulated nodes of lib/simnode): done is closed when it has returned,
// and stop makes it return.
func InProcess(node string, done <-chan struct{}, stop func()) *Daemon {
	return &Daemon{Node: node, done: done, stop: stop}
}

// Pid returns the pid of the local process (daemon or ssh), 0 for join.
func (d *Daemon) Pid() int {
	if d.p == nil {
		return 0
	}
	return d.p.Pid()
}

// Done is closed when the process has ended; never for join.
func (d *Daemon) Done() <-chan struct{} {
	if d.p == nil {
		return d.done
	}
	return d.p.Done()
}

// Wait blocks until the process has ended and says how. For join it
// returns at once with an empty status.
func (d *Daemon) Wait() proc.ExitStatus {
	if d.p == nil {
		if d.done != nil {
			<-d.done
		}
		return proc.ExitStatus{}
	}
	return d.p.Wait()
}

// Stop ends the process: SIGTERM to its group, SIGKILL after grace. The
// master normally stops daemons over the wire first; this is the backstop.
func (d *Daemon) Stop(grace time.Duration) proc.ExitStatus {
	if d.p == nil {
		if d.stop != nil {
			d.stop()
			<-d.done
		}
		return proc.ExitStatus{}
	}
	return d.p.Terminate(grace)
}

// start runs argv with the starter's environment, feeding stdin.
func start(ctx context.Context, opts Options, node string, argv, env []string, stdin string) (*Daemon, error) {
	d := &Daemon{Node: node, tail: newTail(tailLines, tailBytes)}
	spec := proc.Spec{Path: argv[0], Args: argv, Env: env}
	if stdin != "" {
		spec.Stdin = strings.NewReader(stdin)
	}
	out := opts.Output
	if out == nil {
		log := opts.Logger.With("node", node)
		out = func(_ string, stream int, line []byte) {
			log.Info("daemon output", "stream", stream, "line", string(line))
		}
	}
	spec.Output = func(stream int, line []byte) {
		d.tail.add(line)
		out(node, stream, line)
	}
	p, err := proc.Start(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("launcher: node %s: start %s: %w", node, argv[0], err)
	}
	opts.Logger.Debug("daemon started", "node", node, "pid", p.Pid(), "argv", argv)
	d.p = p
	return d, nil
}

type localStarter struct{ opts Options }

func (localStarter) Kind() string { return Local }

func (s *localStarter) Start(ctx context.Context, spec NodeSpec) (*Daemon, error) {
	if err := spec.check(); err != nil {
		return nil, err
	}
	argv := append(append([]string(nil), s.opts.Command...), DaemonFlags(spec, false)...)
	env := s.opts.Env
	if spec.Token != "" {
		env = append(append([]string(nil), env...), EnvToken+"="+spec.Token)
	}
	return start(ctx, s.opts, spec.Name, argv, env, "")
}

type joinStarter struct{}

func (joinStarter) Kind() string { return Join }

func (joinStarter) Start(_ context.Context, spec NodeSpec) (*Daemon, error) {
	return &Daemon{Node: spec.Name}, nil
}

// JoinCommand is the command a user runs on a host to join the daemon of
// spec to its master by hand (`dvm start --launcher join` prints it). The
// token goes in the environment, never on the command line; without
// spec.Token it reads <token>.
func JoinCommand(spec NodeSpec) string {
	args := []string{"dynrun", "daemon", FlagMaster, spec.Master, FlagNode, spec.Name, FlagSlots, strconv.Itoa(spec.Slots)}
	if spec.DVM != "" {
		args = append(args, FlagDVM, spec.DVM)
	}
	tok := "<token>"
	if spec.Token != "" {
		tok = shellQuote(spec.Token)
	}
	return EnvToken + "=" + tok + " " + ShellJoin(append(args, FlagJoin))
}
