package session_test

import (
	"context"
	"errors"
	"strings"
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

// signalRank sends sig to the process of rank.
func (d *rcDVM) signalRank(job string, rank uint32, sig syscall.Signal) {
	d.t.Helper()
	_, procs := d.liveProcs(job)
	if int(rank) >= len(procs) || procs[rank].PID == 0 {
		d.t.Fatalf("no pid for rank %d of %s", rank, job)
	}
	if err := syscall.Kill(procs[rank].PID, sig); err != nil {
		d.t.Fatalf("signal rank %d: %v", rank, err)
	}
}

// waitSetVersion waits until set has at least version v.
func (d *rcDVM) waitSetVersion(job, set string, v uint32) {
	d.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if p := d.pset(job, set); p.Version >= v {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.t.Fatalf("%s never reached version %d", set, v)
}

// TestRCSubAbortRestores: a SUB that is canceled, or times out because a
// member of its bound set is stopped, after the root took the leaving
// ranks out of the application set (phase 2), puts them back: every live
// process is in the application set again and the next ADD works.
func TestRCSubAbortRestores(t *testing.T) {
	d := startRCDVM(t, 2, 4)
	ctx := context.Background()
	cases := []struct {
		name  string
		abort func(job wire.JobLaunchReply) // ends the SUB as ABORTED
		why   string
	}{
		{"timeout", func(job wire.JobLaunchReply) {
			if _, err := d.request(wire.RCRequest{Job: job.Job, Type: wire.RCSub, N: 2, ConfirmMS: 1500}); !errors.Is(err, wire.ErrAborted) {
				t.Fatalf("SUB with a stopped member: %v", err)
			}
		}, "not accepted within"},
		{"cancel", func(job wire.JobLaunchReply) {
			rc, err := d.c.RequestRC(ctx, wire.RCRequest{Job: job.Job, Type: wire.RCSub, N: 2})
			if err != nil {
				t.Fatal(err)
			}
			d.waitSetVersion(job.Job, pset.AppName(job.App), 2) // the root's DIFFERENCE
			if _, err := d.c.CancelRC(ctx, rc.Delta, "test cancels"); err != nil {
				t.Fatal(err)
			}
			d.settled(rc.Delta)
		}, "test cancels"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			job := d.start(2, "-last", "3")
			d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCAdd, N: 2}) // ranks 2-3
			d.signalRank(job.Job, 1, syscall.SIGSTOP)
			c.abort(job)
			rc, err := d.c.RC(ctx, pset.DeltaName(job.App, 2))
			if err != nil || rc.Status != wire.RCAborted || !strings.Contains(rc.Reason, c.why) {
				t.Errorf("SUB: %s (%s), %v", rc.Status, rc.Reason, err)
			}
			d.signalRank(job.Job, 1, syscall.SIGCONT)
			if as := d.pset(job.Job, pset.AppName(job.App)); as.Members.String() != "0-3" {
				t.Errorf("application set after the aborted SUB: %s (version %d), want 0-3", as.Members, as.Version)
			}
			if n := d.usedSlots(); n != 4 {
				t.Errorf("%d slots used, want 4", n)
			}
			rc = d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCAdd, N: 1})
			if rc.Ranks.String() != "4" {
				t.Errorf("ADD after the aborted SUB: ranks %s", rc.Ranks)
			}
			if as := d.pset(job.Job, pset.AppName(job.App)); as.Members.String() != "0-4" {
				t.Errorf("application set after the next ADD: %s", as.Members)
			}
			if end := d.wait(job.Job); end.State != wire.JobStateDone || end.Code != 0 {
				t.Errorf("job ended %s code %d: %s", end.State, end.Code, end.Msg)
			}
		})
	}
}

// settled waits until the change delta is settled.
func (d *rcDVM) settled(delta string) wire.RC {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rc, err := d.c.WaitRC(ctx, delta, "")
	if err != nil && !errors.Is(err, wire.ErrAborted) {
		d.t.Fatalf("wait for %s: %v", delta, err)
	}
	return rc
}
