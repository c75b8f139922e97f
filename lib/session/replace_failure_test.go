package session_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/dvmtest"
	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/wire"
)

// The replace failure policy (docs/rc.md "Failures as changes"): a lost
// process becomes a REPLACE of the lost ranks by as many new processes,
// made by the runtime with a cause; the survivors accept it, the new
// processes confirm, and the job keeps its size.

func (d *rcDVM) replaceJob(n int, args ...string) wire.JobLaunchReply {
	d.t.Helper()
	return d.startWith(wire.JobLaunchReq{OnFailure: wire.OnFailureReplace}, n, args...)
}

// checkFailureReplace checks that rc is a FINALIZED, settled failure
// REPLACE of the ranks out by the ranks in.
func checkFailureReplace(t *testing.T, rc wire.RC, out, in string, words ...string) {
	t.Helper()
	if rc.Type != wire.RCReplace || rc.Status != wire.RCFinalized || !rc.Settled || rc.Out.String() != out || rc.Ranks.String() != in {
		t.Fatalf("%s: %s %s (settled %v) of %s by %s (%s), want a settled FINALIZED REPLACE of %s by %s",
			rc.Delta, rc.Type, rc.Status, rc.Settled, rc.Out, rc.Ranks, rc.Reason, out, in)
	}
	c := rc.Cause
	if rc.Requester != wire.ByRuntime || c == nil || c.Kind != wire.CauseFailure || c.Ranks.String() != out {
		t.Fatalf("%s: requester %q cause %+v, want the runtime's failure of %s", rc.Delta, rc.Requester, c, out)
	}
	why := strings.Join(c.Why, "; ")
	for _, w := range words {
		if !strings.Contains(why, w) {
			t.Errorf("%s: cause %q does not say %q", rc.Delta, why, w)
		}
	}
}

func (d *rcDVM) replacedOK(job wire.JobLaunchReply) {
	d.t.Helper()
	d.endedWell(job, wire.OnFailureReplace, "replaced by new processes")
}

// TestReplaceKill9Rank: kill -9 of rank 5 of an 8-process job becomes a
// REPLACE of rank 5 by rank 8; the job goes on with 8 processes.
func TestReplaceKill9Rank(t *testing.T) {
	d := startShrinkDVM(t, 4, 3, dvmtest.Options{})
	job := d.replaceJob(8, "-last", "1")
	d.signalRank(job.Job, 5, syscall.SIGKILL)
	rc := d.settledLater(pset.DeltaName(job.App, 1))
	checkFailureReplace(t, rc, "5", "8", "signal 9")
	d.waitFor(job.Job, "a STATE line of every member", func(ls []mline) bool {
		return ranksOf(linesOf(ls, "STATE", rc.Delta)).String() == "0-4,6-8"
	})
	if got := ranksOf(linesOf(d.mlines(job.Job), "CONFIRMED", rc.Delta)); got.String() != "8" {
		t.Errorf("confirmed by %s, want the new rank 8", got)
	}
	d.waitMembers(job, "0-4,6-8")
	d.replacedOK(job)
}

// TestReplaceNodeGone: the two ranks of node2, lost with its daemon
// (kill -9) or with a daemon declared down by the heartbeats (SIGSTOP),
// are replaced in one change by two new processes on the nodes that are
// up, and the job finishes with status 0.
func TestReplaceNodeGone(t *testing.T) {
	for _, hung := range []bool{false, true} {
		t.Run(map[bool]string{false: "killed", true: "hung"}[hung], func(t *testing.T) {
			d := startShrinkDVM(t, 4, 3, dvmtest.Options{HeartbeatInterval: 250 * time.Millisecond, HeartbeatMisses: 8})
			job := d.replaceJob(8, "-last", "1")
			pid := 0
			if hung {
				pid = d.hangDaemon(2) // ranks 6 and 7
			} else {
				d.killDaemon("node2")
			}
			rc := d.settledLater(pset.DeltaName(job.App, 1))
			checkFailureReplace(t, rc, "6-7", "8-9", "lost with its node")
			for _, p := range rc.Placement {
				if p.Node == "node2" {
					t.Errorf("new ranks placed on the node that is gone: %+v", rc.Placement)
				}
			}
			d.waitMembers(job, "0-5,8-9")
			d.replacedOK(job)
			if hung {
				_ = syscall.Kill(pid, syscall.SIGCONT)
			}
		})
	}
}

// TestReplaceCannotBeKept: a job whose lost ranks cannot be replaced ends
// failed with a report saying why and what to do: no free slot for the
// new processes (a full DVM that lost a node), or new processes that die
// before confirming (trying again would fail again).
func TestReplaceCannotBeKept(t *testing.T) {
	for _, tc := range []struct {
		name  string
		slots int
		args  []string
		fault func(d *rcDVM, job wire.JobLaunchReply)
		want  []string
	}{
		{"no slots", 2, nil, func(d *rcDVM, _ wire.JobLaunchReply) { d.killDaemon("node2") },
			[]string{"rank 4 on ", "rank 5 on ", "no new processes can replace them", "--on-failure shrink"}},
		{"new processes die", 3, []string{"-die-new", "3"}, func(d *rcDVM, job wire.JobLaunchReply) { d.signalRank(job.Job, 5, syscall.SIGKILL) },
			[]string{"rank 5 on ", "the processes that were to replace them failed", "code 3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startShrinkDVM(t, 4, tc.slots, dvmtest.Options{})
			job := d.replaceJob(8, append([]string{"-last", "1"}, tc.args...)...)
			tc.fault(d, job)
			end := d.wait(job.Job)
			if end.State != wire.JobStateFailed || end.Code == 0 {
				t.Errorf("job ended %s code %d, want failed", end.State, end.Code)
			}
			for _, w := range tc.want {
				if !strings.Contains(end.Msg, w) {
					t.Errorf("end message %q does not say %q", end.Msg, w)
				}
			}
		})
	}
}
