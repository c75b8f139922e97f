package master

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// fenceLines runs the testapp's fenceloop with args on every node of d
// (per processes a node) and returns each rank's last line.
func (d *testDVM) fenceLines(nodes, per int, args ...string) (map[uint32]string, wire.JobInfo) {
	d.t.Helper()
	_, end := d.run(wire.JobLaunchReq{Argv: append([]string{d.exe(), "fenceloop"}, args...), N: uint32(nodes * per),
		MapBy: wire.MapByNode, Name: "fencer", Env: []string{envRole + "=app"}, OnFailure: wire.OnFailureContinue})
	lines := map[uint32]string{}
	for _, l := range d.output(end.Job) {
		lines[l.Rank] = string(l.Line)
	}
	return lines, end
}

// TestTreeFenceUp: with a tree of radix 2 over 7 nodes, a job of two
// processes per node runs fences with collect over the whole job. Every
// daemon sends its entries to the daemon it got the job's launch from
// (node2 to node1, node1 and node3 to node0, ...), the heads send them to
// the master, and every round exchanges every rank's data. Without the
// tree, every daemon's entries reach the master on their own.
func TestTreeFenceUp(t *testing.T) {
	const nodes, per, rounds = 7, 2, 6
	d := startDVM(t, nodes, per, func(c *Config) { c.TreeRadix = 2 })
	before := d.treeStats()
	lines, end := d.fenceLines(nodes, per, "6")
	if end.State != wire.JobStateDone || len(lines) != nodes*per {
		t.Fatalf("job %s %q, lines %v", end.State, end.Msg, lines)
	}
	for r, l := range lines {
		if l != "ok 6" {
			t.Errorf("rank %d: %q, want ok 6", r, l)
		}
	}
	st := d.treeStats()
	up, parts := st.Up-before.Up, st.UpParts-before.UpParts
	// Each round, each node's whole entry is one part (its scout is
	// another, sent ahead).
	if parts < rounds*nodes || up == 0 {
		t.Errorf("the master served %d gathered requests with %d parts over %d rounds on %d nodes; want at least %d parts", up, parts, rounds, nodes, rounds*nodes)
	}
	t.Logf("%d gathered requests, %d parts (%.1f per request)", up, parts, float64(parts)/float64(max(up, 1)))
}

// TestTreeFenceUpTimeout: rank 1 enters 3 s late into a fence with a
// timeout of 800 ms. The gathered entries are taken back at their
// deadline: a rank gets timeout (and the others, once a rank that timed
// out has exited, aborted), not a hang until its own call gives up (20 s).
func TestTreeFenceUpTimeout(t *testing.T) {
	const nodes, per = 7, 1
	d := startDVM(t, nodes, per, func(c *Config) { c.TreeRadix = 2 })
	lines, _ := d.fenceLines(nodes, per, "1", "800", "3000")
	timeouts := 0
	for r := range uint32(nodes * per) {
		switch l := lines[r]; {
		case r == 1:
		case strings.HasPrefix(l, "fence 0: timeout"):
			timeouts++
		case !strings.HasPrefix(l, "fence 0: aborted") || !strings.Contains(l, "exited before entering"):
			t.Errorf("rank %d: %q, want fence 0: timeout, or aborted by a rank that exited", r, l)
		}
	}
	if timeouts == 0 {
		t.Errorf("no rank timed out: %v", lines)
	}
	if st := d.treeStats(); st.UpParts == 0 {
		t.Errorf("no entry went up the tree: %+v", st)
	}
}

// TestTreeFenceUpParentHung: node1's daemon, through which node2's fence
// entries go up the tree (radix 2 over 7 nodes), hangs after a first
// round (so node2 holds a connection to it) and before node2's process
// enters the second. The master declares node1 down after its heartbeat's
// dead time; the job goes on without its process (OnFailureContinue),
// which had entered, so the instance waits for rank 2. node2 gives its
// silent parent up after the same time: rank 2's entry fails (aborted,
// naming node1), and once rank 2 has exited so does everyone's, instead
// of all waiting until the processes give up (20 s).
func TestTreeFenceUpParentHung(t *testing.T) {
	const nodes = 7
	d := startDVM(t, nodes, 1, func(c *Config) { c.TreeRadix = 2 })
	rep, err := d.launch(wire.JobLaunchReq{Argv: []string{d.exe(), "fenceloop", "2", "0", "2000", "2"}, N: nodes,
		MapBy: wire.MapByNode, Name: "fencer", Env: []string{envRole + "=app"}, OnFailure: wire.OnFailureContinue})
	if err != nil {
		t.Fatal(err)
	}
	d.waitLines(rep.Job, nodes) // round 0 done everywhere
	d.stopDaemon(t, 1)
	start := time.Now()
	d.wait(rep.Job)
	took := time.Since(start)
	lines := map[uint32]string{}
	for _, l := range d.output(rep.Job) {
		lines[l.Rank] = string(l.Line)
	}
	if l := lines[2]; !strings.HasPrefix(l, "fence 1: aborted") || !strings.Contains(l, "node node1") {
		t.Errorf("rank 2 (node2, below node1): %q after %v, want fence 1: aborted, naming node1", l, took)
	}
	for _, r := range []uint32{0, 3, 4, 5, 6} {
		if !strings.HasPrefix(lines[r], "fence 1: aborted") {
			t.Errorf("rank %d: %q, want fence 1: aborted (rank 2 exited)", r, lines[r])
		}
	}
}

// exe is the test binary, which runs the test applications.
func (d *testDVM) exe() string {
	d.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		d.t.Fatal(err)
	}
	return exe
}

// TestTreeEvents: with a tree of radix 2 over 6 nodes, app events for a
// process on every node go down the tree. For every third event node3 is
// marked suspect, so that it gets that event over its own connection
// while its previous one came down the tree: the two paths mix, and each
// process must still get every event once and in order (its daemon holds
// one that overtook the event before it, lib/daemon/evorder.go). Then each
// subscribes again from the first event's Seq and must get all 30 again:
// the master's replay of older events after newer ones.
func TestTreeEvents(t *testing.T) {
	const nodes, n = 6, 30
	d := startDVM(t, nodes, 1, func(c *Config) { c.TreeRadix = 2 })
	rep, err := d.launch(wire.JobLaunchReq{Argv: []string{d.exe(), "events", strconv.Itoa(n)}, N: nodes,
		MapBy: wire.MapByNode, Name: "listener", Env: []string{envRole + "=app"}})
	if err != nil {
		t.Fatal(err)
	}
	d.waitLines(rep.Job, nodes) // every process subscribed
	before := d.treeStats()
	for i := range n {
		if err := do(context.Background(), d.m, func(s *state) error {
			n3 := s.nodes[3]
			was := n3.suspect
			n3.suspect = i%3 == 1
			s.publish(wire.Event{Kind: wire.EvApp, Job: rep.Job, Msg: strconv.Itoa(i)})
			n3.suspect = was
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	end := d.wait(rep.Job)
	lines := map[uint32]string{}
	for _, l := range d.output(rep.Job) {
		lines[l.Rank] = string(l.Line)
	}
	for r := range uint32(nodes) {
		if lines[r] != "ok "+strconv.Itoa(n) {
			t.Errorf("rank %d: %q, want ok %d", r, lines[r], n)
		}
	}
	if end.State != wire.JobStateDone {
		t.Errorf("job %s %q", end.State, end.Msg)
	}
	if st := d.treeStats(); st.Events-before.Events != n {
		t.Errorf("%d events went down the tree, want all %d", st.Events-before.Events, n)
	}
}

// TestTreeFenceUpNamed: a fence over named processes goes up the tree as
// one over the whole job does. Radix 2 over 7 nodes of one process each;
// every process enters a fence over the whole job, then one over ranks
// 0-2: those three complete it, and the master refuses the others' parts
// one by one (invalid: not a participant) without failing the rest.
func TestTreeFenceUpNamed(t *testing.T) {
	const nodes = 7
	d := startDVM(t, nodes, 1, func(c *Config) { c.TreeRadix = 2 })
	before := d.treeStats()
	_, end := d.run(wire.JobLaunchReq{Argv: []string{d.exe(), "fence"}, N: nodes, MapBy: wire.MapByNode, Name: "named",
		Env: []string{envRole + "=app"}})
	got := map[uint32][]string{}
	for _, l := range d.output(end.Job) {
		got[l.Rank] = append(got[l.Rank], string(l.Line))
	}
	for r := range uint32(nodes) {
		want := []string{"empty: ok", "0-2: ok"}
		if r > 2 {
			want[1] = "0-2: " + string(wire.CodeInvalid)
		}
		if !slices.Equal(got[r], want) {
			t.Errorf("rank %d: %v, want %v", r, got[r], want)
		}
	}
	if st := d.treeStats(); st.UpParts-before.UpParts < 2*nodes {
		t.Errorf("%d daemons' entries went up the tree, want at least %d (each node's, in both fences)", st.UpParts-before.UpParts, 2*nodes)
	}
}

// TestFencePartsBadInput: the master refuses a gathered fence request
// from anything but a daemon, without a job, or with a part that names no
// node or no processes, before anything is entered.
func TestFencePartsBadInput(t *testing.T) {
	a, b := net.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	accepted := make(chan *wire.Conn, 1)
	go func() {
		c, err := wire.Accept(ctx, b, wire.AcceptPolicy{Open: true}, wire.Options{})
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	dc, err := wire.Client(ctx, a, wire.Hello{Role: wire.RoleDaemon, Name: "n1"}, wire.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	fromDaemon := <-accepted
	if fromDaemon == nil {
		t.Fatal("no connection")
	}
	defer fromDaemon.Close()
	ss := &sessState{} // refused before the master is asked anything
	part := wire.FencePart{Node: "n1", Local: wire.Span(0, 1)}
	for _, tc := range []struct {
		name string
		conn *wire.Conn
		b    wire.FenceReq
		want error
		frag string
	}{
		{"not from a daemon", nil, wire.FenceReq{Job: "j", Parts: []wire.FencePart{part}}, wire.ErrPermission, "comes from a daemon"},
		{"no job", fromDaemon, wire.FenceReq{Parts: []wire.FencePart{part}}, wire.ErrInvalid, "no job"},
		{"a part without its node", fromDaemon, wire.FenceReq{Job: "j", Parts: []wire.FencePart{part, {Local: wire.Span(2, 2)}}}, wire.ErrInvalid, "part 1 without its node"},
		{"a part without processes", fromDaemon, wire.FenceReq{Job: "j", Parts: []wire.FencePart{{Node: "n2"}}}, wire.ErrInvalid, "part 0 without"},
		{"a part with bad ranges", fromDaemon, wire.FenceReq{Job: "j", Parts: []wire.FencePart{{Node: "n2", Local: wire.RankRanges{{Lo: 4, Hi: 1}}}}}, wire.ErrInvalid, "part 0"},
	} {
		_, err := ss.handleFenceParts(ctx, &wire.Request{Kind: wire.KindFence, Conn: tc.conn}, &tc.b)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.frag) {
			t.Errorf("%s: %v, want %v naming %q", tc.name, err, tc.want, tc.frag)
		}
	}
}
