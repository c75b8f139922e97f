package simdvm

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/master"
	"github.com/dynrt/dynrt/lib/simnode"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// start starts a simulated DVM that is stopped, and checked for
// leftovers, when t ends.
func start(t *testing.T, nodes, slots int, cfg ...func(*master.Config)) (*DVM, *tool.Client) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "d")
	goroutines := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := Options{Nodes: nodes, Slots: slots, Dir: dir}
	if len(cfg) > 0 {
		o.Master = func(c *master.Config) {
			for _, f := range cfg {
				f(c)
			}
		}
	}
	if path := os.Getenv("SIMDVM_LOG"); path != "" { // a debug log of the master and daemons, to read by hand
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		o.Logger = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	d, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := d.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
		if n := d.Running(); n != 0 {
			t.Errorf("%d simulated processes still running after the stop", n)
		}
		// Every daemon, connection and process is a goroutine: they must
		// all be gone.
		deadline := time.Now().Add(10 * time.Second)
		for runtime.NumGoroutine() > goroutines && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > goroutines {
			buf := make([]byte, 1<<20)
			t.Errorf("%d goroutines after the stop, %d before the start:\n%s", n, goroutines, buf[:runtime.Stack(buf, true)])
		}
		if left, _ := filepath.Glob(filepath.Join(dir, "*", "*")); len(left) > 0 {
			t.Errorf("files left in the rendezvous directory: %v", left)
		}
	})
	return d, c
}

func launch(t *testing.T, c *tool.Client, req wire.JobLaunchReq) wire.JobLaunchReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := c.Launch(ctx, req)
	if err != nil {
		t.Fatalf("launch %v: %v", req.Argv, err)
	}
	return rep
}

// TestLaunchAndKill: a job filling a DVM of simulated nodes starts on
// every node, and a kill ends every process.
func TestLaunchAndKill(t *testing.T) {
	const nodes, slots = 16, 4
	d, c := start(t, nodes, slots)
	rep := launch(t, c, wire.JobLaunchReq{Argv: []string{simnode.Idle}, N: nodes * slots, PMI: wire.PMINone})
	if got := d.Running(); got != nodes*slots {
		t.Fatalf("%d simulated processes run after the launch, want %d", got, nodes*slots)
	}
	if len(rep.Placement) != nodes {
		t.Errorf("job placed on %d nodes, want %d", len(rep.Placement), nodes)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.KillJob(ctx, rep.Job, 0, time.Second); err != nil {
		t.Fatal(err)
	}
	info, err := c.WaitJob(ctx, rep.Job)
	if err != nil {
		t.Fatal(err)
	}
	if info.State != wire.JobStateKilled || d.Running() != 0 {
		t.Errorf("after the kill: job %s, %d processes running; want killed, 0", info.State, d.Running())
	}
}

// TestLaunchTree: with a tree of daemons, a launch goes down the tree as
// one request (each daemon starts the ranks the job data places on it),
// and the master learns every process's pid from the answers that come
// back up; a program the nodes lack fails every rank as without a tree.
func TestLaunchTree(t *testing.T) {
	const nodes, slots = 8, 4
	d, c := start(t, nodes, slots, func(c *master.Config) { c.TreeRadix = 2 })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before, err := d.M.TreeStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rep := launch(t, c, wire.JobLaunchReq{Argv: []string{simnode.Idle}, N: nodes * slots, PMI: wire.PMINone})
	st, err := d.M.TreeStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Relays != before.Relays+2 || st.Resends != 0 {
		t.Errorf("tree stats went from %+v to %+v over the launch: want 2 more relays (one per part), no resend", before, st)
	}
	if got := d.Running(); got != nodes*slots {
		t.Fatalf("%d simulated processes run after the launch, want %d", got, nodes*slots)
	}
	info, err := c.Job(ctx, wire.JobStateReq{Job: rep.Job, Procs: true})
	if err != nil {
		t.Fatal(err)
	}
	where := map[uint32]string{}
	for _, pl := range info.Placement {
		for r := range pl.Ranks.All() {
			where[r] = pl.Node
		}
	}
	if len(info.Procs) != nodes*slots {
		t.Fatalf("job info lists %d processes, want %d", len(info.Procs), nodes*slots)
	}
	for _, p := range info.Procs {
		if p.State != wire.ProcStateRunning || p.PID <= 0 || p.Started == 0 || p.Node != where[p.Rank] {
			t.Errorf("rank %d: %+v, want running on %s with its pid and start time", p.Rank, p, where[p.Rank])
		}
	}
	if err := c.KillJob(ctx, rep.Job, 0, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitJob(ctx, rep.Job); err != nil {
		t.Fatal(err)
	}
	missing := launch(t, c, wire.JobLaunchReq{Argv: []string{"/usr/bin/true"}, N: nodes * slots, PMI: wire.PMINone})
	end, err := c.WaitJob(ctx, missing.Job)
	if err != nil {
		t.Fatal(err)
	}
	if end.Code != 127 || d.Running() != 0 {
		t.Errorf("a missing program down the tree: code %d (%s), %d running; want 127, none", end.Code, end.Msg, d.Running())
	}
}

// TestExitCode: a simulated process's exit code is the job's, as a
// forked one's would be, and a program a simulated node does not have
// fails like a missing executable (127) with a message naming it.
func TestExitCode(t *testing.T) {
	_, c := start(t, 2, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		argv []string
		code int
		msg  string
	}{
		{[]string{simnode.Exit, "0"}, 0, ""},
		{[]string{simnode.Exit, "7"}, 7, "exited with code 7"},
		{[]string{"/usr/bin/true"}, 127, `no simulated program "/usr/bin/true"`},
	} {
		rep := launch(t, c, wire.JobLaunchReq{Argv: tc.argv, N: 3, PMI: wire.PMINone})
		info, err := c.WaitJob(ctx, rep.Job)
		if err != nil {
			t.Fatal(err)
		}
		if info.Code != tc.code || !strings.Contains(info.Msg, tc.msg) {
			t.Errorf("%v: code %d (%s), want %d with %q", tc.argv, info.Code, info.Msg, tc.code, tc.msg)
		}
	}
}

// TestFenceCollect: the simulated fence program's wire-up mode (commit a
// value, fence with collect, as PMI's barrier does) over several nodes, on
// a star and with a tree of radix 2 (the entries then go up the tree and
// the collected data down it, kv.fenced): rank 0 reads the last rank's value from its own daemon
// after the fences and reports the time; any process that fails prints
// ERROR.
func TestFenceCollect(t *testing.T) {
	for _, radix := range []int{0, 2} {
		t.Run(fmt.Sprintf("radix%d", radix), func(t *testing.T) {
			const nodes, slots = 6, 3
			d, c := start(t, nodes, slots, func(c *master.Config) { c.TreeRadix = radix })
			lines := make(chan string, nodes*slots)
			c.OnOutput(func(l wire.OutputLine) { lines <- fmt.Sprintf("rank %d: %s", l.Rank, l.Line) })
			rep := launch(t, c, wire.JobLaunchReq{Argv: []string{simnode.Fence, "3", "collect"}, N: nodes * slots, PMI: wire.PMINone, Output: wire.OutputFlags{Forward: true}})
			select {
			case l := <-lines:
				if !strings.HasPrefix(l, "rank 0: FENCE ") {
					t.Fatalf("fence job: %s", l)
				}
			case <-time.After(time.Minute):
				t.Fatal("fence job: no result in a minute")
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := c.KillJob(ctx, rep.Job, 0, time.Second); err != nil {
				t.Fatal(err)
			}
			if _, err := c.WaitJob(ctx, rep.Job); err != nil {
				t.Fatal(err)
			}
			select {
			case l := <-lines:
				t.Errorf("fence job printed more: %s", l)
			default:
			}
			st, err := d.M.TreeStats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Three fences over 6 daemons: each instance's data goes down
			// the tree when there is one.
			if radix > 0 && (st.Fences != 3 || st.Resends != 0) || radix == 0 && st.Fences != 0 {
				t.Errorf("radix %d: tree stats %+v, want 3 fences' data down the tree (none without a tree) and no resend", radix, st)
			}
			// ... and every daemon's entries go up the tree: at least one
			// part per daemon and fence (its scout may be another).
			if radix > 0 && st.UpParts < 3*nodes || radix == 0 && st.Up != 0 {
				t.Errorf("radix %d: %d fence requests with %d daemons' entries gathered up the tree, want at least %d entries (none without a tree)", radix, st.Up, st.UpParts, 3*nodes)
			}
		})
	}
}

// TestAddSub: the simulated malleable program takes part in ADDs and SUBs
// through lib/session, until FINALIZED, and after each change every
// process sees, from its own daemon, the job's size and the job's ranks on
// its node as the master has them: the job data the daemons got as
// deltas (wire.JobData.Delta) adds up to the master's.
// rcStep is a resource change of a job and the size it leaves.
type rcStep struct {
	typ  string
	n    uint32
	size int
}

func TestAddSub(t *testing.T) {
	const nodes, slots = 8, 4
	addSub(t, nodes, slots, wire.JobLaunchReq{N: nodes*slots - 16, MapBy: wire.MapByNode},
		[]rcStep{{wire.RCAdd, 8, nodes*slots - 8}, {wire.RCSub, 12, nodes*slots - 20}, {wire.RCAdd, 4, nodes*slots - 16}, {wire.RCSub, 3, nodes*slots - 19}})
}

// TestAddToNewNodes grows a job that starts on one node onto the others:
// only the daemons of a job's nodes hold its data and sets (the master's
// node.hasJob), so each node an ADD reaches must be brought up to date
// before the change's pushes, which then go there as deltas.
func TestAddToNewNodes(t *testing.T) {
	const nodes, slots = 4, 2
	addSub(t, nodes, slots, wire.JobLaunchReq{N: 2, MapBy: wire.MapBySlot},
		[]rcStep{{wire.RCAdd, 2, 4}, {wire.RCSub, 3, 1}, {wire.RCAdd, 5, 6}, {wire.RCSub, 2, 4}, {wire.RCAdd, 4, 8}})
}

// TestAddSubTree is TestAddSub with a tree of radix 2: the records, sets
// and job data of each change go down the tree to the daemons that hold
// the job (as deltas where they can), and every process must see the same.
func TestAddSubTree(t *testing.T) {
	const nodes, slots = 8, 4
	d := addSub(t, nodes, slots, wire.JobLaunchReq{N: nodes*slots - 16, MapBy: wire.MapByNode},
		[]rcStep{{wire.RCAdd, 8, nodes*slots - 8}, {wire.RCSub, 12, nodes*slots - 20}, {wire.RCAdd, 4, nodes*slots - 16}, {wire.RCSub, 3, nodes*slots - 19}},
		func(c *master.Config) { c.TreeRadix = 2 })
	st, err := d.M.TreeStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Four changes, each with several pushes to all 8 nodes, 2 parts each.
	if st.Relays < 4*2*2 || st.Resends != 0 {
		t.Errorf("tree stats %+v: want pushes down the tree and no resend on a healthy DVM", st)
	}
}

// addSub launches a malleable job on a simulated DVM, makes the changes
// one after the other, and checks after each what every process sees of
// the job (size, its node, the ranks there: the job data its daemon has)
// against the master's placement.
func addSub(t *testing.T, nodes, slots int, req wire.JobLaunchReq, steps []rcStep, cfg ...func(*master.Config)) *DVM {
	d, c := start(t, nodes, slots, cfg...)
	var mu sync.Mutex
	states := map[string]map[uint32]string{} // delta → rank → "size node ranks"
	c.OnOutput(func(l wire.OutputLine) {
		f := strings.Fields(string(l.Line))
		if len(f) != 5 || f[0] != "STATE" {
			t.Errorf("rank %d: %s", l.Rank, l.Line)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if states[f[1]] == nil {
			states[f[1]] = map[uint32]string{}
		}
		states[f[1]][l.Rank] = strings.Join(f[2:], " ")
	})
	req.Argv, req.PMI, req.Output = []string{simnode.Malleable, "report"}, wire.PMINone, wire.OutputFlags{Forward: true}
	rep := launch(t, c, req)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, step := range steps {
		rc, err := c.RequestRC(ctx, wire.RCRequest{Job: rep.Job, Type: step.typ, N: step.n, Wait: true})
		if err != nil {
			t.Fatalf("%s %d: %v", step.typ, step.n, err)
		}
		if rc.Status != wire.RCFinalized {
			t.Fatalf("%s %d: %s, want FINALIZED", step.typ, step.n, rc.Status)
		}
		info, err := c.Job(ctx, wire.JobStateReq{Job: rep.Job})
		if err != nil {
			t.Fatal(err)
		}
		if int(info.Size) != step.size || d.Running() != step.size {
			t.Errorf("after %s %d: job size %d, %d processes running; want %d", step.typ, step.n, info.Size, d.Running(), step.size)
		}
		want := map[uint32]string{}
		for _, pl := range info.Placement {
			for r := range pl.Ranks.All() {
				want[r] = fmt.Sprintf("%d %s %s", info.Size, pl.Node, pl.Ranks)
			}
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			mu.Lock()
			got := maps.Clone(states[rc.Delta])
			mu.Unlock()
			if maps.Equal(got, want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %s %d (%s): the processes saw (size node local-ranks)\n%v\nwant\n%v", step.typ, step.n, rc.Delta, got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return d
}

func TestMain(m *testing.M) { os.Exit(m.Run()) }
