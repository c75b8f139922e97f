// Package dvmtest starts throw-away DVMs of virtual nodes for the tests of
// other packages: node 0 runs in the test process, the other nodes are the
// test binary re-executed as a node daemon. Every DVM is stopped in the
// test's cleanup, which then fails the test if a process, a daemon or a
// file in the rendezvous directory is left behind.
//
// A test package that uses Start routes the daemon role in its TestMain,
// and removes the programs it built (see Programs) when the tests end:
//
//	var progs = &dvmtest.Programs{Race: dvmtest.Race}
//
//	func TestMain(m *testing.M) { dvmtest.Main(m, progs) }
//
// Output collects the output of the jobs a test launches.
package dvmtest

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/leakcheck"
	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/lib/daemon"
	"github.com/dynrt/dynrt/lib/dvmdir"
	"github.com/dynrt/dynrt/lib/launcher"
	"github.com/dynrt/dynrt/lib/master"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// Environment of the processes a DVM of this package starts.
const (
	EnvRole  = "DYNRT_TEST_ROLE"  // "daemon" in a re-executed test binary
	EnvMark  = leakcheck.EnvMark  // in every process a test starts, to find leftovers
	EnvGrace = "DYNRT_TEST_GRACE" // the daemon's kill grace (a time.Duration)
	EnvLog   = "DYNRT_TEST_LOG"   // non-empty: debug logs of the DVM to stderr

	RoleDaemon = "daemon"
)

// DefaultGrace is the SIGTERM→SIGKILL grace in tests: short, so that
// processes ignoring SIGTERM do not slow the tests down.
const DefaultGrace = 200 * time.Millisecond

// IsDaemon reports whether this process is a test binary re-executed as a
// node daemon by Start.
func IsDaemon() bool { return os.Getenv(EnvRole) == RoleDaemon }

// DaemonMain is `dynrun daemon` for tests: it takes the flags lib/launcher
// passes and the token from the environment, and returns the exit code.
func DaemonMain(args []string) int {
	fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
	var cfg daemon.Config
	fs.StringVar(&cfg.Master, "master", "", "")
	fs.StringVar(&cfg.Node, "node", "", "")
	fs.IntVar(&cfg.Slots, "slots", 0, "")
	fs.StringVar(&cfg.DVM, "dvm", "", "")
	fs.StringVar(&cfg.Dir, "dir", "", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg.Token = os.Getenv(launcher.EnvToken)
	cfg.KillGrace = DefaultGrace
	if g, err := time.ParseDuration(os.Getenv(EnvGrace)); err == nil {
		cfg.KillGrace = g
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := daemon.Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "daemon:", err)
		return 1
	}
	return 0
}

// Logger logs to stderr at debug level when $DYNRT_TEST_LOG is set and
// discards otherwise.
func Logger() *slog.Logger {
	if os.Getenv(EnvLog) != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// Options shape a test DVM.
type Options struct {
	Nodes int    // virtual nodes (node0, node1, ...); 0 = 1
	Slots int    // slots per node
	Name  string // human name of the DVM
	// KillGrace is the SIGTERM→SIGKILL grace of the master and the
	// daemons; 0 = DefaultGrace.
	KillGrace time.Duration
	// HeartbeatInterval and HeartbeatMisses tune failure detection (see
	// master.Config); 0 = 1 s and 3 misses, the production defaults.
	HeartbeatInterval time.Duration
	HeartbeatMisses   int
	// SetEnv points $DYNRT_DIR at the DVM's directory and clears
	// $DYNRT_DVM for the test, so that tools find the DVM as the only
	// live one. It uses t.Setenv, so the test must not be parallel.
	SetEnv bool
	// Limits are the master's (master.Config.Limits); zero fields take
	// the defaults.
	Limits wire.Limits
	// RCConfirmTimeout is the master's confirm timeout of resource
	// changes (master.Config.RCConfirmTimeout); 0 = its default.
	RCConfirmTimeout time.Duration
}

// DVM is a running test DVM.
type DVM struct {
	M    *master.Master
	Dir  string   // the rendezvous directory
	Mark string   // value of $DYNRT_TEST_MARK in the processes it starts
	Env  []string // environment for jobs: the test's, marked, without DYNRT_*
}

// Start starts a DVM in a directory under t.TempDir(). The test's cleanup
// stops it and fails the test if anything it started is left.
func Start(t testing.TB, o Options) *DVM {
	t.Helper()
	if o.Nodes <= 0 {
		o.Nodes = 1
	}
	if o.KillGrace <= 0 {
		o.KillGrace = DefaultGrace
	}
	dir := filepath.Join(t.TempDir(), "d")
	if o.SetEnv {
		t.Setenv(dvmdir.EnvDir, dir)
		t.Setenv(dvmdir.EnvDVM, "")
	}
	mark := leakcheck.NewMark(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{EnvMark + "=" + mark}
	// Race-instrumented binaries sleep a second before exiting unless
	// told otherwise; the re-executed daemons and jobs need not.
	gorace := "GORACE=atexit_sleep_ms=0"
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "GORACE="):
			gorace = kv + " atexit_sleep_ms=0"
		case !strings.HasPrefix(kv, "DYNRT_"):
			env = append(env, kv)
		}
	}
	env = append(env, gorace)
	daemonEnv := append([]string{EnvRole + "=" + RoleDaemon, EnvGrace + "=" + o.KillGrace.String()}, env...)
	starter, err := launcher.New(launcher.Options{
		Kind: launcher.Local, Command: []string{exe}, Env: daemonEnv, Logger: Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	nodes := make([]alloc.Node, o.Nodes)
	for i := range nodes {
		nodes[i] = alloc.Node{Name: "node" + strconv.Itoa(i), Slots: o.Slots}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := master.Start(ctx, master.Config{
		Dir: dir, Name: o.Name, Nodes: nodes, Starter: starter, KillGrace: o.KillGrace, Logger: Logger(),
		Env: func(string) string { return "" }, Limits: o.Limits, RCConfirmTimeout: o.RCConfirmTimeout,
		HeartbeatInterval: cmp.Or(o.HeartbeatInterval, time.Second), HeartbeatMisses: cmp.Or(o.HeartbeatMisses, 3),
	})
	if err != nil {
		t.Fatalf("start DVM: %v", err)
	}
	d := &DVM{M: m, Dir: dir, Mark: mark, Env: env}
	var daemonPIDs []int
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.Stop(ctx); err != nil {
			t.Errorf("stop DVM: %v", err)
		}
		leakcheck.AssertClean(t, dir, mark, daemonPIDs)
	})
	// The daemons' PIDs, to check they are gone at the end.
	c, err := d.attach(ctx)
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	defer c.Close()
	st, err := c.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range st.Nodes {
		if n.PID != os.Getpid() {
			daemonPIDs = append(daemonPIDs, n.PID)
		}
	}
	return d
}

func (d *DVM) attach(ctx context.Context) (*tool.Client, error) {
	return tool.Attach(ctx, tool.Options{Dir: d.Dir, Env: func(string) string { return "" }, Name: "test"})
}

// Attach attaches a tool client to the DVM; t's cleanup closes it (before
// the DVM stops, when t is the test that started it).
func (d *DVM) Attach(t testing.TB) *tool.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := d.attach(ctx)
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
