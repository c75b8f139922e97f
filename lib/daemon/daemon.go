package daemon

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/lib/dvmdir"
	"github.com/dynrt/dynrt/lib/launcher"
	"github.com/dynrt/dynrt/lib/proc"
	"github.com/dynrt/dynrt/lib/procenv"
	"github.com/dynrt/dynrt/wire"
)

// DefaultKillGrace is how long a process has between SIGTERM and SIGKILL
// when a kill request gives no grace period.
const DefaultKillGrace = 2 * time.Second

// Config configures a node daemon.
type Config struct {
	// Master is the master's address: an absolute unix socket path
	// ("unix:" prefix allowed) or host:port ("tcp://" prefix allowed).
	Master string
	// Token is the DVM token: required to reach the master over TCP,
	// handed to processes as DYNRT_TOKEN, and accepted from clients.
	Token string
	// Node is this node's name in the DVM; Slots its slot count.
	Node  string
	Slots int
	// DVM is the DVM id the daemon expects; empty accepts the master's.
	DVM string
	// Dir is the rendezvous directory holding the daemon's client socket;
	// empty means dvmdir.Open(Env).
	Dir string
	// Host is reported to the master; empty means os.Hostname().
	Host string
	// Addr is this node's address for processes on other hosts
	// (DYNRT_NODE_ADDR) when the DVM's --net does not choose one; empty
	// means the source address of the TCP connection to the master, if
	// any. The master sets it for its own node in a cluster DVM.
	Addr string
	// Prefix is dynrt's install prefix on this host (--prefix): DIR/bin
	// and DIR/lib go first in the PATH and LD_LIBRARY_PATH of every
	// process started, as with mpirun's --prefix.
	Prefix string
	// KillGrace is the default SIGTERM→SIGKILL grace; 0 means
	// DefaultKillGrace.
	KillGrace time.Duration
	// Env reads the daemon's environment (os.Getenv when nil).
	Env    func(string) string
	Logger *slog.Logger
	// Ready, when set, is called once the daemon has registered, with its
	// client socket path.
	Ready func(sock string)
	// BeforeFork, when set, runs before the processes of each node.launch
	// are forked (after the job and its ranks are registered): tests use
	// it to hold a launch back.
	BeforeFork func(job string)
	// Spawner starts the processes; nil forks them (lib/proc) under a
	// guard process. Any other spawner runs without a guard: a simulated
	// node (lib/simnode) has nothing to leave behind.
	Spawner Spawner
}

// Daemon is a running node daemon. Its methods are for the request
// handlers of this package (see doc.go for how to add one).
type Daemon struct {
	cfg   Config
	log   *slog.Logger
	grace time.Duration

	node  string
	index uint32
	dvm   string
	sock  string // client socket path
	// dir is the rendezvous directory on this host, sockDir the DVM's
	// socket directory in it; madeDir dir if this daemon created it
	// (removeDirs).
	dir, sockDir, madeDir string
	// dvmRef is the DVM reference processes get as DYNRT_DVM: the id
	// where the rendezvous directory has the DVM's file (the master's
	// host), uri:tcp://<master> elsewhere, so that tools in the processes
	// work on any host. nodeAddr is DYNRT_NODE_ADDR (nodeAddress).
	dvmRef, nodeAddr string

	master *wire.Conn
	spawn  Spawner // forks, or simulates (Config.Spawner)

	// clients serves requests from application processes; fromMaster serves
	// requests the master sends. Handlers are registered in routes.go.
	clients    *wire.Mux
	fromMaster *wire.Mux

	mu       sync.Mutex
	jobs     map[string]*jobCache   // by namespace
	live     map[procKey]*procEntry // processes started and not yet reported ended
	stopping bool
	wg       sync.WaitGroup // one count per live entry

	stopOnce sync.Once
	stopCh   chan struct{} // closed by node.stop
	// registered is closed once the master has assigned the node index:
	// the master may send node.launch before our register Call returns.
	registered chan struct{}
	lastPing   atomic.Int64 // unix ns of the master's last heartbeat (watchdog.go)
	peerHB     atomic.Int64 // the master's heartbeat interval and dead time in ms (NodeRegisterReply), which
	peerDead   atomic.Int64 // ... a daemon also uses for its parent in a fence's tree (fenceup.go)

	// guard kills leftovers if the daemon dies; nil if it could not start.
	// Set before registered is closed: read it only after that (jobGuard).
	guard *proc.Guard

	sess *sessionState // session services (session.go)
	pmi  *pmiService   // PMI service for MPI programs (pmi.go)
	pmix *pmixService  // PMIx service for Open MPI programs (pmix.go)

	stdin stdinTable // stdin streams fed by job.stdin (stdin.go)

	relay relayState // the daemon's part in the master's tree (relay.go)
	up    upState    // fence entries up the tree of daemons (fenceup.go)
	evs   evOrdered  // the master's events, in its order (evorder.go)
}

type procKey struct {
	job  string
	rank uint32
}

func (k procKey) String() string { return procenv.ClientName(k.job, k.rank) }

// procEntry is a process the daemon started, from just before the fork
// until its exit has been reported.
type procEntry struct {
	p       Process // nil while forking
	pid     int
	forced  bool           // the runtime killed it (reported in ProcExited)
	killSig syscall.Signal // a kill arrived while forking: apply it after the fork
	grace   time.Duration  // with killSig
	out     *outputSink    // output handling of the process
}

// Run runs a node daemon until ctx is canceled, the master stops it
// (node.stop) or the connection to the master is lost. Every process it
// started is terminated before it returns, and its socket is removed.
// It returns nil after a stop or cancel, an error otherwise.
func Run(ctx context.Context, cfg Config) error {
	d, err := newDaemon(cfg)
	if err != nil {
		return err
	}
	return d.run(ctx)
}

func newDaemon(cfg Config) (*Daemon, error) {
	if cfg.Node == "" {
		return nil, wire.Errorf(wire.ErrInvalid, "daemon: no node name")
	}
	if cfg.Master == "" {
		return nil, wire.Errorf(wire.ErrInvalid, "daemon: no master address")
	}
	if cfg.Env == nil {
		cfg.Env = os.Getenv
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Host == "" {
		cfg.Host, _ = os.Hostname()
	}
	d := &Daemon{
		cfg:        cfg,
		log:        cfg.Logger.With("node", cfg.Node),
		grace:      cfg.KillGrace,
		node:       cfg.Node,
		clients:    wire.NewMux(),
		fromMaster: wire.NewMux(),
		jobs:       make(map[string]*jobCache),
		live:       make(map[procKey]*procEntry),
		stopCh:     make(chan struct{}),
		registered: make(chan struct{}),
	}
	if d.grace <= 0 {
		d.grace = DefaultKillGrace
	}
	d.spawn = cfg.Spawner
	if d.spawn == nil {
		d.spawn = forkSpawner{}
	}
	d.routes()
	// Requests of the application processes are bounded here as at the
	// master (docs/limits.md): the KV store lives in the daemon.
	lim, err := wire.LimitsFromEnv(cfg.Env)
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	d.clients.SetCheck(lim.Check)
	// Set before any goroutine that reads it (relay handlers) starts.
	var rid [8]byte
	_, _ = rand.Read(rid[:])
	d.relay.id = binary.LittleEndian.Uint64(rid[:]) | 1 // never 0 (= any)
	return d, nil
}

// masterAddr splits the --master value into a network and an address.
func masterAddr(s string) (string, string) {
	switch {
	case strings.HasPrefix(s, "unix://"):
		return "unix", strings.TrimPrefix(s, "unix://")
	case strings.HasPrefix(s, "unix:"):
		return "unix", strings.TrimPrefix(s, "unix:")
	case strings.HasPrefix(s, "tcp://"):
		return "tcp", strings.TrimPrefix(s, "tcp://")
	case strings.HasPrefix(s, "/"):
		return "unix", s
	}
	return "tcp", s
}

// servedInline names the master's requests the daemon serves on the
// connection's reader goroutine: cache updates that only take d.mu for a
// moment. A set operation waits for a pset.push to every daemon, so each
// thread wake-up saved there is saved on the operation's round trip.
func servedInline(kind string) bool {
	switch kind {
	case wire.KindPsetPush, wire.KindRCPush, wire.KindNodeJobData, wire.KindPing:
		return true
	case wire.KindPMIDead:
		return true // in order: a later list must not be overwritten by an earlier one
	case wire.KindNodeLaunch:
		return true // the registration part; the forks go on a goroutine (handleLaunch)
	}
	return false
}

func (d *Daemon) run(ctx context.Context) error {
	// The guard kills what our processes leave behind if we die without
	// cleaning up (kill -9). It starts while we connect and register
	// (its fork and exec take a millisecond or more): no process is
	// started before registration (d.registered), and d.guard is set just
	// before that.
	guardc := make(chan *proc.Guard, 1)
	go func() {
		if d.cfg.Spawner != nil {
			guardc <- nil // nothing forked, nothing to guard
			return
		}
		g, err := proc.StartGuard()
		if err != nil {
			d.log.Warn("daemon: no guard process: descendants of processes may outlive a crash of this daemon", "err", err)
		} else if dir, err := g.Cgroup(); err != nil {
			d.log.Info("daemon: no cgroup v2 for the jobs' processes; the guard relies on process groups and its environment mark", "why", err)
		} else {
			d.log.Debug("daemon: the jobs' processes run in cgroups under " + dir)
		}
		guardc <- g
	}()
	guard := sync.OnceValue(func() *proc.Guard { return <-guardc })
	closeGuard := sync.OnceFunc(func() {
		if g := guard(); g != nil {
			if err := g.Close(); err != nil {
				d.log.Warn("daemon: guard", "err", err)
			}
		}
	})
	defer closeGuard()
	network, addr := masterAddr(d.cfg.Master)
	hello := wire.Hello{Role: wire.RoleDaemon, Name: d.node, Token: d.cfg.Token}
	mc, err := wire.Dial(ctx, network, addr, hello, wire.Options{
		Handler: d.fromMaster.Serve,
		Inline:  servedInline,
		OnEvent: d.onMasterEvent,
		Logger:  d.log,
	})
	if err != nil {
		return fmt.Errorf("daemon %s: connect to master at %s: %w", d.node, d.cfg.Master, err)
	}
	d.master = mc
	defer mc.Close()

	// The master names itself by its DVM id in the hello reply.
	d.dvm = mc.Peer().Name
	if d.cfg.DVM != "" && d.dvm != d.cfg.DVM {
		return wire.Errorf(wire.ErrInvalid, "daemon %s: master at %s runs DVM %q, not %q", d.node, d.cfg.Master, d.dvm, d.cfg.DVM)
	}

	ln, tmp, err := d.listen()
	if err != nil {
		return err
	}
	// Closed after the final shutdown below (this defer runs first); the
	// one above covers the early returns.
	defer closeGuard()
	srvCtx, stopServe := context.WithCancel(context.Background())
	served := make(chan struct{})
	srv := &wire.Server{
		Policy: wire.AcceptPolicy{
			Name:  d.node,
			Role:  wire.RoleDaemon,
			Token: d.cfg.Token,
			Roles: []string{wire.RoleClient, wire.RoleDaemon},
			Check: func(h *wire.Hello, peer wire.PeerInfo) error {
				if h.Role == wire.RoleDaemon {
					return d.checkPeer(h) // another daemon, relaying (relay.go)
				}
				return d.checkClient(h, peer)
			},
		},
		Options: wire.Options{Handler: d.clients.Serve, Logger: d.log},
		Logger:  d.log,
	}
	go func() {
		defer close(served)
		if err := srv.Serve(srvCtx, ln); err != nil {
			d.log.Warn("daemon: client socket failed", "err", err)
		}
	}()
	if cl, ok := d.spawn.(ClientListener); ok {
		// The spawner's processes dial in memory; the socket still
		// serves tools and everything else.
		memServed := make(chan struct{})
		go func() {
			defer close(memServed)
			if err := srv.Serve(srvCtx, cl.ClientListener()); err != nil {
				d.log.Warn("daemon: spawner's client listener failed", "err", err)
			}
		}()
		defer func() { <-memServed }() // after stopServe below
	}
	relayAddr, relayPath := "unix:"+d.sock, ""
	if network != "tcp" {
		// The client socket takes its name only once the master has
		// accepted us; a relay may come before that. A second name of the
		// same socket, ours from now until we exit, is always there.
		if p, err := relayLink(d.dir, d.dvm, tmp.path); err != nil {
			d.log.Debug("daemon: relays go to the client socket's name", "err", err)
		} else {
			relayAddr, relayPath = "unix:"+p, p
		}
	} else {
		// Daemons on other hosts cannot reach the unix socket.
		rln, err := relayListener(mc)
		if err != nil {
			d.log.Warn("daemon: no relay port: the master sends to this daemon directly", "err", err)
			relayAddr = ""
		} else {
			relayAddr = "tcp:" + rln.Addr().String()
			relayServed := make(chan struct{})
			go func() {
				defer close(relayServed)
				if err := srv.Serve(srvCtx, rln); err != nil {
					d.log.Warn("daemon: relay port failed", "err", err)
				}
			}()
			defer func() { <-relayServed }() // after stopServe below
		}
	}
	published := false
	defer func() {
		d.closePeers()
		stopServe()
		if relayPath != "" {
			_ = os.Remove(relayPath)
		}
		<-served
		if published {
			removeIfSame(d.sock, tmp)
		} else {
			_ = os.Remove(tmp.path)
		}
		d.removeDirs()
	}()

	d.relay.addr = relayAddr
	var reg wire.NodeRegisterReply
	err = mc.Call(ctx, wire.KindNodeRegister, &wire.NodeRegister{
		Name: d.node, Host: d.cfg.Host, Slots: uint32(max(d.cfg.Slots, 0)), PID: os.Getpid(), Addr: d.sock,
		PMIx: hostsPMIx(), Relay: relayAddr, RelayID: d.relay.id,
	}, &reg)
	if err != nil {
		return fmt.Errorf("daemon %s: register with master: %w", d.node, err)
	}
	// The master accepted us as the node's daemon: only now may the
	// socket take the node's name, replacing a dead daemon's file.
	if err := os.Rename(tmp.path, d.sock); err != nil {
		return wire.Errorf(wire.ErrInternal, "daemon %s: publish socket %s: %w", d.node, d.sock, err)
	}
	published = true
	d.dvmRef, d.nodeAddr = d.dvm, d.nodeAddress(mc, reg.Net)
	if network == "tcp" {
		d.dvmRef = "uri:tcp://" + addr
	}
	d.mu.Lock()
	d.index = reg.Index
	d.mu.Unlock()
	d.guard = guard() // read only after d.registered
	close(d.registered)
	d.log.Debug("daemon: registered", "index", reg.Index, "dvm", d.dvm, "socket", d.sock)
	d.peerHB.Store(reg.HeartbeatMS)
	d.peerDead.Store(reg.DeadMS)
	silent := make(chan error, 1)
	if reg.DeadMS > 0 {
		wctx, stopWatch := context.WithCancel(ctx)
		defer stopWatch()
		go d.watchMaster(wctx, time.Duration(reg.HeartbeatMS)*time.Millisecond, time.Duration(reg.DeadMS)*time.Millisecond, silent)
	}
	if d.cfg.Ready != nil {
		d.cfg.Ready(d.sock)
	}

	var result error
	select {
	case <-ctx.Done():
	case <-d.stopCh:
	case <-mc.Done():
		result = fmt.Errorf("daemon %s: lost the master: %w", d.node, mc.Err())
	case err := <-silent:
		d.log.Error("daemon: lost the master; killing every process and exiting", "err", err)
		result = err
		mc.Close()
	}
	d.shutdown(d.grace)
	d.pmix.close()
	return result
}

// nodeAddress is the address of this node that processes on other hosts
// dial (DYNRT_NODE_ADDR, lib/comm's endpoints): one from the DVM's --net
// choice if it has one, else Config.Addr, else the source address of the daemon's TCP
// connection to the master (an address the master's host, and so the
// cluster, can reach, with no configuration), else "" (a daemon on the
// master's host that reached it by its unix socket: processes there use
// the host name, as all processes did before).
func (d *Daemon) nodeAddress(mc *wire.Conn, netSpec string) string {
	if netSpec != "" {
		n, err := launcher.ParseNet(netSpec)
		if err == nil {
			var a netip.Addr
			if a, err = n.Pick(launcher.Self{Ifaces: launcher.LocalIfaces()}, nil); err == nil {
				return a.String()
			}
		}
		d.log.Warn("daemon: no address of this host in the DVM's --net; using the one that reaches the master", "net", netSpec, "err", err)
	}
	if d.cfg.Addr != "" {
		return d.cfg.Addr
	}
	if ta, ok := mc.LocalAddr().(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	return ""
}

// tmpSocket is the client socket under its temporary name, with its
// identity to tell it from a file that later took its path.
type tmpSocket struct {
	path string
	fi   os.FileInfo
}

// listen opens the client socket under a temporary name in <dir>/<dvm>/ and
// sets d.sock to the name it gets once the master has accepted the daemon,
// <dir>/<dvm>/<node>.sock. Binding under the final name would first have to
// remove the file there, which may belong to a live daemon of the same
// node: a second daemon that the master then refuses would have cut the
// live one off from its processes.
func (d *Daemon) listen() (net.Listener, tmpSocket, error) {
	dir := d.cfg.Dir
	if dir == "" {
		var err error
		if dir, err = dvmdir.Path(d.cfg.Env); err != nil {
			return nil, tmpSocket{}, fmt.Errorf("daemon %s: %w", d.node, err)
		}
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			d.madeDir = dir // ours to remove at the end (removeDirs)
		}
		if err := dvmdir.Ensure(dir); err != nil {
			return nil, tmpSocket{}, fmt.Errorf("daemon %s: %w", d.node, err)
		}
	}
	d.dir, d.sockDir = dir, filepath.Join(dir, d.dvm)
	path, err := dvmdir.SocketPath(dir, d.dvm, d.node+".sock")
	if err != nil {
		return nil, tmpSocket{}, fmt.Errorf("daemon %s: %w", d.node, err)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	tmp, err := dvmdir.SocketPath(dir, d.dvm, ".j"+hex.EncodeToString(rnd[:]))
	if err != nil {
		return nil, tmpSocket{}, fmt.Errorf("daemon %s: %w", d.node, err)
	}
	ln, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, tmpSocket{}, wire.Errorf(wire.ErrInternal, "daemon %s: listen on %s: %w", d.node, tmp, err)
	}
	// The listener must not unlink the path on Close: after the rename it
	// names the published socket, which removeIfSame handles.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	fi, err := os.Stat(tmp)
	if err != nil {
		ln.Close()
		return nil, tmpSocket{}, wire.Errorf(wire.ErrInternal, "daemon %s: %w", d.node, err)
	}
	d.sock = path
	return ln, tmpSocket{path: tmp, fi: fi}, nil
}

// removeDirs removes, once the daemon's socket is gone, the DVM's socket
// directory if it is empty (on a host of its own, a daemon started by ssh
// is its only user; elsewhere the master's files keep it) and the
// rendezvous directory if this daemon created it and it is empty: a DVM
// leaves nothing behind on its hosts.
func (d *Daemon) removeDirs() {
	if d.sockDir != "" {
		_ = os.Remove(d.sockDir) // fails, as it should, while anything is in it
	}
	if d.madeDir != "" {
		_ = os.Remove(d.madeDir)
	}
}

// removeIfSame removes the published socket unless another daemon of the
// node has replaced it since.
func removeIfSame(path string, ours tmpSocket) {
	if fi, err := os.Stat(path); err == nil && os.SameFile(fi, ours.fi) {
		_ = os.Remove(path)
	}
}

// shutdown refuses new launches, terminates every process and waits until
// each exit has been reported.
func (d *Daemon) shutdown(grace time.Duration) {
	d.mu.Lock()
	d.stopping = true
	d.mu.Unlock()
	d.kill(func(procKey) bool { return true }, syscall.SIGTERM, grace)
	d.wg.Wait()
}

// Node returns the node name; Index its index in the DVM; DVM the DVM id.
func (d *Daemon) Node() string { return d.node }
func (d *Daemon) Index() uint32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.index
}
func (d *Daemon) DVM() string { return d.dvm }

// Master returns the connection to the master (for relaying requests).
func (d *Daemon) Master() *wire.Conn { return d.master }
