package session_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/dvmtest"
	"github.com/dynrt/dynrt/lib/master"
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
	job := d.start(2, "-last", "2")
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
	if n := d.usedSlots(); n != 4 {
		t.Errorf("%d slots used for 4 live processes", n)
	}
	d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCSub, N: 1}) // change 2 ends the program
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

// startWith launches n processes of the malleable program with the
// launch options of req (Argv, N, Env and Output are filled in).
func (d *rcDVM) startWith(req wire.JobLaunchReq, n int, args ...string) wire.JobLaunchReply {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req.Argv, req.N, req.Env, req.Output = append([]string{d.mall}, args...), uint32(n), d.env, wire.OutputFlags{Forward: true}
	rep, err := d.c.Launch(ctx, req)
	if err != nil {
		d.t.Fatalf("launch malleable %v: %v", args, err)
	}
	return rep
}

// waitMembers waits until the latest application set of job has members
// want (the runtime takes dead ranks out on its own).
func (d *rcDVM) waitMembers(job wire.JobLaunchReply, want string) {
	d.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var p wire.PsetInfo
	for time.Now().Before(deadline) {
		if p = d.pset(job.Job, pset.AppName(job.App)); p.Members.String() == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.t.Fatalf("application set of %s: %s (version %d), want %s", job.App, p.Members, p.Version, want)
}

// waitStatus waits until the change delta has status st.
func (d *rcDVM) waitStatus(delta, st string) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := d.c.WaitRC(ctx, delta, st); err != nil {
		d.t.Fatalf("wait for %s %s: %v", delta, st, err)
	}
}

// TestRCSubMemberDies: a process named by a SUB that is announced but not
// yet accepted, and that is killed, is a failure of the job: without
// --keep-going the job is torn down and ends failed, naming the rank; with
// it the job goes on. Either way the SUB aborts, and with the job going on
// no set lists the dead rank and the next change works.
func TestRCSubMemberDies(t *testing.T) {
	d := startRCDVM(t, 2, 4)
	ctx := context.Background()
	for _, keep := range []bool{false, true} {
		job := d.startWith(wire.JobLaunchReq{KeepGoing: keep}, 4, "-last", "2")
		d.signalRank(job.Job, 1, syscall.SIGSTOP) // holds the accept fence: the SUB stays ANNOUNCED
		rc, err := d.c.RequestRC(ctx, wire.RCRequest{Job: job.Job, Type: wire.RCSub, Ranks: wire.Span(3, 3), ConfirmMS: 20000})
		if err != nil {
			t.Fatal(err)
		}
		d.signalRank(job.Job, 3, syscall.SIGKILL)
		got := d.settled(rc.Delta)
		if got.Status != wire.RCAborted || !strings.Contains(got.Reason, "rank 3") || !strings.Contains(got.Reason, "before the change was accepted") {
			t.Errorf("keep-going %v: SUB %s (%s), want ABORTED naming rank 3", keep, got.Status, got.Reason)
		}
		if len(got.Ended) != 1 || got.Ended[0].Rank != 3 || got.Ended[0].Signal != int(syscall.SIGKILL) {
			t.Errorf("keep-going %v: SUB record lists ended processes %+v", keep, got.Ended)
		}
		if !keep {
			end := d.wait(job.Job)
			if end.State != wire.JobStateFailed || end.Code == 0 || !strings.Contains(end.Msg, "rank 3") {
				t.Errorf("job ended %s code %d: %s; want failed naming rank 3", end.State, end.Code, end.Msg)
			}
			continue
		}
		d.signalRank(job.Job, 1, syscall.SIGCONT)
		d.waitMembers(job, "0-2")
		if live, _ := d.liveProcs(job.Job); d.usedSlots() != live {
			t.Errorf("%d slots used for %d live processes", d.usedSlots(), live)
		}
		if rc := d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCAdd, N: 1, ConfirmMS: 20000}); rc.Ranks.String() != "4" {
			t.Errorf("ADD after the dead rank: %s", rc.Ranks)
		}
		d.waitMembers(job, "0-2,4")
		end := d.wait(job.Job)
		if end.State != wire.JobStateFailed || end.Code == 0 {
			t.Errorf("keep-going job ended %s code %d: %s; want failed (a failure is still a failure)", end.State, end.Code, end.Msg)
		}
	}
}

// TestRCRemovedExitCode: a process a FINALIZED SUB removed that exits 5
// is no failure of the job (it had been told to leave), but its status is
// in the change's record and in the job's end message.
func TestRCRemovedExitCode(t *testing.T) {
	d := startRCDVM(t, 2, 4)
	job := d.start(3, "-last", "1", "-left-code", "5")
	rc := d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCSub, N: 1})
	if len(rc.Ended) != 1 || rc.Ended[0].Rank != 2 || rc.Ended[0].Code != 5 {
		t.Errorf("SUB record lists ended processes %+v, want rank 2 with code 5", rc.Ended)
	}
	end := d.wait(job.Job)
	if end.State != wire.JobStateDone || end.Code != 0 {
		t.Errorf("job ended %s code %d: %s; want done", end.State, end.Code, end.Msg)
	}
	if !strings.Contains(end.Msg, "rank 2") || !strings.Contains(end.Msg, "code 5") || !strings.Contains(end.Msg, "not a failure") {
		t.Errorf("end message %q does not report rank 2's exit code 5", end.Msg)
	}
}

// TestRCKeepGoingDeadRank: with --keep-going, a dead rank leaves the sets
// at once, so the next change does not wait for it (its accept fence
// would, until the confirm timeout); an ADD pending when a member of its
// bound set dies aborts instead of finalizing with a set that holds the
// dead rank.
func TestRCKeepGoingDeadRank(t *testing.T) {
	d := startRCDVM(t, 2, 4)
	ctx := context.Background()
	t.Run("idle", func(t *testing.T) {
		job := d.startWith(wire.JobLaunchReq{KeepGoing: true}, 4, "-last", "1")
		d.signalRank(job.Job, 3, syscall.SIGKILL)
		d.waitMembers(job, "0-2")
		if n := d.usedSlots(); n != 3 {
			t.Errorf("%d slots used for 3 live processes", n)
		}
		rc, err := d.request(wire.RCRequest{Job: job.Job, Type: wire.RCSub, N: 1, ConfirmMS: 15000})
		if err != nil || rc.Status != wire.RCFinalized {
			t.Fatalf("SUB after a dead rank: %s (%s), %v", rc.Status, rc.Reason, err)
		}
		if rc.Ranks.String() != "2" {
			t.Errorf("SUB removed %s, want 2 (3 is dead)", rc.Ranks)
		}
		d.wait(job.Job)
	})
	t.Run("pending ADD", func(t *testing.T) {
		job := d.startWith(wire.JobLaunchReq{KeepGoing: true}, 3, "-last", "2", "-no-confirm")
		rc, err := d.c.RequestRC(ctx, wire.RCRequest{Job: job.Job, Type: wire.RCAdd, N: 2, ConfirmMS: 20000})
		if err != nil {
			t.Fatal(err)
		}
		d.waitStatus(rc.Delta, wire.RCPending)
		d.signalRank(job.Job, 1, syscall.SIGKILL)
		got := d.settled(rc.Delta)
		if got.Status != wire.RCAborted || !strings.Contains(got.Reason, "rank 1") {
			t.Errorf("pending ADD after rank 1 died: %s (%s), want ABORTED naming rank 1", got.Status, got.Reason)
		}
		d.waitMembers(job, "0,2")
		if live, _ := d.liveProcs(job.Job); live != 2 || d.usedSlots() != 2 {
			t.Errorf("%d live processes, %d slots used; want 2 and 2", live, d.usedSlots())
		}
		d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCSub, N: 1, ConfirmMS: 15000}) // change 2 ends the program
		d.wait(job.Job)
	})
}

// TestRCHistoryFlat: a job that grows and shrinks over and over keeps a
// bounded history (docs/limits.md "Retained history"): the change records,
// sets, set versions and published keys the master holds stay the same
// from a warm point on. $DYNRT_RC_CYCLES sets the number of grow/shrink
// cycles (default 24); from 1000 on, the test also measures the heap of
// the test process (the master and node 0's daemon run in it) once warm
// and at the end, logs both, and fails if it grew by more than 10%:
//
//	DYNRT_RC_CYCLES=2000 go test -run TestRCHistoryFlat -v -timeout 1h ./lib/session
func TestRCHistoryFlat(t *testing.T) {
	cycles := 24
	if s := os.Getenv("DYNRT_RC_CYCLES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 10 {
			t.Fatalf("DYNRT_RC_CYCLES=%q: want a number of cycles, at least 10", s)
		}
		cycles = n
	}
	long := cycles >= 1000
	lim := wire.Limits{HistoryChanges: 6, HistoryVersions: 4}
	if long {
		lim = wire.Limits{} // the defaults
	}
	dvm := dvmtest.Start(t, dvmtest.Options{Nodes: 2, Slots: 4, KillGrace: testGrace, Limits: lim})
	d := &rcDVM{testDVM: &testDVM{t: t, m: dvm.M, dir: dvm.Dir, env: dvm.Env}, mall: malleableApp(t)}
	d.c = dvm.Attach(t)
	ctx := context.Background()
	// Output not forwarded: the test would keep it.
	job, err := d.c.Launch(ctx, wire.JobLaunchReq{
		Argv: []string{d.mall, "-quiet", "-timeout", "2h"}, N: 2, Env: d.env,
	})
	if err != nil {
		t.Fatal(err)
	}
	cycle := func() {
		for _, typ := range []string{wire.RCAdd, wire.RCSub} {
			if _, err := d.request(wire.RCRequest{Job: job.Job, Type: typ, N: 1}); err != nil {
				t.Fatalf("%s: %v", typ, err)
			}
		}
	}
	measure := func() (master.History, uint64) {
		h, err := d.m.History(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return h, ms.HeapAlloc
	}
	warm := max(cycles/10, 2*lim.Normalize().HistoryChanges)
	for range warm {
		cycle()
	}
	h0, heap0 := measure()
	for range cycles - warm {
		cycle()
	}
	h1, heap1 := measure()
	t.Logf("after %d cycles (warm): %+v, heap %d KiB; after %d: %+v, heap %d KiB (%+.1f%%)",
		warm, h0, heap0>>10, cycles, h1, heap1>>10, 100*(float64(heap1)-float64(heap0))/float64(heap0))
	// Keys vary with how often members polled their accept; the rest is
	// exact.
	if h0.Changes != h1.Changes || h0.Sets != h1.Sets || h0.Versions != h1.Versions || h0.Procs != h1.Procs || h1.Keys > 2*h0.Keys {
		t.Errorf("history grew: %+v after %d cycles, %+v after %d", h0, warm, h1, cycles)
	}
	if want := lim.Normalize().HistoryChanges; h1.Changes != want {
		t.Errorf("%d change records kept, want %d", h1.Changes, want)
	}
	if _, err := d.c.RC(ctx, pset.DeltaName(job.App, 1)); !errors.Is(err, wire.ErrNotFound) || !strings.Contains(err.Error(), "forgotten") {
		t.Errorf("the first change, long forgotten: %v", err)
	}
	if long && float64(heap1) > 1.1*float64(heap0) {
		t.Errorf("heap grew from %d to %d KiB over %d cycles", heap0>>10, heap1>>10, cycles-warm)
	}
	if err := d.c.KillJob(ctx, job.Job, 0, 0); err != nil {
		t.Fatal(err)
	}
	d.wait(job.Job)
}

// TestRCSubExpires: a SUB bound to two sets that only one of them accepts
// in time cannot be aborted (the processes of the set that accepted may be
// gone), so at its timeout the runtime completes it: FINALIZED, naming the
// set that did not accept, the delta out of every set, the removed
// processes killed after the grace period and their slots freed.
func TestRCSubExpires(t *testing.T) {
	d := startRCDVM(t, 2, 2)
	ctx := context.Background()
	job := d.start(4, "-split") // a = {0,1} (node0), b = {2,3} (node1)
	d.waitFor(job.Job, "SPLIT lines", func(ls []mline) bool { return count(ls, "SPLIT") == 4 })
	d.signalRank(job.Job, 2, syscall.SIGSTOP) // b's root: b never accepts
	rc, err := d.request(wire.RCRequest{Job: job.Job, Type: wire.RCSub, Ranks: wire.RankRanges{{Lo: 1, Hi: 1}, {Lo: 3, Hi: 3}}, ConfirmMS: 1500, GraceMS: 100})
	if err != nil {
		t.Fatalf("SUB of ranks 1,3: %v", err)
	}
	b := pset.AppName(job.App) + "/b"
	if rc.Status != wire.RCFinalized || !rc.Settled || !strings.Contains(rc.Reason, b+" did not accept") {
		t.Errorf("SUB: %s settled=%v (%s), want FINALIZED by the runtime naming %s", rc.Status, rc.Settled, rc.Reason, b)
	}
	for set, want := range map[string]string{pset.AppName(job.App) + "/a": "0", b: "2"} {
		if p := d.pset(job.Job, set); p.Members.String() != want {
			t.Errorf("%s: %s, want %s", set, p.Members, want)
		}
	}
	if n := d.usedSlots(); n != 2 {
		t.Errorf("%d slots used, want 2", n)
	}
	if err := d.c.KillJob(ctx, job.Job, int(syscall.SIGKILL), 0); err != nil {
		t.Fatal(err)
	}
	d.wait(job.Job)
}

// TestRCAbortedDeltaRefused: a set operation naming the delta of a change
// that was aborted (here: canceled while the members were stopped, so
// their phase 2 comes after the abort) is refused with wire.ErrAborted,
// for an ADD and a SUB alike; the application set keeps every live rank,
// the members learn the abort and the next ADD works (the chaos harness
// saw a late DIFFERENCE of a canceled SUB drop rank 1 for good).
func TestRCAbortedDeltaRefused(t *testing.T) {
	d := startRCDVM(t, 2, 3)
	ctx := context.Background()
	cases := []struct {
		typ, op string // the change, and the phase 2 operation sent late
	}{
		{wire.RCAdd, wire.OpUnion},
		{wire.RCSub, wire.OpDifference},
	}
	for _, c := range cases {
		t.Run(c.typ, func(t *testing.T) {
			job := d.start(2, "-last", "2")
			app := pset.AppName(job.App)
			d.waitSetVersion(job.Job, app, 0)
			for r := uint32(0); r < 2; r++ {
				d.signalRank(job.Job, r, syscall.SIGSTOP)
			}
			rc, err := d.c.RequestRC(ctx, wire.RCRequest{Job: job.Job, Type: c.typ, N: 1})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.c.CancelRC(ctx, rc.Delta, "test cancels"); err != nil {
				t.Fatal(err)
			}
			d.settled(rc.Delta)
			_, err = d.c.PsetOp(ctx, wire.PsetOpReq{Job: job.Job, Op: c.op, P1: app, P2: rc.Delta, Target: app})
			if !errors.Is(err, wire.ErrAborted) || !strings.Contains(err.Error(), "aborted") {
				t.Errorf("%s(%s, %s) after the abort: %v, want an error matching wire.ErrAborted", c.op, app, rc.Delta, err)
			}
			if as := d.pset(job.Job, app); as.Members.String() != "0-1" {
				t.Errorf("application set after the late %s: %s (version %d), want 0-1", c.op, as.Members, as.Version)
			}
			for r := uint32(0); r < 2; r++ {
				d.signalRank(job.Job, r, syscall.SIGCONT)
			}
			d.waitFor(job.Job, "STATE ABORTED of both ranks", func(ls []mline) bool {
				n := 0
				for _, l := range linesOf(ls, "STATE", rc.Delta) {
					if l.Str("status") == wire.RCAborted {
						n++
					}
				}
				return n == 2
			})
			if next := d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCAdd, N: 1}); next.Ranks.String() != "2" {
				t.Errorf("ADD after the aborted %s: ranks %s, want 2", c.typ, next.Ranks)
			}
			if end := d.wait(job.Job); end.State != wire.JobStateDone || end.Code != 0 {
				t.Errorf("job ended %s code %d: %s", end.State, end.Code, end.Msg)
			}
		})
	}
}
