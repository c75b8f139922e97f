package session_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/dvmtest"
	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/wire"
)

// The shrink failure policy (docs/rc.md "Failures as changes"): a lost
// process becomes an ordinary SUB of the lost ranks, made by the runtime
// with a cause, that the survivors of the malleable program accept like
// any change; the job then finishes with status 0.

// startShrinkDVM starts a DVM of k nodes with s slots for the malleable
// program, with the options o (Nodes, Slots and KillGrace are filled in).
func startShrinkDVM(t *testing.T, k, s int, o dvmtest.Options) *rcDVM {
	t.Helper()
	o.Nodes, o.Slots, o.KillGrace = k, s, testGrace
	dvm := dvmtest.Start(t, o)
	d := &rcDVM{testDVM: &testDVM{t: t, m: dvm.M, dir: dvm.Dir, env: dvm.Env}, mall: malleableApp(t)}
	d.c = dvm.Attach(t)
	d.out = dvmtest.CollectOutput(d.c)
	return d
}

// shrinkJob starts n processes of the malleable program under the shrink
// policy, ending once change number last has ended.
func (d *rcDVM) shrinkJob(n int, args ...string) wire.JobLaunchReply {
	d.t.Helper()
	return d.startWith(wire.JobLaunchReq{OnFailure: wire.OnFailureShrink}, n, args...)
}

// checkFailureSub checks that rc is a FINALIZED failure SUB of exactly
// ranks, made by the runtime, whose cause names each rank with words.
func checkFailureSub(t *testing.T, rc wire.RC, ranks string, words ...string) {
	t.Helper()
	if rc.Type != wire.RCSub || rc.Status != wire.RCFinalized || rc.Ranks.String() != ranks {
		t.Errorf("%s: %s %s of ranks %s (%s), want a FINALIZED SUB of ranks %s", rc.Delta, rc.Type, rc.Status, rc.Ranks, rc.Reason, ranks)
	}
	if rc.Requester != wire.ByRuntime {
		t.Errorf("%s: requester %q, want %q", rc.Delta, rc.Requester, wire.ByRuntime)
	}
	c := rc.Cause
	if c == nil || c.Kind != wire.CauseFailure || c.Ranks.String() != ranks || len(c.Why) != rc.Ranks.Count() {
		t.Fatalf("%s: cause %+v, want a failure of ranks %s with one line per rank", rc.Delta, c, ranks)
	}
	why := strings.Join(c.Why, "; ")
	for r := range rc.Ranks.All() {
		if !strings.Contains(why, "rank "+uitoa(r)+" on ") {
			t.Errorf("%s: cause %q does not name rank %d and its node", rc.Delta, why, r)
		}
	}
	for _, w := range words {
		if !strings.Contains(why, w) {
			t.Errorf("%s: cause %q does not say %q", rc.Delta, why, w)
		}
	}
	if rc.Times.Exited == 0 || rc.Times.Exited < rc.Times.Finalized || !rc.Settled {
		t.Errorf("%s: all_exited %d, finalized %d, settled %v: want settled with all_exited at or after FINALIZED",
			rc.Delta, rc.Times.Exited, rc.Times.Finalized, rc.Settled)
	}
}

// settledLater is settled for a change the runtime makes itself: it
// waits for the change to exist first.
func (d *rcDVM) settledLater(delta string) wire.RC {
	d.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, err := d.c.WaitRCFunc(context.Background(), delta, func(wire.RC) (bool, error) { return true, nil })
		if !errors.Is(err, wire.ErrNotFound) || time.Now().After(deadline) {
			break
		}
	}
	return d.settled(delta)
}

// hangDaemon stops the daemon of node index i (SIGSTOP) and returns its
// pid. Once running again (SIGCONT, at the latest when the test ends) it
// finds its master gone, kills its processes and exits; the DVM's cleanup
// checks that nothing is left.
func (d *rcDVM) hangDaemon(i int) int {
	d.t.Helper()
	st, err := d.c.State(context.Background())
	if err != nil {
		d.t.Fatal(err)
	}
	pid := st.Nodes[i].PID
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	return pid
}

func uitoa(r uint32) string { return wire.Span(r, r).String() }

// doneOK checks that job ended done with status 0 and that its end
// message reports the lost ranks.
func (d *rcDVM) doneOK(job wire.JobLaunchReply, lost string) {
	d.t.Helper()
	d.endedWell(job, wire.OnFailureShrink, "lost", "rank "+lost)
}

// endedWell checks that job, run under policy, ended done with status 0
// and that its end message says every one of words.
func (d *rcDVM) endedWell(job wire.JobLaunchReply, policy string, words ...string) {
	d.t.Helper()
	end := d.wait(job.Job)
	if end.State != wire.JobStateDone || end.Code != 0 {
		d.t.Errorf("job ended %s code %d: %s; want done with status 0", end.State, end.Code, end.Msg)
	}
	for _, w := range words {
		if !strings.Contains(end.Msg, w) {
			d.t.Errorf("end message %q does not say %q", end.Msg, w)
		}
	}
	if end.OnFailure != policy {
		d.t.Errorf("job info: policy %q, want %s", end.OnFailure, policy)
	}
}

// TestShrinkKill9Rank: kill -9 of one rank of a shrink job becomes a SUB
// of that rank (cause: killed by signal 9); the survivors accept it, the
// application set loses the rank, and the job finishes with status 0.
func TestShrinkKill9Rank(t *testing.T) {
	d := startShrinkDVM(t, 4, 2, dvmtest.Options{})
	job := d.shrinkJob(8, "-last", "1")
	d.signalRank(job.Job, 5, syscall.SIGKILL)
	rc := d.settledLater(pset.DeltaName(job.App, 1))
	checkFailureSub(t, rc, "5", "signal 9")
	if len(rc.BoundRefs) != 1 || rc.BoundRefs[0].Name != pset.AppName(job.App) {
		t.Errorf("bound sets %+v, want the application set", rc.BoundRefs)
	}
	d.waitFor(job.Job, "a STATE line of every survivor", func(ls []mline) bool {
		return ranksOf(linesOf(ls, "STATE", rc.Delta)).String() == "0-4,6-7"
	})
	d.waitMembers(job, "0-4,6-7")
	d.doneOK(job, "5")
}

// TestShrinkNodeLost: kill -9 of a node's daemon loses both ranks there;
// they leave in one failure change, and the job finishes with status 0.
func TestShrinkNodeLost(t *testing.T) {
	d := startShrinkDVM(t, 4, 2, dvmtest.Options{})
	job := d.shrinkJob(8, "-last", "1")
	d.killDaemon("node2") // ranks 4 and 5
	rc := d.settledLater(pset.DeltaName(job.App, 1))
	checkFailureSub(t, rc, "4-5", "lost with its node")
	d.waitMembers(job, "0-3,6-7")
	d.doneOK(job, "4")
}

// TestShrinkHungDaemon: a SIGSTOPped daemon is declared down by the
// heartbeats; its ranks leave in one failure change and the job finishes
// with status 0.
func TestShrinkHungDaemon(t *testing.T) {
	d := startShrinkDVM(t, 4, 2, dvmtest.Options{HeartbeatInterval: 250 * time.Millisecond, HeartbeatMisses: 8})
	job := d.shrinkJob(8, "-last", "1")
	pid := d.hangDaemon(3) // ranks 6 and 7
	rc := d.settledLater(pset.DeltaName(job.App, 1))
	checkFailureSub(t, rc, "6-7", "lost with its node")
	d.waitMembers(job, "0-5")
	d.doneOK(job, "6")
	_ = syscall.Kill(pid, syscall.SIGCONT)
}

// TestShrinkDuringChange: a rank lost while an ADD is in flight aborts
// the ADD (a member of its bound set died: today's rule), and its failure
// change runs next, ahead of a SUB the operator had queued meanwhile,
// which runs after it. Nothing is lost and the job finishes with status 0.
func TestShrinkDuringChange(t *testing.T) {
	d := startShrinkDVM(t, 4, 2, dvmtest.Options{})
	job := d.shrinkJob(4, "-last", "3", "-no-confirm")
	add := d.pendingAdd(job) // accepted; the new processes never confirm
	queued := queueSub(t, d, job.Job)
	d.signalRank(job.Job, 1, syscall.SIGKILL)
	if got := d.settled(add.Delta); got.Status != wire.RCAborted || !strings.Contains(got.Reason, "rank 1") {
		t.Errorf("ADD %s (%s), want ABORTED naming rank 1", got.Status, got.Reason)
	}
	fail := d.settledLater(pset.DeltaName(job.App, 2))
	checkFailureSub(t, fail, "1", "signal 9")
	if err := <-queued; err != nil {
		t.Fatalf("queued SUB: %v", err)
	}
	sub := d.settledLater(pset.DeltaName(job.App, 3))
	if sub.Requester != wire.ByTool || sub.Status != wire.RCFinalized || sub.Cause != nil {
		t.Errorf("change 3: %s by %s (%+v), want the queued SUB, FINALIZED", sub.Status, sub.Requester, sub.Cause)
	}
	if sub.Times.Requested > fail.Times.Requested {
		t.Errorf("the queued SUB was requested after the failure change: the loss happened first?")
	}
	d.doneOK(job, "1")
}

// pendingAdd asks for an ADD of 2 to job (run with -no-confirm) and waits
// until it is PENDING: accepted, its new processes never confirming.
func (d *rcDVM) pendingAdd(job wire.JobLaunchReply) wire.RC {
	d.t.Helper()
	add, err := d.c.RequestRC(context.Background(), wire.RCRequest{Job: job.Job, Type: wire.RCAdd, N: 2, ConfirmMS: 30000})
	if err != nil {
		d.t.Fatal(err)
	}
	d.waitStatus(add.Delta, wire.RCPending)
	return add
}

// queueSub asks for a SUB of 1 queued behind the change in flight of job
// and gives it time to reach the master (waitQueued); the channel gets
// its outcome once it has run.
func queueSub(t *testing.T, d *rcDVM, job string) <-chan error {
	t.Helper()
	queued := make(chan error, 1)
	go func() {
		_, err := d.request(wire.RCRequest{Job: job, Type: wire.RCSub, N: 1, Queue: true})
		queued <- err
	}()
	waitQueued(t, d, job)
	return queued
}

// waitQueued gives a queued request time to reach the master: nothing
// lists queued requests (they are not numbered), so the test checks the
// order afterwards from the request times instead.
func waitQueued(t *testing.T, d *rcDVM, job string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// A round trip to the master after the queued request was sent.
	if _, err := d.c.RequestRC(ctx, wire.RCRequest{Job: job, Type: wire.RCSub, N: 1}); !errors.Is(err, wire.ErrBusy) {
		t.Fatalf("a request while a change is in flight: %v, want busy", err)
	}
	time.Sleep(500 * time.Millisecond)
}

// TestShrinkEveryRankLost: when every process of a shrink job is lost,
// the job ends failed (status 137), naming each lost rank and why.
func TestShrinkEveryRankLost(t *testing.T) {
	d := startShrinkDVM(t, 4, 2, dvmtest.Options{})
	job := d.shrinkJob(2, "-last", "1")
	_, procs := d.liveProcs(job.Job)
	for _, p := range procs {
		if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	end := d.wait(job.Job)
	if end.State != wire.JobStateFailed || end.Code != 137 {
		t.Errorf("job ended %s code %d, want failed with 137", end.State, end.Code)
	}
	for _, w := range []string{"rank 0 on ", "rank 1 on ", "lost"} {
		if !strings.Contains(end.Msg, w) {
			t.Errorf("end message %q does not say %q", end.Msg, w)
		}
	}
}

// TestShrinkNotMalleable: a program that never takes part in changes
// cannot be kept: after the confirm timeout the failure change is
// aborted and the job ends failed with a report saying what to do.
func TestShrinkNotMalleable(t *testing.T) {
	d := startShrinkDVM(t, 4, 2, dvmtest.Options{RCConfirmTimeout: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	job, err := d.c.Launch(ctx, wire.JobLaunchReq{
		Argv: []string{"/bin/sleep", "120"}, N: 4, Env: d.env, OnFailure: wire.OnFailureShrink,
	})
	if err != nil {
		t.Fatal(err)
	}
	d.signalRank(job.Job, 2, syscall.SIGKILL)
	end := d.wait(job.Job)
	if end.State != wire.JobStateFailed || end.Code != 137 {
		t.Errorf("job ended %s code %d, want failed with 137", end.State, end.Code)
	}
	for _, w := range []string{"rank 2 on ", "did not accept", "--on-failure abort"} {
		if !strings.Contains(end.Msg, w) {
			t.Errorf("end message %q does not say %q", end.Msg, w)
		}
	}
	rc := d.settledLater(pset.DeltaName(job.App, 1))
	if rc.Status != wire.RCAborted || rc.Cause == nil || !strings.Contains(rc.Reason, "not accepted") {
		t.Errorf("failure change %s (%s), cause %+v: want ABORTED, not accepted", rc.Status, rc.Reason, rc.Cause)
	}
}

// TestOnFailurePolicies: the master checks the policy of a launch and
// shows it in the job's info.
func TestOnFailurePolicies(t *testing.T) {
	d := startShrinkDVM(t, 1, 4, dvmtest.Options{})
	ctx := context.Background()
	cases := []struct {
		req  wire.JobLaunchReq
		want string // the policy, or the error code
		err  error
	}{
		{wire.JobLaunchReq{}, wire.OnFailureAbort, nil},
		{wire.JobLaunchReq{KeepGoing: true}, wire.OnFailureContinue, nil},
		{wire.JobLaunchReq{OnFailure: "continue"}, wire.OnFailureContinue, nil},
		{wire.JobLaunchReq{OnFailure: "Shrink"}, wire.OnFailureShrink, nil},
		{wire.JobLaunchReq{OnFailure: "Replace"}, wire.OnFailureReplace, nil},
		{wire.JobLaunchReq{OnFailure: "retry"}, "unknown failure policy", wire.ErrInvalid},
		{wire.JobLaunchReq{OnFailure: "shrink", KeepGoing: true}, "cannot be combined", wire.ErrInvalid},
	}
	for _, c := range cases {
		req := c.req
		req.Argv, req.N, req.Env = []string{"/bin/true"}, 1, d.env
		rep, err := d.c.Launch(ctx, req)
		if c.err != nil {
			if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%+v: %v, want %v saying %q", c.req, err, c.err, c.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%+v: %v", c.req, err)
			continue
		}
		if end := d.wait(rep.Job); end.OnFailure != c.want {
			t.Errorf("%+v: job info says policy %q, want %q", c.req, end.OnFailure, c.want)
		}
	}
}

// TestShrinkWholeSetLost: a job split in two active sets (the ranks on
// rank 0's node, and the others) loses every member of the first. The
// job still has live processes and is malleable, so it goes on: nobody is
// left to accept for the emptied set, so the runtime accepts for it, the
// failure change is FINALIZED, and the job finishes with status 0.
// Regression: the job ended failed ("every member of ... was lost").
func TestShrinkWholeSetLost(t *testing.T) {
	d := startShrinkDVM(t, 2, 2, dvmtest.Options{})
	job := d.shrinkJob(4, "-last", "2", "-split")
	d.waitFor(job.Job, "every SPLIT line", func(ls []mline) bool { return count(ls, "SPLIT") == 4 })
	a := pset.AppName(job.App) + "/a"
	if got := d.pset(job.Job, a).Members.String(); got != "0-1" {
		t.Fatalf("%s holds %s, want 0-1 (the ranks on node0)", a, got)
	}
	_, procs := d.liveProcs(job.Job)
	for _, r := range []uint32{0, 1} {
		if err := syscall.Kill(procs[r].PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	rc := d.settledLater(pset.DeltaName(job.App, 1))
	folded := rc.Status != wire.RCFinalized
	if folded {
		// The two kills may reach the master apart: the first change is
		// then folded and the next one removes both.
		rc = d.settledLater(pset.DeltaName(job.App, 2))
	}
	checkFailureSub(t, rc, "0-1", "signal 9")
	if len(rc.Bound) != 1 || rc.Bound[0] != a {
		t.Errorf("bound sets %v, want only %s", rc.Bound, a)
	}
	if !folded {
		// Change 2 ends the program: set b shrinks by one.
		d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCSub, N: 1, Bound: []string{pset.AppName(job.App) + "/b"}})
	}
	end := d.wait(job.Job)
	if end.State != wire.JobStateDone || end.Code != 0 {
		t.Errorf("job ended %s code %d: %s; want done with status 0", end.State, end.Code, end.Msg)
	}
}

// TestShrinkLeavingRankDies: a rank a SUB removes dies after the SUB's
// phase 2 took it out of the application set but before the accept (it
// was stopped, so the accept fence waited for it). The SUB aborts (the
// usual rule), and the loss becomes a failure change bound to the set
// that held the rank before the SUB. Regression: the job ended failed
// ("no active process set holds them any more"), found by the chaos
// harness with -policy shrink (seed 7, kill9-leaving). A request queued
// meanwhile runs after the failure change.
func TestShrinkLeavingRankDies(t *testing.T) {
	d := startShrinkDVM(t, 2, 4, dvmtest.Options{})
	ctx := context.Background()
	job := d.shrinkJob(4, "-last", "3")
	d.signalRank(job.Job, 3, syscall.SIGSTOP)
	sub, err := d.c.RequestRC(ctx, wire.RCRequest{Job: job.Job, Type: wire.RCSub, Ranks: wire.Span(3, 3), ConfirmMS: 20000})
	if err != nil {
		t.Fatal(err)
	}
	d.waitMembers(job, "0-2") // the root's DIFFERENCE is done; rank 3 holds the fence
	// A request queued behind the SUB: the SUB's abort by the death
	// settles it at once, and the failure change must still go first.
	queued := queueSub(t, d, job.Job)
	d.signalRank(job.Job, 3, syscall.SIGKILL)
	if got := d.settled(sub.Delta); got.Status != wire.RCAborted || !strings.Contains(got.Reason, "rank 3") {
		t.Errorf("SUB %s (%s), want ABORTED naming rank 3", got.Status, got.Reason)
	}
	rc := d.settledLater(pset.DeltaName(job.App, 2))
	checkFailureSub(t, rc, "3", "signal 9")
	if len(rc.Bound) != 1 || rc.Bound[0] != pset.AppName(job.App) {
		t.Errorf("bound sets %v, want the application set", rc.Bound)
	}
	if err := <-queued; err != nil {
		t.Fatalf("queued SUB: %v", err)
	}
	if q := d.settled(pset.DeltaName(job.App, 3)); q.Requester != wire.ByTool || q.Status != wire.RCFinalized {
		t.Errorf("change 3: %s by %s, want the queued SUB, FINALIZED", q.Status, q.Requester)
	}
	d.doneOK(job, "3")
}

// TestShrinkLastMemberDuringAdd: the last member of a shrink job dies
// while an ADD is in flight (accepted; its new processes never confirm).
// The ADD aborts and its new processes go, so every member was lost: the
// job ends failed with status 137 and says so. Regression: the new
// processes counted as survivors, and the job ended with a report that
// the others "ended without accepting" the failure change (found by the
// chaos harness with -policy shrink, seed 3).
func TestShrinkLastMemberDuringAdd(t *testing.T) {
	d := startShrinkDVM(t, 2, 2, dvmtest.Options{})
	job := d.shrinkJob(1, "-last", "5", "-no-confirm")
	d.pendingAdd(job)
	d.signalRank(job.Job, 0, syscall.SIGKILL)
	end := d.wait(job.Job)
	if end.State != wire.JobStateFailed || end.Code != 137 || !strings.Contains(end.Msg, "every process of the job was lost") || !strings.Contains(end.Msg, "rank 0 on ") {
		t.Errorf("job ended %s code %d: %s; want failed with 137, every process lost, naming rank 0", end.State, end.Code, end.Msg)
	}
}
