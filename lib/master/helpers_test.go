package master

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/leakcheck"
	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/lib/daemon"
	"github.com/dynrt/dynrt/lib/launcher"
	"github.com/dynrt/dynrt/lib/procenv"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// The test binary doubles as a node daemon and as a small application:
// DYNRT_TEST_ROLE selects the part.
const (
	envRole = "DYNRT_TEST_ROLE"
	envMark = leakcheck.EnvMark // set in every process a test starts, to find leftovers
	// envLaunchGate names a file: the re-executed daemons hold every
	// launch back, after registering it, until the file exists.
	envLaunchGate = "TEST_LAUNCH_GATE"
)

// waitForFile waits (at most a minute) until path exists.
func waitForFile(path string) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
}

func TestMain(m *testing.M) {
	switch os.Getenv(envRole) {
	case "daemon":
		os.Exit(daemonMain(os.Args[1:]))
	case "app":
		os.Exit(appMain(os.Args[1:]))
	case "pmi":
		os.Exit(pmiClientMain(os.Args[1:])) // PMI protocol client (pmi_client_test.go)
	}
	code := m.Run()
	removeMPIBuild()
	os.Exit(code)
}

// daemonMain is `dynrun daemon` for tests: the flags lib/launcher passes,
// the token in the environment.
func daemonMain(args []string) int {
	fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
	var cfg daemon.Config
	fs.StringVar(&cfg.Master, "master", "", "")
	fs.StringVar(&cfg.Node, "node", "", "")
	fs.IntVar(&cfg.Slots, "slots", 0, "")
	fs.StringVar(&cfg.DVM, "dvm", "", "")
	fs.StringVar(&cfg.Dir, "dir", "", "")
	// What the ssh launcher adds (sshstart_test.go).
	fs.Bool("join", false, "")
	tokenStdin := fs.Bool("token-stdin", false, "")
	fs.StringVar(&cfg.Prefix, "prefix", "", "")
	if len(args) > 0 && args[0] == "daemon" {
		args = args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg.Token = os.Getenv(launcher.EnvToken)
	if *tokenStdin {
		line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
		cfg.Token = strings.TrimSpace(line)
	}
	cfg.KillGrace = testGrace
	if gate := os.Getenv(envLaunchGate); gate != "" {
		cfg.BeforeFork = func(string) { waitForFile(gate) }
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// Diagnostics for performance work on the benchmarks:
	// TEST_DAEMON_GOMAXPROCS=n and TEST_DAEMON_CPUPROFILE=path (one
	// profile per node, path.<node>).
	if n, err := strconv.Atoi(os.Getenv("TEST_DAEMON_GOMAXPROCS")); err == nil {
		runtime.GOMAXPROCS(n)
	}
	if p := os.Getenv("TEST_DAEMON_CPUPROFILE"); p != "" {
		f, _ := os.Create(p + "." + cfg.Node)
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if err := daemon.Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "daemon:", err)
		return 1
	}
	return 0
}

// sessionReport is what the "session" application prints.
type sessionReport struct {
	Info     wire.SessionInfo         `json:"info"`
	Env      map[string]string        `json:"env"`
	Sets     map[string]wire.PsetInfo `json:"sets"`
	List     []string                 `json:"list"`
	Impostor string                   `json:"impostor"` // error when claiming another rank
	Err      string                   `json:"err,omitempty"`
}

// appMain is a tiny application using the daemon's client protocol:
//
//	session      print a sessionReport as one JSON line
//	abort N      ask the runtime to abort the job with status N (rank 0 only; others sleep)
//	pset NAME    print the set NAME as its daemon knows it (wire.PsetInfo, or {"err":...}) as JSON
//	fence        enter a fence with no participant list, then one over ranks 0-2; print "<list>: ok" or
//	             "<list>: <error code>" for each
//	events N     subscribe to the job's app events, print "ready", then take N: their Msg must be 0..N-1 in
//	             order, with Seqs increasing; subscribe again from the first one's Seq and take the same N
//	             again (the replay); print "ok N", or what was wrong and exit 1
//	fenceloop N [MS] [SLEEP] [R]  N rounds of: commit a value, enter a fence with collect over the whole
//	             job (timeout MS, 0 = none; rank R, default 1, sleeps SLEEP ms before entering the last),
//	             read every rank's value, print "round I";
//	             print "ok N", or "fence I: <error code>: <message>" and exit 1
func appMain(args []string) int {
	if len(args) == 0 {
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	job, rankS := os.Getenv(procenv.Job), os.Getenv(procenv.Rank)
	rank, _ := strconv.ParseUint(rankS, 10, 32)
	dial := func(r uint64) (*wire.Conn, error) {
		return wire.Dial(ctx, "unix", os.Getenv(procenv.Daemon), wire.Hello{
			Role: wire.RoleClient, Name: procenv.ClientName(job, uint32(r)), Token: os.Getenv(procenv.Token),
		}, wire.Options{})
	}
	c, err := dial(rank)
	if err != nil {
		fmt.Println(`{"err":` + strconv.Quote(err.Error()) + `}`)
		return 1
	}
	defer c.Close()
	switch args[0] {
	case "session":
		rep := sessionReport{Sets: map[string]wire.PsetInfo{}, Env: map[string]string{}}
		for _, kv := range os.Environ() {
			if strings.HasPrefix(kv, "DYNRT_") {
				k, v, _ := strings.Cut(kv, "=")
				rep.Env[k] = v
			}
		}
		if err := c.Call(ctx, wire.KindSessionInit, &wire.SessionInitReq{Job: job, Rank: uint32(rank), PID: os.Getpid()}, &rep.Info); err != nil {
			rep.Err = err.Error()
		}
		app := os.Getenv(procenv.App)
		for _, name := range []string{"mpi://WORLD", "mpi://self", "mpi://SHARED", "mpi://app/" + app} {
			var p wire.PsetInfo
			if err := c.Call(ctx, wire.KindPsetGet, &wire.PsetGetReq{Name: name, Members: true}, &p); err != nil {
				rep.Err = err.Error()
			}
			rep.Sets[name] = p
		}
		var l wire.PsetList
		if err := c.Call(ctx, wire.KindPsetList, &wire.PsetListReq{}, &l); err != nil {
			rep.Err = err.Error()
		}
		for _, p := range l.Sets {
			rep.List = append(rep.List, p.Name)
		}
		size, _ := strconv.ParseUint(os.Getenv(procenv.Size), 10, 32)
		if other, err := dial((rank + 1) % size); err != nil {
			rep.Impostor = err.Error()
		} else {
			other.Close()
		}
		b, _ := json.Marshal(rep)
		fmt.Println(string(b))
		return 0
	case "pset": // pset <name> [<job>]: the set of the caller's job, or of another job
		req := wire.PsetGetReq{Name: args[1], Members: true}
		if len(args) > 2 {
			req.Job = args[2]
		}
		var p wire.PsetInfo
		if err := c.Call(ctx, wire.KindPsetGet, &req, &p); err != nil {
			fmt.Println(`{"err":` + strconv.Quote(err.Error()) + `}`)
			return 1
		}
		b, _ := json.Marshal(p)
		fmt.Println(string(b))
		return 0
	case "fence":
		for _, f := range []struct {
			name  string
			procs []wire.ProcRanges
		}{{"empty", nil}, {"0-2", []wire.ProcRanges{{Ranks: wire.Span(0, 2)}}}} {
			res := "ok"
			if err := c.Call(ctx, wire.KindFence, &wire.FenceReq{ID: "f-" + f.name, Procs: f.procs}, nil); err != nil {
				res = string(wire.CodeOf(err))
			}
			fmt.Println(f.name + ": " + res)
		}
		return 0
	case "events":
		n, _ := strconv.Atoi(args[1])
		got := make(chan wire.Event, n+16)
		ec, err := wire.Dial(ctx, "unix", os.Getenv(procenv.Daemon), wire.Hello{
			Role: wire.RoleClient, Name: procenv.ClientName(job, uint32(rank)), Token: os.Getenv(procenv.Token),
		}, wire.Options{OnEvent: func(ev *wire.Request) {
			var e wire.Event
			if wire.Unmarshal(ev.Body, &e) == nil {
				select {
				case got <- e:
				default:
				}
			}
		}})
		if err != nil {
			fmt.Println("dial:", err)
			return 1
		}
		defer ec.Close()
		if err := ec.Call(ctx, wire.KindEventSub, &wire.EventSubReq{Kinds: []string{wire.EvApp}, Job: job}, nil); err != nil {
			fmt.Println("event.sub:", err)
			return 1
		}
		fmt.Println("ready")
		take := func(what string) (first uint64, ok bool) {
			var last uint64
			for i := range n {
				select {
				case e := <-got:
					if e.Seq <= last || e.Msg != strconv.Itoa(i) {
						fmt.Printf("%s %d: seq %d after %d, msg %q\n", what, i, e.Seq, last, e.Msg)
						return 0, false
					}
					if i == 0 {
						first = e.Seq
					}
					last = e.Seq
				case <-ctx.Done():
					fmt.Printf("%s %d: %v\n", what, i, ctx.Err())
					return 0, false
				}
			}
			return first, true
		}
		first, ok := take("event")
		if !ok {
			return 1
		}
		// A second subscription asks for the same events again (a replay
		// from the master's ring), after newer ones reached this daemon.
		if err := ec.Call(ctx, wire.KindEventSub, &wire.EventSubReq{Kinds: []string{wire.EvApp}, Job: job, Since: first - 1}, nil); err != nil {
			fmt.Println("event.sub again:", err)
			return 1
		}
		if _, ok := take("replayed"); !ok {
			return 1
		}
		fmt.Println("ok", n)
		return 0
	case "fenceloop":
		n, _ := strconv.Atoi(args[1])
		var tmo, nap int64
		if len(args) > 2 {
			tmo, _ = strconv.ParseInt(args[2], 10, 64)
		}
		if len(args) > 3 {
			nap, _ = strconv.ParseInt(args[3], 10, 64)
		}
		napper := uint64(1)
		if len(args) > 4 {
			napper, _ = strconv.ParseUint(args[4], 10, 32)
		}
		size, _ := strconv.ParseUint(os.Getenv(procenv.Size), 10, 32)
		for i := range n {
			key := "k" + strconv.Itoa(i)
			val := []byte(rankS + "/" + strconv.Itoa(i))
			if err := c.Call(ctx, wire.KindKVCommit, &wire.KVCommitReq{Job: job, Rank: uint32(rank), Data: []wire.KV{{Key: key, Value: val}}}, nil); err != nil {
				fmt.Printf("commit %d: %v\n", i, err)
				return 1
			}
			if rank == napper && i == n-1 && nap > 0 {
				time.Sleep(time.Duration(nap) * time.Millisecond)
			}
			if err := c.Call(ctx, wire.KindFence, &wire.FenceReq{ID: "loop", Collect: true, TimeoutMS: tmo}, nil); err != nil {
				fmt.Printf("fence %d: %s: %v\n", i, wire.CodeOf(err), err)
				return 1
			}
			for r := range size {
				var v wire.KVGetReply
				if err := c.Call(ctx, wire.KindKVGet, &wire.KVGetReq{Rank: uint32(r), Key: key}, &v); err != nil || string(v.Value) != strconv.FormatUint(r, 10)+"/"+strconv.Itoa(i) {
					fmt.Printf("fence %d: rank %d's value %q (%v)\n", i, r, v.Value, err)
					return 1
				}
			}
			fmt.Println("round", i)
		}
		fmt.Println("ok", n)
		return 0
	case "abort":
		if rank != 0 {
			time.Sleep(30 * time.Second) // killed by the abort
			return 0
		}
		st, _ := strconv.Atoi(args[1])
		if err := c.Call(ctx, wire.KindSessionAbort, &wire.AbortReq{Status: st, Msg: "test abort"}, nil); err != nil {
			fmt.Fprintln(os.Stderr, "abort:", err)
			return 1
		}
		time.Sleep(30 * time.Second)
		return 0
	}
	return 2
}

// testGrace is the SIGTERM→SIGKILL grace in tests: short, so that
// processes that ignore SIGTERM do not slow the tests down.
const testGrace = 300 * time.Millisecond

// testDVM is a DVM of virtual nodes for one test, stopped and checked for
// leftovers in the test's cleanup.
type testDVM struct {
	t    testing.TB
	m    *Master
	c    *tool.Client
	dir  string
	mark string
	env  []string

	mu      sync.Mutex
	out     map[string][]wire.OutputLine // by job
	changed chan struct{}                // closed and replaced on every output line
}

func testLogger() *slog.Logger {
	if os.Getenv("DYNRT_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// startDVM starts a DVM of k virtual nodes with s slots each (node 0 in
// this process, the others as re-executed test binaries); opts adjust its
// configuration.
// testEnv is the environment of what the tests start: this process's
// without DYNRT_* and the role, with mark.
func testEnv(mark string) []string {
	base := []string{envMark + "=" + mark}
	// Race-instrumented binaries sleep a second before exiting unless
	// told otherwise; the re-executed daemons and applications need not.
	gorace := "GORACE=atexit_sleep_ms=0"
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "GORACE="):
			gorace = kv + " atexit_sleep_ms=0"
		case !strings.HasPrefix(kv, envRole+"=") && !strings.HasPrefix(kv, "DYNRT_"):
			base = append(base, kv)
		}
	}
	return append(base, gorace)
}

func startDVM(t testing.TB, k, s int, opts ...func(*Config)) *testDVM {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "d")
	mark := leakcheck.NewMark(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	base := testEnv(mark)
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
	cfg := Config{
		Dir: dir, Nodes: nodes, Starter: starter, KillGrace: testGrace, Logger: testLogger(),
		Env: func(string) string { return "" },
		// The production default of misses: a busy side no longer blames a
		// live peer (wire.Conn.Heard, late ticks). The tests of
		// failure detection set their own.
		HeartbeatInterval: time.Second, HeartbeatMisses: 3,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if v, ok := cfg.Starter.(sshVia); ok {
		cfg.Starter = v.starter(t, exe, append([]string{envRole + "=daemon"}, base...))
	}
	m, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start DVM: %v", err)
	}
	d := &testDVM{t: t, m: m, dir: dir, mark: mark, env: base, out: map[string][]wire.OutputLine{}, changed: make(chan struct{})}
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
		leakcheck.AssertClean(t, dir, mark, daemonPIDs)
	})
	d.c = d.attach()
	d.c.OnOutput(func(l wire.OutputLine) {
		d.mu.Lock()
		d.out[l.Job] = append(d.out[l.Job], l)
		close(d.changed)
		d.changed = make(chan struct{})
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

func (d *testDVM) attach() *tool.Client {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := tool.Attach(ctx, tool.Options{Dir: d.dir, Env: func(string) string { return "" }, Name: "test"})
	if err != nil {
		d.t.Fatalf("attach: %v", err)
	}
	return c
}

// launch starts a job with the test environment and forwarded output.
func (d *testDVM) launch(req wire.JobLaunchReq) (wire.JobLaunchReply, error) {
	req.Env = append(append([]string(nil), d.env...), req.Env...)
	req.Output.Forward = true
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return d.c.Launch(ctx, req)
}

func (d *testDVM) wait(job string) wire.JobInfo {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	end, err := d.c.WaitJob(ctx, job)
	if err != nil {
		d.t.Fatalf("wait for %s: %v", job, err)
	}
	return end
}

// stopWaiting stops the DVM (dvm stop) while a second client waits for
// job, and returns the job's end.
func (d *testDVM) stopWaiting(job string) wire.JobInfo {
	d.t.Helper()
	waiter := d.attach()
	defer waiter.Close()
	ended := make(chan wire.JobInfo, 1)
	go func() {
		end, err := waiter.WaitJob(context.Background(), job)
		if err != nil {
			d.t.Errorf("wait: %v", err)
		}
		ended <- end
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := d.c.StopDVM(ctx, 0); err != nil {
		d.t.Fatal(err)
	}
	select {
	case <-d.m.Done():
	case <-ctx.Done():
		d.t.Fatal("master did not stop")
	}
	return <-ended
}

// run launches a job and waits for its end.
func (d *testDVM) run(req wire.JobLaunchReq) (wire.JobLaunchReply, wire.JobInfo) {
	d.t.Helper()
	rep, err := d.launch(req)
	if err != nil {
		d.t.Fatalf("launch %v: %v", req.Argv, err)
	}
	return rep, d.wait(rep.Job)
}

func (d *testDVM) output(job string) []wire.OutputLine {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]wire.OutputLine(nil), d.out[job]...)
}

// waitLines waits until job has printed n lines.
func (d *testDVM) waitLines(job string, n int) {
	d.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		d.mu.Lock()
		got, ch := len(d.out[job]), d.changed
		d.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			d.t.Fatalf("job %s printed %d lines, want %d", job, got, n)
		}
	}
}

func (d *testDVM) procs(job string) []wire.ProcInfo {
	d.t.Helper()
	info, err := d.c.Job(context.Background(), wire.JobStateReq{Job: job, Procs: true})
	if err != nil {
		d.t.Fatal(err)
	}
	return info.Procs
}

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }
