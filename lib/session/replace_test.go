package session_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/wire"
)

// TestRCReplace replaces ranks 1 and 2 of a 4-process malleable job by two
// new processes in one change: the new ones confirm, the set the job goes
// on with is {0, 3, 4, 5}, the replaced ones learn that they leave only
// once the change is FINALIZED and exit, their slots are freed, and the
// job ends cleanly. A REPLACE whose new processes die is ABORTED and
// leaves the job as it was: nobody leaves.
func TestRCReplace(t *testing.T) {
	d := startRCDVM(t, 2, 4)
	ctx := context.Background()

	t.Run("finalized", func(t *testing.T) {
		job := d.start(4, "-last", "2")
		app := job.App
		delta := pset.DeltaName(app, 1)
		rc := d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCReplace, Ranks: wire.RangesOf([]uint32{1, 2})})
		if rc.Type != wire.RCReplace || rc.Delta != delta || rc.Ranks.String() != "4-5" || rc.Out.String() != "1-2" ||
			rc.OutSet != pset.OutName(app, 1) || rc.N != 2 || rc.Times.Exited == 0 || rc.Times.Confirmed == 0 {
			t.Fatalf("record %+v", rc)
		}
		checkTimes(t, rc)
		out := d.pset(job.Job, rc.OutSet)
		if out.Members.String() != "1-2" || out.Epoch != 1 {
			t.Errorf("replaced set %+v", out)
		}
		as := d.pset(job.Job, pset.AppName(app))
		if as.Members.String() != "0,3-5" {
			t.Errorf("application set after the REPLACE: %s, want 0,3-5", as.Members)
		}
		d.waitFor(job.Job, "STATE of the four members", func(ls []mline) bool {
			return ranksOf(linesOf(ls, "STATE", delta)).String() == "0,3-5"
		})
		ls := d.mlines(job.Job)
		for _, l := range linesOf(ls, "STATE", delta) {
			if l.Str("status") != wire.RCFinalized || l.Str("members") != "0,3-5" || l.Num("jobsize") != 4 {
				t.Errorf("rank %d after the REPLACE: %v", l.Rank, l.Attrs)
			}
		}
		if got := ranksOf(linesOf(ls, "CONFIRMED", delta)); got.String() != "4-5" {
			t.Errorf("confirmed by %s, want 4-5", got)
		}
		if got := ranksOf(linesOf(ls, "LEFT", delta)); got.String() != "1-2" {
			t.Errorf("left: %s, want 1-2", got)
		}
		if n := d.usedSlots(); n != 4 {
			t.Errorf("%d slots used, want 4", n)
		}
		d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCSub, N: 1})
		if end := d.wait(job.Job); end.State != wire.JobStateDone || end.Code != 0 {
			t.Fatalf("job ended %s code %d: %s", end.State, end.Code, end.Msg)
		}
	})

	t.Run("aborted", func(t *testing.T) {
		job := d.start(4, "-last", "2", "-die-new", "3")
		delta := pset.DeltaName(job.App, 1)
		_, err := d.request(wire.RCRequest{Job: job.Job, Type: wire.RCReplace, Ranks: wire.RangesOf([]uint32{1})})
		if !errors.Is(err, wire.ErrAborted) {
			t.Fatalf("REPLACE whose new process dies: %v", err)
		}
		rc := d.onlyChange(job)
		if rc.Delta != delta || rc.Status != wire.RCAborted || !strings.Contains(rc.Reason, "before confirming") {
			t.Fatalf("%+v", rc)
		}
		if as := d.pset(job.Job, pset.AppName(job.App)); as.Members.String() != "0-3" {
			t.Errorf("application set after the aborted REPLACE: %s, want 0-3", as.Members)
		}
		info, err := d.c.Job(ctx, wire.JobStateReq{Job: job.Job})
		if err != nil || info.Size != 4 || info.NextRank != 4 {
			t.Errorf("job after the aborted REPLACE: %+v %v; want size 4, next rank 4", info, err)
		}
		if got := linesOf(d.mlines(job.Job), "LEFT", delta); len(got) != 0 {
			t.Errorf("a replaced process left although the REPLACE was aborted: %v", got)
		}
		d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCSub, N: 1})
		if end := d.wait(job.Job); end.State != wire.JobStateDone || end.Code != 0 {
			t.Fatalf("job ended %s code %d: %s", end.State, end.Code, end.Msg)
		}
	})

	t.Run("asked for by the application", func(t *testing.T) {
		// Rank 0 asks for a REPLACE of one process (the runtime picks the
		// one on the highest slot, rank 2) through lib/session.
		job := d.start(3, "-last", "1", "-requests", "replace:1")
		rc := d.onlyChange(job)
		if rc.Type != wire.RCReplace || rc.Status != wire.RCFinalized || rc.Requester != wire.ByApp || rc.Out.String() != "2" || rc.Ranks.String() != "3" {
			t.Fatalf("app-requested REPLACE: %+v", rc)
		}
		d.waitMembers(job, "0-1,3")
		if end := d.wait(job.Job); end.State != wire.JobStateDone || end.Code != 0 {
			t.Fatalf("job ended %s code %d: %s", end.State, end.Code, end.Msg)
		}
	})

	t.Run("every member replaced", func(t *testing.T) {
		// A one-process job replaces its only process: phase 2 must not
		// pass through an empty set (the union comes first). Found by
		// chaos -replace, seed 11.
		job := d.start(1, "-last", "1")
		rc := d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCReplace, Ranks: wire.RangesOf([]uint32{0})})
		if rc.Out.String() != "0" || rc.Ranks.String() != "1" {
			t.Fatalf("record %+v", rc)
		}
		d.waitMembers(job, "1")
		if end := d.wait(job.Job); end.State != wire.JobStateDone || end.Code != 0 {
			t.Fatalf("job ended %s code %d: %s", end.State, end.Code, end.Msg)
		}
	})

	t.Run("bad requests", func(t *testing.T) {
		job := d.start(2, "-last", "1")
		for _, tc := range []struct {
			req  wire.RCRequest
			code *wire.Error
			want string
		}{
			{wire.RCRequest{Type: wire.RCReplace}, wire.ErrInvalid, "positive number of processes or the ranks"},
			{wire.RCRequest{Type: wire.RCReplace, Ranks: wire.RangesOf([]uint32{7})}, wire.ErrNotFound, "no live rank 7"},
			{wire.RCRequest{Type: wire.RCReplace, N: 3}, wire.ErrInvalid, "only 2 live processes"},
			{wire.RCRequest{Type: wire.RCReplace, N: 2, Ranks: wire.RangesOf([]uint32{1})}, wire.ErrInvalid, "names 1 ranks"},
			{wire.RCRequest{Type: wire.RCReplace, N: 1, Bound: []string{pset.NameWorld}}, wire.ErrInvalid, "not malleable"},
		} {
			tc.req.Job = job.Job
			_, err := d.request(tc.req)
			if !errors.Is(err, tc.code) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%+v: %v, want %v containing %q", tc.req, err, tc.code, tc.want)
			}
		}
		d.mustRequest(wire.RCRequest{Job: job.Job, Type: wire.RCSub, N: 1})
		if end := d.wait(job.Job); end.State != wire.JobStateDone {
			t.Fatalf("job ended %s: %s", end.State, end.Msg)
		}
	})
}

// onlyChange waits until job's one change is settled and returns it (by
// job: the jobs of a DVM running the same program share the application
// name, so a delta name alone may name another job's change).
func (d *rcDVM) onlyChange(job wire.JobLaunchReply) wire.RC {
	d.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		rcs, err := d.c.RCs(context.Background(), job.Job)
		if err != nil {
			d.t.Fatal(err)
		}
		if len(rcs) == 1 && rcs[0].Settled {
			return rcs[0]
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("no settled change of job %s: %+v", job.Job, rcs)
		}
	}
}
