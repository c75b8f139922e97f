package master

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/lib/launcher"
	"github.com/dynrt/dynrt/wire"
)

// The tests of a DVM that grows and shrinks (grow.go) with real daemons:
// the local launcher's virtual nodes and the join launcher. lib/session's
// tests drain a node under a malleable job.

// checkNodes fails the test if an invariant of grow.go is broken.
func (d *testDVM) checkNodes() {
	d.t.Helper()
	if err := do(context.Background(), d.m, func(s *state) error { return s.checkNodes() }); err != nil {
		d.t.Fatalf("invariants: %v", err)
	}
}

func (d *testDVM) grow(req wire.DVMGrowReq) ([]wire.NodeInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return d.c.Grow(ctx, req)
}

func (d *testDVM) shrink(req wire.DVMShrinkReq) (wire.DVMShrinkReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return d.c.Shrink(ctx, req)
}

// nodeStates returns name → state of the nodes listed by dvm.state, and
// the DVM's slot count.
func (d *testDVM) nodeStates() (map[string]string, int) {
	d.t.Helper()
	st, err := d.c.State(context.Background())
	if err != nil {
		d.t.Fatal(err)
	}
	out := map[string]string{}
	slots := 0
	for _, n := range st.Nodes {
		out[n.Name] = n.State
		slots += int(n.Slots)
	}
	return out, slots
}

// nodeLog collects the node.* events of the DVM.
type nodeLog struct {
	mu  sync.Mutex
	evs []wire.Event
}

func (d *testDVM) watchNodes() *nodeLog {
	d.t.Helper()
	ne := &nodeLog{}
	if _, err := d.c.Subscribe(context.Background(), wire.EventSubReq{Kinds: []string{"node."}}, func(ev wire.Event) {
		ne.mu.Lock()
		ne.evs = append(ne.evs, ev)
		ne.mu.Unlock()
	}); err != nil {
		d.t.Fatal(err)
	}
	return ne
}

// waitKinds waits until the events of node name include kinds in that
// order.
func (ne *nodeLog) waitKinds(t *testing.T, name string, kinds ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ne.mu.Lock()
		i := 0
		var seen []string
		for _, ev := range ne.evs {
			if ev.Node != name {
				continue
			}
			seen = append(seen, ev.Kind+": "+ev.Msg)
			if i < len(kinds) && ev.Kind == kinds[i] {
				i++
			}
		}
		ne.mu.Unlock()
		if i == len(kinds) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("events of node %s: %q; want kinds %v in order", name, seen, kinds)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func pidGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// waitPidGone waits a little for a process that was reaped to disappear.
func waitPidGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !pidGone(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("daemon pid %d still exists after the shrink", pid)
		}
	}
}

// TestGrowShrinkLocal: a DVM of 2 virtual nodes grows by one; a job is
// placed onto the new node; the node cannot leave while the job runs
// there; once the job ends it leaves, its daemon process is gone, its
// slots with it, and the events tell the story.
func TestGrowShrinkLocal(t *testing.T) {
	d := startDVM(t, 2, 2)
	ev := d.watchNodes()
	added, err := d.grow(wire.DVMGrowReq{Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(added) != 1 || added[0].Name != "node2" || added[0].Index != 2 || added[0].Slots != 2 || added[0].State != wire.NodeUp {
		t.Fatalf("grow returned %+v, want node2, index 2, 2 slots, up", added)
	}
	pid := added[0].PID
	if pid == 0 || pid == os.Getpid() || pidGone(pid) {
		t.Fatalf("node2's daemon pid %d: want a live process of its own", pid)
	}
	ev.waitKinds(t, "node2", wire.EvNodeUp, wire.EvNodeAdded)
	d.checkNodes()

	// 6 processes fill the 6 slots: ranks 4 and 5 go to the new node.
	rep := d.sleeper(6)
	procs := d.procs(rep.Job)
	for _, p := range procs {
		if p.Rank >= 4 && p.Node != "node2" {
			t.Fatalf("rank %d on %s, want node2", p.Rank, p.Node)
		}
	}
	d.checkNodes()

	_, err = d.shrink(wire.DVMShrinkReq{Node: "node2"})
	if !errors.Is(err, wire.ErrBusy) || !strings.Contains(err.Error(), "ranks 4-5") || !strings.Contains(err.Error(), "--drain") {
		t.Fatalf("shrink of a busy node: %v; want ErrBusy naming ranks 4-5 and --drain", err)
	}
	if states, _ := d.nodeStates(); states["node2"] != wire.NodeUp {
		t.Fatalf("node2 is %q after a refused shrink, want up", states["node2"])
	}
	d.kill(rep.Job)
	d.wait(rep.Job)

	out, err := d.shrink(wire.DVMShrinkReq{Node: "node2"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Node.Name != "node2" || len(out.Drained) != 0 {
		t.Fatalf("shrink returned %+v", out)
	}
	waitPidGone(t, pid)
	states, slots := d.nodeStates()
	if _, ok := states["node2"]; ok || slots != 4 {
		t.Fatalf("after the shrink: nodes %v, %d slots; want node2 gone and 4 slots", states, slots)
	}
	ev.waitKinds(t, "node2", wire.EvNodeAdded, wire.EvNodeLeaving, wire.EvNodeDown, wire.EvNodeRemoved)
	d.checkNodes()

	// Its slots are gone for good; the next node gets a new index.
	if _, err := d.launch(wire.JobLaunchReq{Argv: []string{"true"}, N: 5}); !errors.Is(err, wire.ErrNoResources) {
		t.Fatalf("5 processes on 4 slots after the shrink: %v, want ErrNoResources", err)
	}
	added, err = d.grow(wire.DVMGrowReq{Hosts: []wire.GrowHost{{Name: "node2", Slots: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if added[0].Index != 3 {
		t.Fatalf("node2 came back with index %d, want 3 (indices are never reused)", added[0].Index)
	}
	_, end := d.run(wire.JobLaunchReq{Argv: []string{"true"}, N: 5})
	if end.State != wire.JobStateDone {
		t.Fatalf("5 processes on the grown DVM: %+v", end)
	}
	d.checkNodes()
}

// TestGrowErrors: requests a DVM refuses, each with an error that says
// why, and the DVM unchanged afterwards.
func TestGrowErrors(t *testing.T) {
	d := startDVM(t, 2, 1, func(c *Config) { c.Limits.Nodes = 3 })
	tests := []struct {
		name string
		req  wire.DVMGrowReq
		err  error
		msg  string
	}{
		{"nothing", wire.DVMGrowReq{}, wire.ErrInvalid, "no nodes"},
		{"both", wire.DVMGrowReq{Nodes: 1, Hosts: []wire.GrowHost{{Name: "h", Slots: 1}}}, wire.ErrInvalid, "not both"},
		{"name taken", wire.DVMGrowReq{Hosts: []wire.GrowHost{{Name: "node1", Slots: 4}}}, wire.ErrExists, "already has a node node1"},
		{"twice", wire.DVMGrowReq{Hosts: []wire.GrowHost{{Name: "h", Slots: 1}, {Name: "h", Slots: 1}}}, wire.ErrInvalid, "named twice"},
		{"bad name", wire.DVMGrowReq{Hosts: []wire.GrowHost{{Name: "-oProxyCommand=x", Slots: 1}}}, wire.ErrInvalid, "starts with '-'"},
		{"no slots", wire.DVMGrowReq{Hosts: []wire.GrowHost{{Name: "h", Slots: 0}}}, wire.ErrInvalid, "0 slots"},
		{"over the node limit", wire.DVMGrowReq{Nodes: 2}, wire.ErrLimit, "nodes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := d.grow(tt.req)
			if !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("grow %+v: %v; want %v containing %q", tt.req, err, tt.err, tt.msg)
			}
		})
	}
	if states, slots := d.nodeStates(); len(states) != 2 || slots != 2 {
		t.Fatalf("after refused grows: nodes %v, %d slots", states, slots)
	}
	d.checkNodes()
}

// TestGrowDaemonFails: a grow whose daemon cannot start (it exits at
// once, saying why on stderr) fails naming the node and the exit, and
// leaves the DVM as it was: same nodes, same slots, nothing starting.
func TestGrowDaemonFails(t *testing.T) {
	d := startDVM(t, 2, 1)
	bad, err := launcher.New(launcher.Options{Kind: launcher.Local, Command: []string{"/bin/sh", "-c", "echo no such daemon >&2; exit 3"}, Env: d.env})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = d.m.AddNodes(ctx, bad, []alloc.Node{{Name: "nodeA", Slots: 2}, {Name: "nodeB", Slots: 2}}, nil, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "node nodeA exited before it registered (exited with code 3)") ||
		!strings.Contains(err.Error(), "no such daemon") || !strings.Contains(err.Error(), "unchanged") {
		t.Fatalf("grow with a failing daemon: %v; want the node, its exit status, its stderr and 'unchanged'", err)
	}
	states, slots := d.nodeStates()
	if len(states) != 2 || slots != 2 {
		t.Fatalf("after a failed grow: nodes %v, %d slots; want the 2 nodes of the start", states, slots)
	}
	d.checkNodes()
	// The names are free again, and a good grow works.
	if _, err := d.grow(wire.DVMGrowReq{Hosts: []wire.GrowHost{{Name: "nodeA", Slots: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, slots := d.nodeStates(); slots != 3 {
		t.Fatalf("%d slots after a grow by 1, want 3", slots)
	}
	d.checkNodes()
}

// TestShrinkErrors: the shrinks a DVM refuses.
func TestShrinkErrors(t *testing.T) {
	d := startDVM(t, 3, 1)
	d.sleeper(2) // on node0 and node1
	// A job that lives on node2 alone cannot be drained from it.
	only, err := d.launch(wire.JobLaunchReq{Argv: []string{"sleep", "30"}, N: 1, Name: "only"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  wire.DVMShrinkReq
		err  error
		msg  string
	}{
		{"unknown", wire.DVMShrinkReq{Node: "h9"}, wire.ErrNotFound, `no node "h9" (its nodes: node0, node1, node2)`},
		{"master's node", wire.DVMShrinkReq{Node: "node0"}, wire.ErrInvalid, "master's own node"},
		{"busy", wire.DVMShrinkReq{Node: "node2"}, wire.ErrBusy, "job only"},
		{"drain the whole job", wire.DVMShrinkReq{Node: "node2", Drain: true}, wire.ErrInvalid, "every live process of job only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := d.shrink(tt.req)
			if !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("shrink %+v: %v; want %v containing %q", tt.req, err, tt.err, tt.msg)
			}
		})
	}
	d.kill(only.Job)
	d.wait(only.Job)
	if states, _ := d.nodeStates(); len(states) != 3 || states["node2"] != wire.NodeUp {
		t.Fatalf("after refused shrinks: %v", states)
	}
	d.checkNodes()
}

// TestShrinkDrainNeverAccepted: a job whose processes never accept a SUB
// keeps its node: the drain's SUB aborts at its confirm timeout, the
// shrink fails saying so, the node is up again and takes processes, and
// the job still has every process.
func TestShrinkDrainNeverAccepted(t *testing.T) {
	d := startDVM(t, 2, 2)
	rep := d.sleeper(4) // ranks 2-3 on node1
	_, err := d.shrink(wire.DVMShrinkReq{Node: "node1", Drain: true, TimeoutMS: 500})
	if !errors.Is(err, wire.ErrAborted) || !strings.Contains(err.Error(), "ranks 2-3") || !strings.Contains(err.Error(), "stays in the DVM") {
		t.Fatalf("drain of a job that never accepts: %v; want ErrAborted naming ranks 2-3 and that the node stays", err)
	}
	if states, _ := d.nodeStates(); states["node1"] != wire.NodeUp {
		t.Fatalf("node1 is %q after a failed drain, want up", states["node1"])
	}
	live := 0
	for _, p := range d.procs(rep.Job) {
		if p.State == wire.ProcStateRunning {
			live++
		}
	}
	if live != 4 {
		t.Fatalf("%d of the job's 4 processes run after the failed drain", live)
	}
	d.kill(rep.Job)
	d.wait(rep.Job)
	// The node takes processes again.
	_, end := d.run(wire.JobLaunchReq{Argv: []string{"true"}, N: 4})
	if end.State != wire.JobStateDone {
		t.Fatalf("job on the kept node: %+v", end)
	}
	d.checkNodes()
}

// TestGrowShrinkJoin: a DVM of the join launcher grows by a node whose
// daemon is started by hand, as the user would with the printed command,
// and shrinks again: the daemon process exits.
func TestGrowShrinkJoin(t *testing.T) {
	join, err := launcher.New(launcher.Options{Kind: launcher.Join})
	if err != nil {
		t.Fatal(err)
	}
	d := startDVM(t, 1, 1, func(c *Config) { c.Starter = join; c.Bind = "127.0.0.1:0" })
	type result struct {
		nodes []wire.NodeInfo
		err   error
	}
	done := make(chan result, 1)
	go func() {
		nodes, err := d.grow(wire.DVMGrowReq{Hosts: []wire.GrowHost{{Name: "hj", Slots: 2}}})
		done <- result{nodes, err}
	}()
	// Wait until the master expects the node, then join it by hand over
	// TCP with the token, as `dynrun daemon --join` does.
	for {
		if states, _ := d.nodeStates(); states["hj"] == wire.NodeStarting {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	info := d.m.Info()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	spec := launcher.NodeSpec{Name: "hj", Slots: 2, DVM: info.ID, Master: info.TCP, Token: info.Token}
	by, err := launcher.New(launcher.Options{Kind: launcher.Local, Command: []string{exe}, Env: append([]string{envRole + "=daemon"}, d.env...)})
	if err != nil {
		t.Fatal(err)
	}
	daemon, err := by.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { daemon.Stop(testGrace) })
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.nodes) != 1 || r.nodes[0].Name != "hj" || r.nodes[0].PID != daemon.Pid() {
		t.Fatalf("grow returned %+v, want hj with pid %d", r.nodes, daemon.Pid())
	}
	_, end := d.run(wire.JobLaunchReq{Argv: []string{"true"}, N: 3})
	if end.State != wire.JobStateDone {
		t.Fatalf("job on the joined node: %+v", end)
	}
	if _, err := d.shrink(wire.DVMShrinkReq{Node: "hj"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-daemon.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the joined daemon did not exit after the shrink")
	}
	d.checkNodes()
}

// TestGrowShrinkConcurrent: grows, shrinks and launches race each other
// (run with -race); whatever wins, the invariants hold after every round
// and no process of any job ever ran on a node after it began to leave.
func TestGrowShrinkConcurrent(t *testing.T) {
	d := startDVM(t, 2, 2)
	ev := d.watchNodes()
	var (
		mu   sync.Mutex
		jobs []string
	)
	for round := range 3 {
		var wg sync.WaitGroup
		name := fmt.Sprintf("c%d", round)
		wg.Add(3)
		go func() {
			defer wg.Done()
			if _, err := d.grow(wire.DVMGrowReq{Hosts: []wire.GrowHost{{Name: name, Slots: 2}}}); err != nil {
				t.Errorf("grow %s: %v", name, err)
			}
		}()
		go func() {
			defer wg.Done()
			// node1 leaves in round 0; later shrinks race the grow of
			// the round's node: refused (not there yet, still joining,
			// or busy) or done, never anything else.
			target := "node1"
			if round > 0 {
				target = name
			}
			_, err := d.shrink(wire.DVMShrinkReq{Node: target})
			if err != nil && !errors.Is(err, wire.ErrNotFound) && !errors.Is(err, wire.ErrState) && !errors.Is(err, wire.ErrBusy) {
				t.Errorf("shrink %s: %v", target, err)
			}
		}()
		go func() {
			defer wg.Done()
			for range 3 {
				rep, err := d.launch(wire.JobLaunchReq{Argv: []string{"true"}, N: 2})
				if err != nil {
					if !errors.Is(err, wire.ErrNoResources) {
						t.Errorf("launch: %v", err)
					}
					continue
				}
				mu.Lock()
				jobs = append(jobs, rep.Job)
				mu.Unlock()
				d.wait(rep.Job)
			}
		}()
		wg.Wait()
		d.checkNodes()
	}
	// Every process ran on a node before it began to leave.
	ev.mu.Lock()
	leftAt := map[string]time.Time{}
	for _, e := range ev.evs {
		if e.Kind == wire.EvNodeLeaving {
			leftAt[e.Node] = time.Unix(0, e.Time)
		}
	}
	ev.mu.Unlock()
	for _, job := range jobs {
		for _, p := range d.procs(job) {
			if at, ok := leftAt[p.Node]; ok && p.Started > at.UnixNano() {
				t.Errorf("job %s rank %d started on %s after the node began to leave", job, p.Rank, p.Node)
			}
		}
	}
}

// TestGrowShrinkRandom: a seeded random sequence of grows, shrinks (with
// and without drain, of jobs that never accept), launches and kills, two
// at a time, over real daemons. Every operation either does its work or
// fails with one of the refusals it may meet; the invariants hold after
// every step; at the end every node but node 0 can leave, and the DVM is
// back to one node. TEST_GROW_SEED replays a sequence.
func TestGrowShrinkRandom(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("TEST_GROW_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("seed %d (TEST_GROW_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	d := startDVM(t, 2, 2)
	var (
		mu   sync.Mutex
		jobs []string
	)
	allowed := []error{wire.ErrBusy, wire.ErrAborted, wire.ErrInvalid, wire.ErrNotFound, wire.ErrState, wire.ErrNoResources}
	expected := func(err error) bool {
		for _, e := range allowed {
			if errors.Is(err, e) {
				return true
			}
		}
		return false
	}
	pickNode := func() string {
		st, err := d.c.State(context.Background())
		if err != nil || len(st.Nodes) < 2 {
			return "none"
		}
		return st.Nodes[1+rng.IntN(len(st.Nodes)-1)].Name
	}
	type op struct {
		what string
		run  func() error
	}
	newOp := func() op {
		switch rng.IntN(5) {
		case 0:
			k, s := 1+rng.IntN(2), 1+rng.IntN(3)
			return op{fmt.Sprintf("grow %d×%d", k, s), func() error {
				_, err := d.grow(wire.DVMGrowReq{Nodes: uint32(k), Slots: uint32(s)})
				return err
			}}
		case 1:
			name, drain := pickNode(), rng.IntN(2) == 0
			return op{fmt.Sprintf("shrink %s drain=%v", name, drain), func() error {
				_, err := d.shrink(wire.DVMShrinkReq{Node: name, Drain: drain, TimeoutMS: 300})
				return err
			}}
		case 2, 3:
			n := 1 + rng.IntN(3)
			return op{fmt.Sprintf("launch %d", n), func() error {
				rep, err := d.launch(wire.JobLaunchReq{Argv: []string{"sleep", "30"}, N: uint32(n)})
				if err == nil {
					mu.Lock()
					jobs = append(jobs, rep.Job)
					mu.Unlock()
				}
				return err
			}}
		}
		mu.Lock()
		var job string
		if len(jobs) > 0 {
			i := rng.IntN(len(jobs))
			job = jobs[i]
			jobs = append(jobs[:i], jobs[i+1:]...)
		}
		mu.Unlock()
		return op{"kill " + job, func() error {
			if job != "" {
				d.kill(job)
				d.wait(job)
			}
			return nil
		}}
	}
	for step := range 20 {
		ops := []op{newOp(), newOp()}
		var wg sync.WaitGroup
		for _, o := range ops {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := o.run(); err != nil && !expected(err) {
					t.Errorf("step %d: %s: unexpected error: %v", step, o.what, err)
				}
			}()
		}
		wg.Wait()
		d.checkNodes()
		if t.Failed() {
			return
		}
	}
	mu.Lock()
	left := jobs
	mu.Unlock()
	for _, j := range left {
		d.kill(j)
		d.wait(j)
	}
	st, err := d.c.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range st.Nodes[1:] {
		if _, err := d.shrink(wire.DVMShrinkReq{Node: n.Name}); err != nil {
			t.Errorf("final shrink of %s: %v", n.Name, err)
		}
	}
	if states, slots := d.nodeStates(); len(states) != 1 || slots != 2 {
		t.Fatalf("at the end: nodes %v, %d slots; want node0 alone", states, slots)
	}
	d.checkNodes()
}

// TestGrowVirtualNamesConcurrent: grows of local virtual nodes at the same
// time get distinct names (found by TestGrowShrinkRandom: the names were
// chosen in one turn of the loop and admitted in another, so two grows
// could pick the same one and the second failed with "already has a
// node").
func TestGrowVirtualNamesConcurrent(t *testing.T) {
	d := startDVM(t, 1, 1)
	const k = 6
	names := make(chan string, k)
	var wg sync.WaitGroup
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes, err := d.grow(wire.DVMGrowReq{Nodes: 1})
			if err != nil {
				t.Errorf("grow: %v", err)
				return
			}
			names <- nodes[0].Name
		}()
	}
	wg.Wait()
	close(names)
	seen := map[string]bool{}
	for n := range names {
		if seen[n] {
			t.Errorf("two grows named a node %s", n)
		}
		seen[n] = true
	}
	if states, _ := d.nodeStates(); len(states) != 1+k {
		t.Fatalf("%d nodes after %d grows by one, want %d", len(states), k, 1+k)
	}
	d.checkNodes()
}

// groupStarter starts the daemons of several nodes with one process, as
// the slurm launcher's one srun step does: a shell that runs a daemon per
// node and waits for them all.
type groupStarter struct {
	exe string
	env []string
}

func (groupStarter) Kind() string { return "group" }

func (g groupStarter) Start(ctx context.Context, spec launcher.NodeSpec) (*launcher.Daemon, error) {
	return g.StartGroup(ctx, []launcher.NodeSpec{spec})
}

func (g groupStarter) StartGroup(ctx context.Context, specs []launcher.NodeSpec) (*launcher.Daemon, error) {
	script := ""
	var names []string
	for _, sp := range specs {
		script += launcher.ShellJoin(append([]string{g.exe}, launcher.DaemonFlags(sp, false)...)) + " & "
		names = append(names, sp.Name)
	}
	sh, err := launcher.New(launcher.Options{Kind: launcher.Local, Command: []string{"/bin/sh", "-c", script + "wait", "sh"}, Env: g.env})
	if err != nil {
		return nil, err
	}
	spec := specs[0]
	spec.Name = strings.Join(names, ",")
	return sh.Start(ctx, spec)
}

// TestGrowGroupShrinkOne: nodes whose daemons one process runs (a group
// start, as slurm's srun step) join together; one of them leaves while
// the other keeps running jobs (the shared process is not killed with the
// first), and the process ends with the last of them.
func TestGrowGroupShrinkOne(t *testing.T) {
	d := startDVM(t, 1, 1)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	g := groupStarter{exe: exe, env: append([]string{envRole + "=daemon"}, d.env...)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	added, err := d.m.AddNodes(ctx, g, []alloc.Node{{Name: "ga", Slots: 1}, {Name: "gb", Slots: 1}}, nil, 20*time.Second)
	if err != nil || len(added) != 2 {
		t.Fatalf("grow by a group: %v %+v", err, added)
	}
	var group *launcher.Daemon
	_ = do(ctx, d.m, func(s *state) error { group = s.nodes[1].proc; return nil })
	if _, err := d.shrink(wire.DVMShrinkReq{Node: "ga"}); err != nil {
		t.Fatal(err)
	}
	waitPidGone(t, added[0].PID)
	// Longer than the shrink's wait for a daemon process (grace + 1 s):
	// gb's daemon must still be there.
	time.Sleep(testGrace + 1500*time.Millisecond)
	if states, _ := d.nodeStates(); states["gb"] != wire.NodeUp || pidGone(added[1].PID) {
		t.Fatalf("gb is %q (daemon pid %d gone: %v) after ga left; want it up", states["gb"], added[1].PID, pidGone(added[1].PID))
	}
	select {
	case <-group.Done():
		t.Fatal("the group's process ended with its first node")
	default:
	}
	_, end := d.run(wire.JobLaunchReq{Argv: []string{"true"}, N: 2})
	if end.State != wire.JobStateDone {
		t.Fatalf("job on node0 and gb: %+v", end)
	}
	if _, err := d.shrink(wire.DVMShrinkReq{Node: "gb"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-group.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the group's process did not end with its last node")
	}
	d.checkNodes()
}

// TestShrinkSlotsHeld: a node whose processes have all ended but whose
// slots are still held (ended processes of a change that has not settled:
// their slots go with it) cannot leave yet; once the slots are free it
// can. The held slot is made directly in the slot table.
func TestShrinkSlotsHeld(t *testing.T) {
	d := startDVM(t, 2, 1)
	if err := do(context.Background(), d.m, func(s *state) error {
		_, err := s.alloc.Allocate("settling", 1, alloc.Options{Nodes: []int{1}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.shrink(wire.DVMShrinkReq{Node: "node1"}); !errors.Is(err, wire.ErrBusy) || !strings.Contains(err.Error(), "still holds 1 slots") {
		t.Fatalf("shrink of a node with a held slot: %v, want ErrBusy naming the held slot", err)
	}
	if err := do(context.Background(), d.m, func(s *state) error { return s.alloc.ReleaseJob("settling") }); err != nil {
		t.Fatal(err)
	}
	if _, err := d.shrink(wire.DVMShrinkReq{Node: "node1"}); err != nil {
		t.Fatal(err)
	}
	d.checkNodes()
}

// releasingStarter is groupStarter that records Release calls, as the
// slurm launcher's grow job (launcher.SlurmGrow) cancels its job.
type releasingStarter struct {
	groupStarter
	mu       sync.Mutex
	released []string
}

func (r *releasingStarter) Release(_ context.Context, node string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.released = append(r.released, node)
	return nil
}

// TestStopReleasesNodes: stopping the DVM gives back what was taken for
// the nodes still in it (a Slurm grow job is cancelled), as a shrink
// does; a node that left earlier is not released twice.
func TestStopReleasesNodes(t *testing.T) {
	d := startDVM(t, 1, 1)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := &releasingStarter{groupStarter: groupStarter{exe: exe, env: append([]string{envRole + "=daemon"}, d.env...)}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := d.m.AddNodes(ctx, r, []alloc.Node{{Name: "ra", Slots: 1}, {Name: "rb", Slots: 1}}, nil, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := d.shrink(wire.DVMShrinkReq{Node: "ra"}); err != nil {
		t.Fatal(err)
	}
	if err := d.m.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Equal(r.released, []string{"ra", "rb"}) {
		t.Fatalf("released %q, want ra (shrink) then rb (stop)", r.released)
	}
}

// warnings is a slog handler that keeps the messages of warnings.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
	w.msgs = append(w.msgs, msg)
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.msgs)
}

// TestShrinkWarnsNothing: a node that leaves by dvm shrink is no failure,
// so the master logs no "node down" warning for it (it did, with the
// daemon's connection error, on every shrink).
func TestShrinkWarnsNothing(t *testing.T) {
	w := &warnings{}
	d := startDVM(t, 1, 2, func(c *Config) { c.Logger = slog.New(w) })
	if _, err := d.grow(wire.DVMGrowReq{Nodes: 1}); err != nil {
		t.Fatal(err)
	}
	ev := d.watchNodes()
	if _, err := d.shrink(wire.DVMShrinkReq{Node: "node1"}); err != nil {
		t.Fatal(err)
	}
	ev.waitKinds(t, "node1", wire.EvNodeRemoved)
	for _, m := range w.all() {
		if strings.Contains(m, "node down") {
			t.Errorf("warning logged for a node that left by shrink: %s", m)
		}
	}
}
