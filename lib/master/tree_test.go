package master

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/wire"
)

// askers runs a job of one process per node that prints the set name of
// job as its daemon has it, and checks that every daemon has its size.
func (d *testDVM) askers(nodes int, job, name string, size uint32) {
	d.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		d.t.Fatal(err)
	}
	_, end := d.run(wire.JobLaunchReq{Argv: []string{exe, "pset", name, job}, N: uint32(nodes), MapBy: wire.MapByNode, Name: "asker", Env: []string{envRole + "=app"}})
	lines := d.output(end.Job)
	if end.State != wire.JobStateDone || len(lines) != nodes {
		d.t.Fatalf("asker: %s %q, %d lines: %v", end.State, end.Msg, len(lines), lines)
	}
	for _, l := range lines {
		var p wire.PsetInfo
		if err := json.Unmarshal(l.Line, &p); err != nil || p.Size != size {
			d.t.Errorf("rank %d (one per node) got %s from its daemon, want %d members (%v)", l.Rank, l.Line, size, err)
		}
	}
}

func (d *testDVM) treeStats() wire.TreeState {
	d.t.Helper()
	st, err := d.m.TreeStats(context.Background())
	if err != nil {
		d.t.Fatal(err)
	}
	return st
}

// TestTreeRelays: with a tree of radix 2 over 6 nodes (the master writes
// to node0 and node3; node0 passes on to node1 and node2, node3 to node4
// and node5), a job's set pushes go down the tree and reach every daemon.
// When node3 hangs with a push in flight, node4 and node5 get it from the
// master directly as soon as node3 is suspect: without that they would
// wait for the relay's answer, which comes only when node3's wait for its
// part times out (3/4 of the 30 s call timeout), and the set operation,
// which waits for every daemon that is not suspect, would not end within
// this test's 15 s.
func TestTreeRelays(t *testing.T) {
	const nodes = 6
	d := startDVM(t, nodes, 2, func(c *Config) {
		c.TreeRadix = 2
		c.HeartbeatMisses = 1000 // a hung daemon stays suspect, never down
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, n, err := d.m.PingRound(ctx, 2); err != nil || n != nodes {
		t.Fatalf("ping round down the tree: %d daemons answered (%v), want %d", n, err, nodes)
	}
	if st := d.treeStats(); st.Relays != 2 || st.Resends != 0 {
		t.Fatalf("after a ping round: %+v, want 2 relays (one per part) and no resend", st)
	}

	job, err := d.launch(wire.JobLaunchReq{Argv: []string{"sleep", "60"}, N: nodes, MapBy: wire.MapByNode, Name: "sleeper"})
	if err != nil {
		t.Fatal(err)
	}
	app := pset.AppName(job.App)
	before := d.treeStats()
	if _, err := d.c.PsetOp(ctx, wire.PsetOpReq{Job: job.Job, Op: wire.OpUnion, P1: app, P2: pset.NameWorld, Target: app + "/one"}); err != nil {
		t.Fatal(err)
	}
	if st := d.treeStats(); st.Relays != before.Relays+2 || st.Resends != 0 {
		t.Errorf("a set operation: tree stats went from %+v to %+v, want 2 more relays and no resend", before, st)
	}
	d.askers(nodes, job.Job, app+"/one", nodes)

	// node3 hangs: its part's push must not wait for it.
	pid := d.stopDaemon(t, 3)
	opCtx, opCancel := context.WithTimeout(ctx, 15*time.Second)
	defer opCancel()
	if _, err := d.c.PsetOp(opCtx, wire.PsetOpReq{Job: job.Job, Op: wire.OpUnion, P1: app, P2: pset.NameWorld, Target: app + "/two"}); err != nil {
		t.Fatalf("set operation with node3 hung in the tree: %v", err)
	}
	if st := d.treeStats(); st.Resends < 2 {
		t.Errorf("tree stats %+v: want node4 and node5 sent to directly", st)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); d.nodeState(3) != wire.NodeUp; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("node3 is %s 10 s after SIGCONT, want up", d.nodeState(3))
		}
	}
	// node3 applies the push it held when it stopped; node4 and node5
	// have it already and apply it once.
	d.askers(nodes, job.Job, app+"/two", nodes)
	d.askers(nodes, job.Job, app+"/one", nodes)
	d.kill(job.Job)
}

// TestTreeRelayNeedsToken: another daemon reaches a daemon's relay
// service on its client socket (by a second name of it) with the DVM
// token; a dialer that claims to be a daemon without it is refused.
func TestTreeRelayNeedsToken(t *testing.T) {
	d := startDVM(t, 2, 1, func(c *Config) { c.TreeRadix = 1 })
	var addr, token string
	if err := do(context.Background(), d.m, func(s *state) error {
		addr, token = s.nodes[1].relay, s.m.info.Token
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(addr) < 6 || addr[:5] != "unix:" {
		t.Fatalf("node1's relay address %q, want unix:<a name of its client socket>", addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// No wait: the relay name of the socket is there from before the
	// daemon registered (its client socket's own name comes after).
	for _, tc := range []struct {
		token string
		ok    bool
	}{{"", false}, {"not-the-token", false}, {token, true}} {
		c, err := wire.Dial(ctx, "unix", addr[5:], wire.Hello{Role: wire.RoleDaemon, Name: "intruder", Token: tc.token}, wire.Options{})
		if !tc.ok {
			if err == nil {
				c.Close()
				t.Errorf("token %q: a daemon's hello was admitted", tc.token)
			} else if wire.CodeOf(err) != wire.CodePermission {
				t.Errorf("token %q: %v, want a permission error", tc.token, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("with the DVM token: %v", err)
		}
		// A ping relayed to node1 alone, and a kind that may not be relayed.
		var rep wire.NodeRelayReply
		raw, _ := wire.Marshal(&wire.Ping{Seq: 1})
		if err := c.Call(ctx, wire.KindNodeRelay, &wire.NodeRelay{Kind: wire.KindPing, Body: raw}, &rep); err != nil || len(rep.Failed) != 0 {
			t.Errorf("relayed ping: %v %+v", err, rep)
		}
		err = c.Call(ctx, wire.KindNodeRelay, &wire.NodeRelay{Kind: wire.KindNodeStop}, &rep)
		if wire.CodeOf(err) != wire.CodeInvalid {
			t.Errorf("relayed node.stop: %v, want an invalid-request error", err)
		}
		c.Close()
	}
}

// TestTreeLaunchResend: a launch goes down a tree of radix 2 over 6 nodes
// (the master writes to node0 and node3; node3 passes it on to node4 and
// node5). node4's relay name is gone, so node3 reports it not reached;
// the master then sends node4 the launch over its own connection, and
// every rank runs once, on its node, with the pid its daemon reported.
func TestTreeLaunchResend(t *testing.T) {
	const nodes = 6
	d := startDVM(t, nodes, 1, func(c *Config) { c.TreeRadix = 2 })
	var addr string
	if err := do(context.Background(), d.m, func(s *state) error {
		addr = s.nodes[4].relay
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(addr) < 6 || addr[:5] != "unix:" {
		t.Fatalf("node4's relay address %q, want unix:<a name of its client socket>", addr)
	}
	if err := os.Remove(addr[5:]); err != nil {
		t.Fatal(err)
	}
	before := d.treeStats()
	job, err := d.launch(wire.JobLaunchReq{Argv: sh(`exec sleep 60`), N: nodes, MapBy: wire.MapByNode})
	if err != nil {
		t.Fatal(err)
	}
	if st := d.treeStats(); st.Relays != before.Relays+2 || st.Resends != before.Resends+1 {
		t.Errorf("tree stats went from %+v to %+v over the launch: want 2 relays and node4's resend", before, st)
	}
	where := map[uint32]string{}
	for _, pl := range job.Placement {
		for r := range pl.Ranks.All() {
			where[r] = pl.Node
		}
	}
	procs := d.procs(job.Job)
	if len(procs) != nodes {
		t.Fatalf("%d processes, want %d", len(procs), nodes)
	}
	for _, p := range procs {
		if p.State != wire.ProcStateRunning || p.PID <= 0 || p.Node != where[p.Rank] || syscall.Kill(p.PID, 0) != nil {
			t.Errorf("rank %d: %+v, want running on %s under the pid its daemon reported", p.Rank, p, where[p.Rank])
		}
	}
	d.kill(job.Job)
}

// TestTreeStallLeaf: a relay over 6 nodes with radix 2 while node4, a
// leaf below node3, is hung. Once node4 is suspect, node3 and node5 are
// asked directly (node3's answer for its part waits for node4 until the
// relay's own timeout, 22.5 s); once node4 is declared down, its place is
// settled at once. A launch down the tree used to wait that long for the
// answer of a node whose daemon hung during it, while the job's other
// processes ran and a fence over them waited for a rank nobody had
// declared lost (seen in a chaos run under load).
func TestTreeStallLeaf(t *testing.T) {
	const nodes = 6
	d := startDVM(t, nodes, 1, func(c *Config) {
		c.TreeRadix = 2
		c.HeartbeatMisses = 1000 // down only when the test says so
	})
	raw, err := wire.Marshal(&wire.Ping{Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	type settled struct {
		idx int
		err error
	}
	ch := make(chan settled, 2*nodes)
	relay := func(seq uint64, then func(s *state)) {
		t.Helper()
		if err := do(context.Background(), d.m, func(s *state) error {
			s.relay(seq, 2, "", wire.KindPing, raw, s.nodes, func(s *state, f *relayFlight, i int, err error) {
				ch <- settled{f.nodes[i].idx, err}
			}, nil, nil, nil)
			if then != nil {
				then(s)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[int]bool{}
	wait := func(want ...int) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for !allIn(got, want) {
			select {
			case st := <-ch:
				if st.err != nil {
					t.Errorf("node%d settled with %v", st.idx, st.err)
				}
				got[st.idx] = true
			case <-timeout:
				t.Fatalf("settled within 10 s: %v; want %v", got, want)
			}
		}
	}
	// A first round with every daemon up: node3 then holds a connection
	// to node4, on which the next relay waits instead of failing to dial.
	relay(1, nil)
	wait(0, 1, 2, 3, 4, 5)
	clear(got)
	pid := d.stopDaemon(t, 4)
	defer func() { _ = syscall.Kill(pid, syscall.SIGCONT) }()
	relay(2, func(s *state) { s.release(s.nodes[4]) }) // what the heartbeat does when node4 misses a ping
	wait(0, 1, 2, 3, 5)
	if got[4] {
		t.Fatal("node4 settled while hung and not yet down")
	}
	if err := do(context.Background(), d.m, func(s *state) error {
		s.declareDown(s.nodes[4], errors.New("test: declared down"))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	wait(4)
}

func allIn(got map[int]bool, want []int) bool {
	for _, i := range want {
		if !got[i] {
			return false
		}
	}
	return true
}

// TestTreeStallUnqueued: a relay that does not go through the push queues
// (a fence's collected data, a ping round) is sent directly to the
// subtree of a daemon that becomes suspect, as a push is: here a ping
// relayed over 6 nodes with radix 2 while node3, the head of [3 4 5], is
// stopped. Without that, node4 and node5 would wait for node3's call to
// time out (the master's 30 s call timeout).
func TestTreeStallUnqueued(t *testing.T) {
	const nodes = 6
	d := startDVM(t, nodes, 1, func(c *Config) {
		c.TreeRadix = 2
		c.HeartbeatMisses = 1000 // a hung daemon stays suspect, never down
	})
	pid := d.stopDaemon(t, 3)
	defer func() {
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Error(err)
		}
	}()
	raw, err := wire.Marshal(&wire.Ping{Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	settled := make(chan int, nodes)
	before := d.treeStats()
	if err := do(context.Background(), d.m, func(s *state) error {
		s.relay(0, 2, "", wire.KindPing, raw, s.nodes, func(s *state, f *relayFlight, i int, err error) {
			settled <- f.nodes[i].idx
		}, nil, nil, nil)
		s.release(s.nodes[3]) // what the heartbeat does when node3 misses a ping
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got := map[int]bool{}
	timeout := time.After(10 * time.Second)
	for !got[4] || !got[5] {
		select {
		case idx := <-settled:
			got[idx] = true
		case <-timeout:
			t.Fatalf("settled within 10 s: %v; want node4 and node5, sent to directly once node3 is suspect", got)
		}
	}
	if got[3] {
		t.Error("node3 settled while stopped")
	}
	if st := d.treeStats(); st.Resends != before.Resends+2 {
		t.Errorf("tree stats went from %+v to %+v: want node4 and node5 sent to directly", before, st)
	}
}
