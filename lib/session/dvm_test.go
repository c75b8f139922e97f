package session_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/lib/daemon"
	"github.com/dynrt/dynrt/lib/launcher"
	"github.com/dynrt/dynrt/lib/master"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// The test binary doubles as the node daemon of the virtual nodes
// (DYNRT_TEST_ROLE=daemon); the application is internal/testapp, built
// once per run.
const (
	envRole = "DYNRT_TEST_ROLE"
	envMark = "DYNRT_TEST_MARK" // set in every process a test starts, to find leftovers
)

// testGrace is the SIGTERM→SIGKILL grace in tests.
const testGrace = 300 * time.Millisecond

var (
	appOnce sync.Once
	appPath string
	appErr  error
	appDir  string
)

func TestMain(m *testing.M) {
	if os.Getenv(envRole) == "daemon" {
		os.Exit(daemonMain(os.Args[1:]))
	}
	code := m.Run()
	if appDir != "" {
		os.RemoveAll(appDir)
	}
	os.Exit(code)
}

// daemonMain is `dynrun daemon` for tests.
func daemonMain(args []string) int {
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
	cfg.KillGrace = testGrace
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := daemon.Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "daemon:", err)
		return 1
	}
	return 0
}

// testApp builds internal/testapp (with the race detector when the tests
// have it) and returns its path.
func testApp(t testing.TB) string {
	t.Helper()
	appOnce.Do(func() {
		appDir, appErr = os.MkdirTemp("", "dynrt-testapp-")
		if appErr != nil {
			return
		}
		goBin, err := exec.LookPath("go")
		if err != nil && os.Getenv("GOROOT") != "" {
			goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		}
		appPath = filepath.Join(appDir, "testapp")
		args := []string{"build", "-o", appPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command(goBin, append(args, "github.com/dynrt/dynrt/internal/testapp")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			appErr = fmt.Errorf("build testapp: %v\n%s", err, out)
		}
	})
	if appErr != nil {
		t.Fatal(appErr)
	}
	return appPath
}

// testDVM is a DVM of virtual nodes for one test, stopped and checked for
// leftovers in the test's cleanup.
type testDVM struct {
	t   testing.TB
	m   *master.Master
	c   *tool.Client
	dir string
	env []string
	app string

	mu  sync.Mutex
	out map[string][]wire.OutputLine // by job
}

func testLogger() *slog.Logger {
	if os.Getenv("DYNRT_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// startDVM starts a DVM of k virtual nodes with s slots each: node 0 in
// this process, the others as re-executed test binaries.
func startDVM(t testing.TB, k, s int) *testDVM {
	t.Helper()
	app := testApp(t)
	dir := filepath.Join(t.TempDir(), "d")
	mb := make([]byte, 8)
	if _, err := rand.Read(mb); err != nil {
		t.Fatal(err)
	}
	mark := hex.EncodeToString(mb)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	base := []string{envMark + "=" + mark}
	// Race-instrumented binaries sleep a second before exiting unless
	// told otherwise.
	gorace := "GORACE=atexit_sleep_ms=0"
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "GORACE="):
			gorace = kv + " atexit_sleep_ms=0"
		case !strings.HasPrefix(kv, envRole+"=") && !strings.HasPrefix(kv, "DYNRT_"):
			base = append(base, kv)
		}
	}
	base = append(base, gorace)
	starter, err := launcher.New(launcher.Options{
		Kind: launcher.Local, Command: []string{exe}, Env: append([]string{envRole + "=daemon"}, base...),
		Logger: testLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	nodes := make([]alloc.Node, k)
	for i := range nodes {
		nodes[i] = alloc.Node{Name: "node" + strconv.Itoa(i), Slots: s}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := master.Start(ctx, master.Config{
		Dir: dir, Nodes: nodes, Starter: starter, KillGrace: testGrace, Logger: testLogger(),
		Env: func(string) string { return "" },
	})
	if err != nil {
		t.Fatalf("start DVM: %v", err)
	}
	d := &testDVM{t: t, m: m, dir: dir, env: base, app: app, out: map[string][]wire.OutputLine{}}
	var daemonPIDs []int
	t.Cleanup(func() {
		if d.c != nil {
			d.c.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.Stop(ctx); err != nil {
			t.Errorf("stop DVM: %v", err)
		}
		assertClean(t, dir, mark, daemonPIDs)
	})
	d.c, err = tool.Attach(ctx, tool.Options{Dir: dir, Env: func(string) string { return "" }, Name: "test"})
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	d.c.OnOutput(func(l wire.OutputLine) {
		d.mu.Lock()
		d.out[l.Job] = append(d.out[l.Job], l)
		d.mu.Unlock()
	})
	st, err := d.c.State(ctx)
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

// launch starts n processes of the test application.
func (d *testDVM) launch(n int, mapBy string, args ...string) wire.JobLaunchReply {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := d.c.Launch(ctx, wire.JobLaunchReq{
		Argv: append([]string{d.app}, args...), N: uint32(n), MapBy: mapBy, Env: d.env,
		Output: wire.OutputFlags{Forward: true},
	})
	if err != nil {
		d.t.Fatalf("launch testapp %v: %v", args, err)
	}
	return rep
}

func (d *testDVM) wait(job string) tool.JobEnd {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	end, err := d.c.WaitJob(ctx, job)
	if err != nil {
		d.t.Fatalf("wait for %s: %v", job, err)
	}
	return end
}

// run launches the test application and waits for a successful end; it
// returns the stdout lines by rank.
func (d *testDVM) run(n int, mapBy string, args ...string) (wire.JobLaunchReply, map[uint32][]string) {
	d.t.Helper()
	rep := d.launch(n, mapBy, args...)
	end := d.wait(rep.Job)
	lines := d.lines(rep.Job)
	if end.State != wire.JobStateDone || end.Code != 0 {
		d.t.Fatalf("testapp %v ended %s with code %d: %s\noutput: %v", args, end.State, end.Code, end.Msg, lines)
	}
	return rep, lines
}

// lines returns the stdout lines of job by rank (stderr lines fail the
// test: the race detector reports there).
func (d *testDVM) lines(job string) map[uint32][]string {
	d.t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[uint32][]string{}
	for _, l := range d.out[job] {
		if l.Stream == wire.StreamStderr {
			d.t.Errorf("rank %d wrote to stderr: %s", l.Rank, l.Line)
			continue
		}
		out[l.Rank] = append(out[l.Rank], string(l.Line))
	}
	return out
}

// waitLine waits until a rank of job prints a line starting with prefix.
func (d *testDVM) waitLine(job, prefix string) {
	d.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		d.mu.Lock()
		for _, l := range d.out[job] {
			if strings.HasPrefix(string(l.Line), prefix) {
				d.mu.Unlock()
				return
			}
		}
		d.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	d.t.Fatalf("job %s printed no line starting with %q", job, prefix)
}

// assertClean checks that nothing a test started is left: no process
// carrying the test's mark, no daemon, nothing in the DVM directory.
func assertClean(t testing.TB, dir, mark string, daemons []int) {
	t.Helper()
	if left := markedProcs(mark); len(left) > 0 {
		t.Errorf("processes left running: %v", left)
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for _, pid := range daemons {
		if alive(pid) {
			t.Errorf("daemon pid %d still runs", pid)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Errorf("read %s: %v", dir, err)
	}
	for _, e := range ents {
		t.Errorf("left in the DVM directory: %s", e.Name())
	}
}

// markedProcs lists live processes (not zombies) whose environment holds
// the mark.
func markedProcs(mark string) []int {
	want := []byte(envMark + "=" + mark + "\x00")
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		if alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

func alive(pid int) bool {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(st, ')')
	return i < 0 || len(st) <= i+2 || st[i+2] != 'Z'
}
