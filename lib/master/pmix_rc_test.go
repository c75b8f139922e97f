//go:build pmix

package master

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// waitMalleable waits until every live process of job has declared
// itself malleable to the master (DYNRT_PMIX_MALLEABLE), so that it takes
// resource changes.
func waitMalleable(t *testing.T, d *testDVM, job string) {
	t.Helper()
	var static error = errors.New("not yet")
	for deadline := time.Now().Add(20 * time.Second); static != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("job %s still refuses changes: %v; output %q", job, static, lines(d, job))
		}
		_ = do(context.Background(), d.m, func(s *state) error {
			j := s.jobs[job]
			static = j.staticErr()
			if static == nil && !j.pmixJob() {
				static = errors.New("no PMIx session yet")
			}
			return nil
		})
	}
}

// TestPMIxRCFollow: a plain PMIx program that opts in to resource
// changes (testdata/pmix/rc_follow.c) is told of a SUB of ranks 2 and 3
// by PMIx events on 1 and 4 virtual nodes: every rank gets the delta
// set's definition and the change's type, status, delta, ranks and bound
// set, reads the delta's members through PMIx_Query; rank 0, the root
// of the application set, accepts with the accept event and gets the
// outcome back; the change is FINALIZED, ranks 2 and 3 leave, 0 and 1
// go on, and the job ends with status 0. An ADD and a REPLACE of it are
// refused with the reason.
func TestPMIxRCFollow(t *testing.T) {
	prog := pmixProgram(t, "rc_follow")
	for _, nodes := range []int{1, 4} {
		what := fmt.Sprintf("%d nodes: ", nodes)
		d := startDVM(t, nodes, 4/nodes)
		rep, err := d.launch(wire.JobLaunchReq{Argv: []string{prog}, N: 4, MapBy: wire.MapByNode, PMI: wire.PMIPMIx})
		if err != nil {
			t.Fatal(err)
		}
		waitMalleable(t, d, rep.Job)
		for _, typ := range []string{wire.RCAdd, wire.RCReplace} {
			req := wire.RCRequest{Job: rep.Job, Type: typ, N: 1}
			if typ == wire.RCReplace {
				req.Ranks = wire.Span(1, 1)
			}
			_, err := d.rc(req)
			if !errors.Is(err, wire.ErrUnsupported) || !strings.Contains(err.Error(), "would have to join its running PMIx namespace") {
				t.Errorf("%s%s: %v, want the refusal", what, typ, err)
			}
		}
		rc, err := d.rc(wire.RCRequest{Job: rep.Job, Type: wire.RCSub, Ranks: wire.Span(2, 3)})
		if err != nil {
			t.Fatalf("%sSUB: %v", what, err)
		}
		if got := d.settled(rc.Delta); got.Status != wire.RCFinalized {
			t.Errorf("%sSUB %s ended %s (%s)", what, rc.Delta, got.Status, got.Reason)
		}
		end := d.wait(rep.Job)
		if end.Code != 0 || end.State != wire.JobStateDone {
			t.Errorf("%sjob ended %d %s: %s\n%s", what, end.Code, end.State, end.Msg, stderrOf(d, rep.Job))
		}
		for _, p := range d.procs(rep.Job) {
			if p.State != wire.ProcStateExited || p.Code != 0 {
				t.Errorf("%srank %d ended %s code %d", what, p.Rank, p.State, p.Code)
			}
		}
		app := "mpi://app/" + rep.App
		var want []string
		for r := range 4 {
			want = append(want,
				fmt.Sprintf("rank %d malleable", r),
				fmt.Sprintf("rank %d pset_define %s members=job:2,job:3", r, rc.Delta),
				fmt.Sprintf("rank %d rc SUB ANNOUNCED %s ranks=job:2,job:3 bound=%s", r, rc.Delta, app),
				fmt.Sprintf("rank %d delta %s members=job:2,job:3", r, rc.Delta),
				fmt.Sprintf("rank %d rc SUB FINALIZED %s ranks=job:2,job:3 bound=%s", r, rc.Delta, app))
			if r < 2 {
				want = append(want, fmt.Sprintf("rank %d done", r))
			} else {
				want = append(want, fmt.Sprintf("rank %d leaves", r))
			}
		}
		want = append(want, fmt.Sprintf("rank 0 accepts %s for %s", rc.Delta, app), fmt.Sprintf("rank 0 accepted %s: FINALIZED", rc.Delta))
		slices.Sort(want)
		checkLines(t, what, lines(d, rep.Job), want)
		checkScratchGone(t, rep.Job)
	}
}
