package session_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/wire"
)

// Resource changes under faults (issue 11): refused and aborted changes
// give back everything they took, deaths during a change are failures or
// aborts by a documented rule, and no dead process stays in a set.

// killDaemon kills the daemon of node (SIGKILL) and waits until the
// master reports the node down.
func (d *rcDVM) killDaemon(node string) {
	d.t.Helper()
	ctx := context.Background()
	st, err := d.c.State(ctx)
	if err != nil {
		d.t.Fatal(err)
	}
	pid := 0
	for _, n := range st.Nodes {
		if n.Name == node {
			pid = n.PID
		}
	}
	if pid == 0 {
		d.t.Fatalf("no daemon pid for %s", node)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		d.t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		st, err := d.c.State(ctx)
		if err != nil {
			d.t.Fatal(err)
		}
		for _, n := range st.Nodes {
			if n.Name == node && n.State != wire.NodeUp {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.t.Fatalf("node %s still up 20s after its daemon was killed", node)
}

// liveProcs counts the processes of job that run (or are starting).
func (d *rcDVM) liveProcs(job string) (int, []wire.ProcInfo) {
	d.t.Helper()
	info, err := d.c.Job(context.Background(), wire.JobStateReq{Job: job, Procs: true})
	if err != nil {
		d.t.Fatal(err)
	}
	n := 0
	for _, p := range info.Procs {
		if p.State == wire.ProcStateRunning || p.State == wire.ProcStateLaunching {
			n++
		}
	}
	return n, info.Procs
}

// TestRCAddRefusedGivesBack: an ADD refused because its slots would land
// on a node whose daemon is gone gives back its slots and its ranks; the
// next ADD gets the ranks the refused one would have had, and the slots in
// use equal the live processes.
func TestRCAddRefusedGivesBack(t *testing.T) {
	d := startRCDVM(t, 3, 2)
	job := d.start(2, "-last", "1")
	d.killDaemon("node2")
	// 3 new processes: node1 has 2 free slots, the third would go to node2.
	_, err := d.request(wire.RCRequest{Job: job.Job, Type: wire.RCAdd, N: 3})
	if err == nil {
		t.Fatal("ADD 3 with node2 down succeeded")
	}
	if n := d.usedSlots(); n != 2 {
		t.Errorf("after the refused ADD: %d slots used, want 2", n)
	}
	info, err := d.c.Job(context.Background(), wire.JobStateReq{Job: job.Job})
	if err != nil || info.NextRank != 2 {
		t.Errorf("after the refused ADD: next rank %d (%v), want 2", info.NextRank, err)
	}
	rc := d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCAdd, N: 2})
	if rc.Ranks.String() != "2-3" || rc.Delta != pset.DeltaName(job.App, 1) {
		t.Errorf("ADD 2 after the refusal: %s ranks %s", rc.Delta, rc.Ranks)
	}
	live, _ := d.liveProcs(job.Job)
	if n := d.usedSlots(); n != live {
		t.Errorf("%d slots used for %d live processes", n, live)
	}
	if end := d.wait(job.Job); end.State != wire.JobStateDone || end.Code != 0 {
		t.Errorf("job ended %s code %d: %s", end.State, end.Code, end.Msg)
	}
}
