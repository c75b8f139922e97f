package master

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/lib/buildinfo"
	"github.com/dynrt/dynrt/lib/daemon"
	"github.com/dynrt/dynrt/lib/dvmdir"
	"github.com/dynrt/dynrt/lib/launcher"
	"github.com/dynrt/dynrt/wire"
)

// Defaults.
const (
	DefaultBind            = "127.0.0.1:0"
	ClusterBind            = "0.0.0.0:0" // daemons on other hosts must reach the master
	DefaultKillGrace       = daemon.DefaultKillGrace
	DefaultRegisterTimeout = 30 * time.Second
	DefaultCallTimeout     = 30 * time.Second
	DefaultMaxConnecting   = 8 // below sshd's default MaxStartups of 10
)

// Config configures a master.
type Config struct {
	Dir      string       // rendezvous directory; "" = dvmdir.Open(Env)
	ID, Name string       // DVM id (generated if empty) and human name
	Nodes    []alloc.Node // node 0 is the master's own node (its daemon runs in-process)
	Launcher string       // local (default), ssh, join or slurm: how the other daemons start
	Hosts    []string     // ssh: Hosts[i] is the host of node i (default: the node's name); Hosts[0] is unused
	// SSH is the ssh command and its options (--launch-agent); nil means
	// launcher's default. Prefix is dynrt's install prefix on the remote
	// hosts (--prefix). Both only matter to the ssh launcher.
	SSH    []string
	Prefix string
	// LauncherInfo says how the launcher was chosen and on what, for
	// people (`dvm status`), e.g. "slurm: job 12 (SLURM_JOB_ID is set)";
	// "" shows Launcher.
	LauncherInfo string
	// SlurmJob is the Slurm job of the daemons' srun step (slurm); "" is
	// the allocation of the environment.
	SlurmJob string
	// Listening, when set, is called once the master listens, before the
	// daemons are started (the join launcher prints how to join then).
	Listening func(dvmdir.Info)
	Bind      string // TCP listen address; "" = DefaultBind, or ClusterBind with the ssh, join and slurm launchers
	// Net chooses the address published for a wildcard Bind and handed to
	// daemons and processes (--net); the zero Net allows any.
	Net launcher.Net
	// DaemonCommand runs `dynrun daemon` on this host (local launcher);
	// nil means {os.Executable(), "daemon"}.
	DaemonCommand []string
	// Private marks the DVM of one dynrun run; its name defaults to
	// "private-<pid>". Such a DVM has no TCP listener unless Bind is set
	// (its daemons and tools are on this host), and Start does not write
	// its rendezvous file: its launcher talks to it directly, and the file
	// only lets other tools watch, so the launcher has it written in the
	// background (PublishFile) once its job has started, where the write
	// does not compete with the launch for the CPU.
	Private bool
	Logger  *slog.Logger
	Env     func(string) string // nil = os.Getenv

	// Starter starts the daemons of nodes 1..; nil builds the launcher
	// named by Launcher with DaemonCommand.
	Starter launcher.Starter
	// Spawner starts the processes of node 0 (the daemon in this
	// process); nil forks them. A simulated DVM (internal/simdvm) sets
	// one of lib/simnode.
	Spawner daemon.Spawner
	// KillGrace is the SIGTERM→SIGKILL grace of kills that give none;
	// 0 = DefaultKillGrace.
	KillGrace time.Duration
	// TreeRadix, when > 0, sends a push that goes alike to more than
	// TreeRadix daemons down a tree of daemons of that radix (tree.go,
	// docs/scale.md) instead of to each from the master; 0 = a star.
	TreeRadix int
	// RegisterTimeout bounds the wait for the daemons in Start; 0 =
	// DefaultRegisterTimeout.
	RegisterTimeout time.Duration
	// MaxConnecting bounds how many ssh daemons may be connecting at once
	// (started, neither registered nor exited): sshd drops connections
	// beyond its MaxStartups (10 unauthenticated by default), so a DVM of
	// dozens of hosts must not open them all at once. 0 =
	// DefaultMaxConnecting; negative = no bound.
	MaxConnecting int
	// RCConfirmTimeout bounds the time from the announcement of a resource
	// change until it is FINALIZED (a SUB: until its first accept); 0 =
	// DefaultRCConfirmTimeout. A request may give its own.
	RCConfirmTimeout time.Duration
	// HeartbeatInterval is how often the master pings each daemon; 0 =
	// DefaultHeartbeatInterval. HeartbeatMisses is how many pings in a row
	// a daemon may leave unanswered before its node is declared down (the
	// first miss makes it suspect); 0 = DefaultHeartbeatMisses.
	HeartbeatInterval time.Duration
	HeartbeatMisses   int
	// beforeEvent, in tests, runs on a daemon connection's reader before
	// an event of the daemon is handed to the loop (a slow hand-over).
	beforeEvent func()
	// RCGrace is how long the processes a FINALIZED SUB removes have to
	// exit before they are killed; 0 = DefaultRCGrace. A request may give
	// its own.
	RCGrace time.Duration
	// Limits bound what a request may ask for (docs/limits.md); zero
	// fields take wire.LimitsFromEnv(Env), else the defaults.
	Limits wire.Limits
}

// Master is a running DVM master.
type Master struct {
	cfg         Config
	log         *slog.Logger
	grace       time.Duration
	callTimeout time.Duration

	dir  string
	info dvmdir.Info

	st       *state
	ops      chan func(*state)
	quit     chan struct{}
	loopDone chan struct{}

	// Requests are routed by the role of the connection (routes.go).
	daemonMux *wire.Mux
	toolMux   *wire.Mux

	serveCancel context.CancelFunc
	serveWG     sync.WaitGroup

	localCancel context.CancelFunc
	localDone   chan error // result of the in-process daemon

	fileOnce sync.Once
	fileDone chan struct{} // private DVM: closed once the background rendezvous file write is over
	fileMu   sync.Mutex    // serialises rewrites of the file (grow.go) with its removal
	fileGone bool          // removed: never write it again

	sess *sessState // session services (session.go); resource changes publish through it

	stopOnce sync.Once
	stopCh   chan struct{} // closed when the stop begins

	connecting gate // bounds the ssh daemons connecting at once (Config.MaxConnecting)
	done       chan struct{}
}

// Start starts a DVM: it listens, starts the in-process daemon of node 0
// and the daemons of the other nodes, waits until all have registered,
// writes the rendezvous file and returns. On error everything started is
// stopped again.
func Start(ctx context.Context, cfg Config) (*Master, error) {
	if cfg.Env == nil {
		cfg.Env = os.Getenv
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if len(cfg.Nodes) == 0 {
		return nil, wire.Errorf(wire.ErrInvalid, "master: a DVM needs at least one node")
	}
	if cfg.HeartbeatInterval < 0 || cfg.HeartbeatMisses < 0 {
		return nil, wire.Errorf(wire.ErrInvalid, "master: heartbeat interval %v and misses %d must not be negative", cfg.HeartbeatInterval, cfg.HeartbeatMisses)
	}
	envLimits, err := wire.LimitsFromEnv(cfg.Env)
	if err != nil {
		return nil, fmt.Errorf("master: %w", err)
	}
	cfg.Limits = cfg.Limits.Or(envLimits)
	if len(cfg.Nodes) > cfg.Limits.Nodes {
		return nil, wire.Exceeded("master: nodes", len(cfg.Nodes), "nodes", cfg.Limits.Nodes)
	}
	al, err := alloc.New(cfg.Nodes)
	if err != nil {
		return nil, err
	}
	dir := cfg.Dir
	if dir == "" {
		if dir, err = dvmdir.Open(cfg.Env); err != nil {
			return nil, err
		}
	} else if err := dvmdir.Ensure(dir); err != nil {
		return nil, err
	}
	if cfg.Name != "" {
		if err := dvmdir.CheckName(cfg.Name); err != nil {
			return nil, err
		}
		if err := dvmdir.CheckNameFree(dir, cfg.Name); err != nil {
			return nil, err
		}
	}
	id := cfg.ID
	if id == "" {
		if id, err = dvmdir.NewID(); err != nil {
			return nil, err
		}
	}
	token, err := dvmdir.NewToken()
	if err != nil {
		return nil, err
	}
	name := cfg.Name
	if name == "" && cfg.Private {
		name = "private-" + strconv.Itoa(os.Getpid())
	}
	m := &Master{
		cfg:         cfg,
		log:         cfg.Logger.With("dvm", id),
		grace:       cfg.KillGrace,
		callTimeout: DefaultCallTimeout,
		dir:         dir,
		ops:         make(chan func(*state), 256),
		quit:        make(chan struct{}),
		loopDone:    make(chan struct{}),
		daemonMux:   wire.NewMux(),
		toolMux:     wire.NewMux(),
		stopCh:      make(chan struct{}),
		done:        make(chan struct{}),
	}
	m.connecting = newGate(cfg.MaxConnecting)
	if m.grace <= 0 {
		m.grace = DefaultKillGrace
	}
	started := time.Now()
	m.info = dvmdir.Info{
		ID: id, Name: name, Token: token, PID: os.Getpid(), Nodes: len(cfg.Nodes),
		Version: buildinfo.Read().Version, StartTime: started,
	}
	m.st = &state{
		m: m, log: m.log, id: id, token: token, started: started, alloc: al, initial: len(cfg.Nodes),
		nodeByName: make(map[string]*node), allUp: make(chan struct{}),
		peers: make(map[*wire.Conn]*peer), jobs: make(map[string]*job), apps: make(map[string]bool),
	}
	for i, n := range cfg.Nodes {
		nd := &node{idx: i, name: n.Name, slots: n.Slots, local: i == 0, firstUp: make(chan struct{})}
		m.st.nodes = append(m.st.nodes, nd)
		m.st.nodeByName[n.Name] = nd
	}
	m.routes()
	m.toolMux.SetCheck(cfg.Limits.Check)
	m.daemonMux.SetCheck(cfg.Limits.Check)
	go m.run()

	if err := m.start(ctx); err != nil {
		m.shutdown(m.grace)
		return nil, err
	}
	return m, nil
}

func (m *Master) start(ctx context.Context) (err error) {
	sock, err := dvmdir.SocketPath(m.dir, m.info.ID, "master.sock")
	if err != nil {
		return err
	}
	_ = os.Remove(sock) // left by a dead master that had this id
	lnU, err := net.Listen("unix", sock)
	if err != nil {
		return wire.Errorf(wire.ErrInternal, "master: listen on %s: %w", sock, err)
	}
	listeners := []net.Listener{lnU}
	m.info.Socket = sock
	if m.wantsTCP() {
		bind := cmp.Or(m.cfg.Bind, DefaultBind)
		if m.cfg.Bind == "" && (m.cfg.Launcher == launcher.SSH || m.cfg.Launcher == launcher.Join || m.cfg.Launcher == launcher.Slurm) {
			bind = ClusterBind
		}
		lnT, err := net.Listen("tcp", bind)
		if err != nil {
			lnU.Close()
			return wire.Errorf(wire.ErrInvalid, "master: listen on %s: %w", bind, err)
		}
		listeners = append(listeners, lnT)
		if m.info.TCP, err = publicAddr(ctx, lnT.Addr(), m.cfg.Net); err != nil {
			closeAll(listeners)
			return fmt.Errorf("master: --bind %s: %w", bind, err)
		}
	}

	srv := &wire.Server{
		Policy: wire.AcceptPolicy{
			Name: m.info.ID, Role: wire.RoleMaster, Token: m.info.Token,
			Roles: []string{wire.RoleDaemon, wire.RoleTool},
		},
		Options: wire.Options{
			Handler: m.serve,
			OnEvent: m.onEvent,
			OnClose: func(c *wire.Conn, err error) { m.post(func(s *state) { s.connClosed(c, err) }) },
			Logger:  m.log,
		},
		Logger: m.log,
	}
	sctx, cancel := context.WithCancel(context.Background())
	m.serveCancel = cancel
	for _, ln := range listeners {
		m.serveWG.Add(1)
		go func() {
			defer m.serveWG.Done()
			if err := srv.Serve(sctx, ln); err != nil {
				m.log.Error("master: listener failed", "addr", ln.Addr().String(), "err", err)
			}
		}()
	}

	// Node 0: the daemon inside this process.
	lctx, lcancel := context.WithCancel(context.Background())
	m.localCancel = lcancel
	m.localDone = make(chan error, 1)
	n0 := m.cfg.Nodes[0]
	cfg0 := daemon.Config{
		Master: sock, Token: m.info.Token, Node: n0.Name, Slots: n0.Slots, DVM: m.info.ID, Dir: m.dir,
		KillGrace: m.grace, Env: m.cfg.Env, Logger: m.cfg.Logger, Addr: m.nodeAddr(),
		Spawner: m.cfg.Spawner,
	}
	go func() { m.localDone <- daemon.Run(lctx, cfg0) }()

	if m.cfg.Listening != nil {
		m.cfg.Listening(m.info)
	}

	// The other nodes, through the launcher, started while we watch for
	// their registrations and early exits.
	early := make(chan *launcher.Daemon, len(m.cfg.Nodes))
	launched := make(chan error, 1)
	startCtx, stopLaunch := context.WithCancel(ctx)
	defer func() {
		// On success the last daemons may have registered before their
		// launch was booked: let it finish (canceling it would stop them).
		// On failure stop launching. Either way nothing is started after
		// start returns: shutdown finds every daemon in the state.
		if err != nil {
			stopLaunch()
		}
		<-launched
		stopLaunch()
	}()
	go func() { launched <- m.startOthers(startCtx, early) }()
	timeout := m.registerTimeout()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-m.st.allUp:
	case err := <-launched:
		launched <- err // for the deferred wait
		if err != nil {
			return err
		}
		select { // all started: wait for them as below
		case <-m.st.allUp:
		case d := <-early:
			return wire.Errorf(wire.ErrInternal, "master: %s", daemonExitMsg(d.Node, d))
		case err := <-m.localDone:
			m.localDone <- err // for shutdown
			return fmt.Errorf("master: the daemon of node %s failed: %w", n0.Name, err)
		case <-t.C:
			return m.registerTimeoutErr(timeout)
		case <-ctx.Done():
			return wire.Errorf(wire.ErrCanceled, "master: start: %w", ctx.Err())
		}
	case d := <-early:
		return wire.Errorf(wire.ErrInternal, "master: %s", daemonExitMsg(d.Node, d))
	case err := <-m.localDone:
		m.localDone <- err // for shutdown
		return fmt.Errorf("master: the daemon of node %s failed: %w", n0.Name, err)
	case <-t.C:
		return m.registerTimeoutErr(timeout)
	case <-ctx.Done():
		return wire.Errorf(wire.ErrCanceled, "master: start: %w", ctx.Err())
	}
	if m.cfg.Private {
		// The file's name is known; PublishFile writes it. A tool that
		// looks before then simply does not see the DVM yet.
		m.info.Path = dvmdir.File(m.dir, m.info.ID)
		m.fileDone = make(chan struct{})
		m.log.Debug("master: DVM up", "file", m.info.Path, "nodes", len(m.cfg.Nodes))
		return nil
	}
	path, err := dvmdir.Write(m.dir, m.info)
	if err != nil {
		return err
	}
	m.info.Path = path
	m.log.Debug("master: DVM up", "file", path, "nodes", len(m.cfg.Nodes))
	return nil
}

// registerTimeoutErr names the nodes whose daemons have not registered.
func (m *Master) registerTimeoutErr(timeout time.Duration) error {
	var missing []string
	_ = do(context.Background(), m, func(s *state) error {
		for _, n := range s.nodes {
			if !n.joined {
				missing = append(missing, n.name)
			}
		}
		return nil
	})
	return wire.Errorf(wire.ErrTimeout, "master: the daemons of %d nodes did not register within %v: %s", len(missing), timeout, strings.Join(missing, ", "))
}

// PublishFile starts writing a private DVM's rendezvous file in the
// background (see Config.Private). Later calls, and calls for a DVM that
// is not private, do nothing.
func (m *Master) PublishFile() {
	if m.fileDone == nil {
		return
	}
	m.fileOnce.Do(func() {
		go func() {
			defer close(m.fileDone)
			if _, err := dvmdir.Write(m.dir, m.info); err != nil {
				m.log.Warn("master: cannot write the rendezvous file; tools will not see this DVM", "err", err)
			}
		}()
	})
}

// publicAddr is the address daemons and tools dial for the listener at
// bound: a concrete one for a wildcard bind (launcher.PublicAddr).
func publicAddr(ctx context.Context, bound net.Addr, n launcher.Net) (string, error) {
	ap, err := netip.ParseAddrPort(bound.String())
	if err != nil || !ap.Addr().IsUnspecified() {
		return bound.String(), nil
	}
	lctx, cancel := context.WithTimeout(ctx, launcher.ResolveTimeout)
	defer cancel()
	self := launcher.LocalSelf(lctx)
	hostAddrs, _ := net.DefaultResolver.LookupNetIP(lctx, "ip", self.Name())
	pub, err := launcher.PublicAddr(ap, n, self, hostAddrs)
	if err != nil {
		return "", err
	}
	return pub.String(), nil
}

// nodeAddr is the address of node 0 for processes on other hosts: the
// host of the published TCP address in a DVM whose other daemons run
// elsewhere (ssh, join). In a DVM of local daemons it is empty, as for
// those daemons, so that all its processes know each other by host name
// (lib/comm then uses unix sockets between them).
func (m *Master) nodeAddr() string {
	if m.cfg.Launcher != launcher.SSH && m.cfg.Launcher != launcher.Join {
		return ""
	}
	host, _, err := net.SplitHostPort(m.info.TCP)
	if err != nil {
		return ""
	}
	return host
}

func closeAll(lns []net.Listener) {
	for _, ln := range lns {
		ln.Close()
	}
}

// wantsTCP says whether the master listens on TCP: always, except for a
// private DVM of local daemons with no Bind, where nothing would use it.
func (m *Master) wantsTCP() bool {
	local := m.cfg.Launcher == "" || m.cfg.Launcher == launcher.Local
	return !m.cfg.Private || m.cfg.Bind != "" || !local
}

// startOthers starts the daemons of nodes 1.. through the DVM's launcher:
// with one command when it starts groups (slurm), else one per node. Each
// started process that ends is sent on early (before registration, that
// is a failed start).
func (m *Master) startOthers(ctx context.Context, early chan<- *launcher.Daemon) error {
	if len(m.cfg.Nodes) < 2 {
		return nil
	}
	starter, err := m.starter()
	if err != nil {
		return err
	}
	g := m.gateFor(starter) // a bounded number of ssh connections at once
	// record makes d the process of nodes first..first+count-1.
	record := func(d *launcher.Daemon, first, count int) error {
		var up chan struct{}
		if err := do(ctx, m, func(s *state) error {
			for _, n := range s.nodes[first : first+count] {
				n.proc, n.starter = d, starter
			}
			up = s.nodes[first].firstUp
			return nil
		}); err != nil {
			g.leave()
			d.Stop(m.grace)
			return err
		}
		go g.leaveWhen(up, d, m.stopCh)
		if done := d.Done(); done != nil {
			go func() {
				<-done
				early <- d
			}()
		}
		return nil
	}
	others := m.cfg.Nodes[1:]
	if gs, ok := starter.(launcher.GroupStarter); ok {
		d, err := m.startGroup(ctx, gs, others)
		if err != nil {
			return err
		}
		return record(d, 1, len(others))
	}
	for i, n := range others {
		host := ""
		if i+1 < len(m.cfg.Hosts) {
			host = m.cfg.Hosts[i+1]
		}
		if err := g.enter(ctx); err != nil {
			return err
		}
		d, err := m.startDaemon(ctx, starter, n.Name, host, n.Slots)
		if err != nil {
			g.leave()
			return err
		}
		if err := record(d, i+1, 1); err != nil {
			return err
		}
	}
	return nil
}

// startGroup starts the daemons of nodes with one command of a starter
// that starts groups (slurm: one srun step for all of them).
func (m *Master) startGroup(ctx context.Context, gs launcher.GroupStarter, nodes []alloc.Node) (*launcher.Daemon, error) {
	specs := make([]launcher.NodeSpec, len(nodes))
	names := make([]string, len(nodes))
	for i, n := range nodes {
		specs[i] = launcher.NodeSpec{Name: n.Name, Slots: n.Slots, DVM: m.info.ID, Dir: m.dir, Master: m.info.TCP, Token: m.info.Token}
		names[i] = n.Name
	}
	m.log.Info("master: starting the daemons of several nodes with one command", "launcher", gs.Kind(), "nodes", len(specs))
	d, err := gs.StartGroup(ctx, specs)
	if err != nil {
		return nil, fmt.Errorf("master: start the daemons of nodes %s: %w", strings.Join(names, ", "), err)
	}
	return d, nil
}

// daemonCommand runs `dynrun daemon`: Config.DaemonCommand, else this
// binary's daemon command.
func (m *Master) daemonCommand() ([]string, error) {
	if m.cfg.DaemonCommand != nil {
		return m.cfg.DaemonCommand, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, wire.Errorf(wire.ErrInternal, "master: cannot find the dynrun binary: %w", err)
	}
	return []string{exe, "daemon"}, nil
}

func (m *Master) starter() (launcher.Starter, error) {
	if m.cfg.Starter != nil {
		return m.cfg.Starter, nil
	}
	cmd, err := m.daemonCommand()
	if err != nil {
		return nil, err
	}
	return launcher.New(launcher.Options{Kind: m.cfg.Launcher, Command: cmd, SSH: m.cfg.SSH, Prefix: m.cfg.Prefix, SlurmJob: m.cfg.SlurmJob, Logger: m.log})
}

// Info describes the DVM as its rendezvous file does.
func (m *Master) Info() dvmdir.Info { return m.info }

// Done is closed once the DVM has stopped (after Stop or a dvm.stop
// request).
func (m *Master) Done() <-chan struct{} { return m.done }

// Stop stops the DVM: every job is killed (SIGTERM, then SIGKILL after the
// grace period), every daemon stopped, the listeners closed and the
// rendezvous file and sockets removed. Whatever the state of the nodes
// (hung, cut off), this takes at most about 3 × (grace + 1 s) + 1 s: a
// daemon that does not report is declared down and, if this process
// started it, killed. It returns when all that is done or
// ctx ends (the stop then goes on in the background).
func (m *Master) Stop(ctx context.Context) error {
	m.stopAsync(m.grace)
	select {
	case <-m.done:
		return nil
	case <-ctx.Done():
		return wire.Errorf(wire.ErrTimeout, "master: stop: %w", ctx.Err())
	}
}

// StopForExit is Stop for a process that exits as soon as it returns (a
// private DVM's dynrun after its job). When no job is live and every
// node's daemon runs inside this process, nothing outside the process
// waits for the orderly stop: it refuses new jobs, removes the rendezvous
// file and sockets, starts the stop in the background and returns (the
// process's exit may cut that stop short). Otherwise it is Stop.
func (m *Master) StopForExit(ctx context.Context) error {
	idle, err := ask(ctx, m, func(s *state, reply func(bool, error)) {
		if s.live > 0 || len(s.nodes) > 1 {
			reply(false, nil)
			return
		}
		s.stopping = true // refuse launches from other tools from now on
		reply(true, nil)
	})
	if err != nil || !idle {
		return m.Stop(ctx)
	}
	m.removeFiles()
	m.stopAsync(m.grace)
	return nil
}

// removeFiles removes the rendezvous file and socket directory, after a
// background write of the file has ended (and so that none starts later).
func (m *Master) removeFiles() {
	if m.fileDone != nil {
		m.fileOnce.Do(func() { close(m.fileDone) }) // never published: nothing to wait for
		<-m.fileDone
	}
	m.fileMu.Lock()
	defer m.fileMu.Unlock()
	m.fileGone = true
	if err := dvmdir.Remove(m.dir, m.info.ID); err != nil {
		m.log.Warn("master: cannot remove the rendezvous file", "err", err)
	}
}

func (m *Master) stopAsync(grace time.Duration) {
	m.stopOnce.Do(func() {
		close(m.stopCh)
		go m.shutdown(grace)
	})
}

// shutdown runs the ordered stop. It is called once.
func (m *Master) shutdown(grace time.Duration) {
	defer close(m.done)
	// Every wait below is bounded, whatever the state of the nodes: a
	// hung or cut-off daemon is declared down or cut loose, not waited for.
	slack := grace + time.Second

	// 1. Kill the jobs and wait for their ends. Processes still counted
	// live after the grace are on daemons that do not report (hung, cut
	// off): their nodes are declared down, which books the processes as
	// lost and ends the jobs.
	drained, err := ask(context.Background(), m, func(s *state, reply func(<-chan struct{}, error)) {
		reply(s.beginStop(grace), nil)
	})
	if err == nil {
		select {
		case <-drained:
		case <-time.After(slack):
			m.log.Warn("master: jobs did not end in time; declaring the nodes that still hold processes down")
			_ = do(context.Background(), m, func(s *state) error { s.cutStragglers(); return nil })
			select {
			case <-drained:
			case <-time.After(time.Second):
				m.log.Warn("master: jobs did not end in time; stopping the daemons anyway")
			}
		}
	}

	// 2. Stop the daemons (in order behind what was sent to them) and wait
	// for their connections to close; cut the ones that do not answer.
	type stopping struct {
		c      *wire.Conn
		answer chan error
	}
	var stops []stopping
	var procs []*launcher.Daemon
	type release struct {
		r    launcher.Releaser
		node string
	}
	var releases []release
	_ = do(context.Background(), m, func(s *state) error {
		seen := map[*launcher.Daemon]bool{} // one srun runs the daemons of many nodes
		for _, n := range s.nodes {
			if n.proc != nil && !seen[n.proc] {
				seen[n.proc] = true
				procs = append(procs, n.proc)
			}
			if r, ok := n.starter.(launcher.Releaser); ok && !n.gone {
				releases = append(releases, release{r, n.name})
			}
			if !n.up {
				continue
			}
			st := stopping{c: n.conn, answer: make(chan error, 1)}
			s.sendNode(n, outMsg{kind: wire.KindNodeStop, body: &wire.NodeStopReq{GraceMS: grace.Milliseconds()}, done: func(err error) { st.answer <- err }})
			stops = append(stops, st)
		}
		return nil
	})
	deadline := time.After(slack)
	for _, st := range stops {
		select {
		case err := <-st.answer:
			if err != nil && !errors.Is(err, wire.ErrClosed) {
				m.log.Warn("master: node.stop failed", "daemon", st.c.Peer().Name, "err", err)
			}
			select {
			case <-st.c.Done():
			case <-deadline:
			}
		case <-deadline:
			m.log.Warn("master: daemon did not stop in time; closing its connection", "daemon", st.c.Peer().Name)
		}
		st.c.Close()
	}

	// 3. Wait for the daemon processes; kill stragglers (a stopped process
	// too: SIGKILL follows the grace).
	var wg sync.WaitGroup
	for _, d := range procs {
		if d.Done() == nil {
			continue // a joined daemon is not our child: nothing to wait for
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-d.Done():
			case <-time.After(time.Second):
				m.log.Warn("master: daemon did not exit; killing it", "node", d.Node)
				d.Stop(grace)
			}
			d.Wait()
		}()
	}
	wg.Wait()
	// Give back what was taken for nodes (a Slurm grow job), as when they
	// leave by dvm shrink.
	for _, r := range releases {
		rctx, cancel := context.WithTimeout(context.Background(), slack)
		if err := r.r.Release(rctx, r.node); err != nil {
			m.log.Warn("master: cannot release the resources of a node", "node", r.node, "err", err)
		}
		cancel()
	}
	if m.localCancel != nil {
		m.localCancel()
		if err := <-m.localDone; err != nil {
			m.log.Debug("master: in-process daemon ended", "err", err)
		}
	}

	// 4. Close the listeners and every connection; remove the files.
	if m.serveCancel != nil {
		m.serveCancel()
	}
	m.serveWG.Wait()
	m.removeFiles()
	close(m.quit)
	<-m.loopDone
}

// serve routes a request by the role of its connection.
func (m *Master) serve(ctx context.Context, req *wire.Request) (any, error) {
	switch req.Conn.Peer().Role {
	case wire.RoleDaemon:
		return m.daemonMux.Serve(ctx, req)
	case wire.RoleTool:
		return m.toolMux.Serve(ctx, req)
	}
	return nil, wire.Errorf(wire.ErrPermission, "master: role %q may not make requests", req.Conn.Peer().Role)
}

// onEvent takes the events daemons push (process exits and output) to the
// loop, in arrival order.
func (m *Master) onEvent(ev *wire.Request) {
	if ev.Conn.Peer().Role != wire.RoleDaemon {
		return
	}
	if m.cfg.beforeEvent != nil {
		m.cfg.beforeEvent()
	}
	switch ev.Kind {
	case wire.KindProcExited:
		var b wire.ProcExited
		if err := ev.Decode(&b); err != nil {
			m.log.Warn("master: bad proc.exited", "err", err)
			return
		}
		m.post(func(s *state) { s.procExited(b) })
	case wire.KindProcOutput:
		b := new(wire.OutputLine)
		if err := ev.Decode(b); err != nil {
			m.log.Warn("master: bad proc.output", "err", err)
			return
		}
		m.post(func(s *state) { s.output(b) })
	}
}
