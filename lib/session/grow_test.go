package session_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/wire"
)

// TestGrowDVMThenJob is the story of a DVM that gains and loses hosts
// under a malleable job (internal/malleable), with real daemons: the DVM
// grows by node2, the job grows onto it by an ADD (its new ranks run
// there) and shrinks off it by a SUB, and node2 leaves idle; then the DVM
// grows by node3, the job grows onto it again, and `dvm shrink --drain`
// moves those ranks out by a SUB the job accepts like any other before
// node3 leaves. The job ends cleanly after its fourth change.
func TestGrowDVMThenJob(t *testing.T) {
	d := startRCDVM(t, 2, 2)
	job := d.start(4, "-last", "4")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	grow := func(name string) wire.NodeInfo {
		t.Helper()
		nodes, err := d.c.Grow(ctx, wire.DVMGrowReq{Hosts: []wire.GrowHost{{Name: name, Slots: 2}}})
		if err != nil || len(nodes) != 1 || nodes[0].Name != name {
			t.Fatalf("grow by %s: %v %+v", name, err, nodes)
		}
		return nodes[0]
	}
	// onlyOn checks that a change's processes run on node alone.
	onlyOn := func(rc wire.RC, node string) {
		t.Helper()
		if len(rc.Placement) != 1 || rc.Placement[0].Node != node || rc.Placement[0].Ranks.String() != rc.Ranks.String() {
			t.Fatalf("%s %s ranks %s placed %+v, want all on %s", rc.Delta, rc.Type, rc.Ranks, rc.Placement, node)
		}
	}
	gone := func(n wire.NodeInfo) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !errors.Is(syscall.Kill(n.PID, 0), syscall.ESRCH); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the daemon of %s (pid %d) is still there after the shrink", n.Name, n.PID)
			}
		}
		st, err := d.c.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		slots := 0
		for _, x := range st.Nodes {
			if x.Name == n.Name {
				t.Fatalf("%s still listed after the shrink: %+v", n.Name, x)
			}
			slots += int(x.Slots)
		}
		if slots != 4 {
			t.Fatalf("%d slots after %s left, want 4", slots, n.Name)
		}
	}

	// 1, 2: onto node2 and off it again, then node2 leaves.
	n2 := grow("node2")
	add := d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCAdd, N: 2})
	onlyOn(add, "node2")
	d.waitFor(job.Job, "the new ranks' STATE on node2", func(ls []mline) bool {
		on := 0
		for _, l := range linesOf(ls, "STATE", add.Delta) {
			if l.Str("node") == "node2" {
				on++
			}
		}
		return on == 2
	})
	if _, err := d.c.Shrink(ctx, wire.DVMShrinkReq{Node: "node2"}); !errors.Is(err, wire.ErrBusy) {
		t.Fatalf("shrink of node2 while ranks 4-5 run there: %v, want ErrBusy", err)
	}
	sub := d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCSub, N: 2})
	onlyOn(sub, "node2") // the stack policy removes the newest slots first
	if _, err := d.c.Shrink(ctx, wire.DVMShrinkReq{Node: "node2"}); err != nil {
		t.Fatal(err)
	}
	gone(n2)

	// 3, 4: onto node3, then drained off it by the shrink.
	n3 := grow("node3")
	add = d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCAdd, N: 2})
	onlyOn(add, "node3")
	rep, err := d.c.Shrink(ctx, wire.DVMShrinkReq{Node: "node3", Drain: true, TimeoutMS: 20000})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Drained) != 1 {
		t.Fatalf("drain: %+v, want one SUB", rep.Drained)
	}
	drain := rep.Drained[0]
	if drain.Type != wire.RCSub || drain.Status != wire.RCFinalized || !drain.Settled || drain.Ranks.String() != add.Ranks.String() || drain.Delta != pset.DeltaName(job.App, 4) {
		t.Fatalf("the drain's SUB: %s %s %s settled=%v ranks %s; want SUB 4 FINALIZED, settled, ranks %s", drain.Delta, drain.Type, drain.Status, drain.Settled, drain.Ranks, add.Ranks)
	}
	onlyOn(drain, "node3")
	d.waitFor(job.Job, "LEFT lines of the drained ranks", func(ls []mline) bool {
		return ranksOf(linesOf(ls, "LEFT", drain.Delta)).String() == add.Ranks.String()
	})
	gone(n3)

	end := d.wait(job.Job)
	if end.State != wire.JobStateDone {
		t.Fatalf("job after the drain: %s (%s)", end.State, end.Msg)
	}
}
