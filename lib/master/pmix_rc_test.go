//go:build pmix

package master

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/lib/pset"
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
// outcome back (its daemon made the application set DIFFERENCE(app,
// delta): ranks 0 and 1); the change is FINALIZED, ranks 2 and 3 leave, 0
// and 1 go on and fence over the application set as PMIx_Query gives it
// (a wildcard fence of the namespace would wait for 2 and 3: libpmix
// counts the processes the namespace was registered with), and the job
// ends with status 0.
func TestPMIxRCFollow(t *testing.T) {
	prog := pmixProgram(t, "rc_follow")
	onNodes(t, func(what string, d *testDVM) {
		rep := launchFollow(t, d, 4, prog, "1", "60", "fenceset")
		rc := finalized(t, what, d, wire.RCRequest{Job: rep.Job, Type: wire.RCSub, Ranks: wire.Span(2, 3)})
		checkAppSet(t, what, d, rep, wire.Span(0, 1))
		checkAllExited(t, what, d, rep.Job, 4)
		app := "mpi://app/" + rep.App
		var want []string
		for r := range 4 {
			want = append(want, followLines(r, wire.RCSub, rc.Delta, "job:2,job:3", "", app, wire.RCAnnounced, wire.RCFinalized)...)
			if r < 2 {
				want = append(want, fmt.Sprintf("rank %d fenced %s (2 procs)", r, app), fmt.Sprintf("rank %d done", r))
			} else {
				want = append(want, fmt.Sprintf("rank %d leaves", r))
			}
		}
		want = append(want, fmt.Sprintf("rank 0 accepts %s for %s", rc.Delta, app), fmt.Sprintf("rank 0 accepted %s: FINALIZED", rc.Delta))
		slices.Sort(want)
		checkLines(t, what, lines(d, rep.Job), want)
		checkScratchGone(t, rep.Job)
	})
}

// TestPMIxRCAdd: an ADD of 2 processes to a 2-process PMIx job that
// follows changes (testdata/pmix/rc_follow.c), on 1 and 4 virtual nodes
// (after an ADD that does not fit, refused without a trace).
// The new processes form a PMIx namespace of their own (<job>.rc1, PMIx
// ranks 0 and 1 = dynrt ranks 2 and 3), registered where they run. Ranks
// 0 and 1 get the delta's definition and every status with the new
// processes under their PMIx names (job.rc1:0 and :1, also in the query
// of the delta's members); rank 0 accepts (its daemon builds UNION(app,
// delta): the application set is ranks 0-3 after it); the new processes
// read the change, the dynrt job and their base rank from their
// namespace's job info, confirm, and get FINALIZED. Then the two
// namespaces PMIx_Connect, fence together and each reads what PMIx rank 0
// of the other put (its dynrt rank: across nodes by direct modex), and
// disconnect; PMIx rank 0 of the ADD's namespace spawns a spawn_client,
// whose PMIX_PARENT_ID must name it by its PMIx name (<job>.rc1:0, not
// its dynrt one); each namespace fences by itself (the first twice, the
// ADD's once: one fence of all four would fail the second on 4 nodes),
// every process finalizes and exits 0, the job ends with status 0 and
// size 4, and no scratch directory of either namespace is left.
func TestPMIxRCAdd(t *testing.T) {
	prog := pmixProgram(t, "rc_follow")
	onNodes(t, func(what string, d *testDVM) {
		rep := launchFollow(t, d, 2, prog, "1", "60", "fence", "together", "spawn="+pmixProgram(t, "spawn_client"))
		if _, err := d.rc(wire.RCRequest{Job: rep.Job, Type: wire.RCAdd, N: 100}); err == nil || !strings.Contains(err.Error(), "ADD 100 to job rc_follow") {
			t.Errorf("%sADD of 100: %v, want a refusal (no room)", what, err)
		}
		rc := finalized(t, what, d, wire.RCRequest{Job: rep.Job, Type: wire.RCAdd, N: 2})
		checkAppSet(t, what, d, rep, wire.Span(0, 3))
		checkAllExited(t, what, d, rep.Job, 4)
		app := "mpi://app/" + rep.App
		var want []string
		for r := range 2 {
			want = append(want, followLines(r, wire.RCAdd, rc.Delta, "job.rc1:0,job.rc1:1", "", app, wire.RCAnnounced, wire.RCPending, wire.RCFinalized)...)
			want = append(want,
				fmt.Sprintf("rank %d together: the other namespace's rank 0 is rank 2", r),
				fmt.Sprintf("rank %d fenced 1", r),
				fmt.Sprintf("rank %d fenced 2", r),
				fmt.Sprintf("rank %d done", r))
		}
		for r := 2; r < 4; r++ {
			want = append(want,
				fmt.Sprintf("rank %d malleable", r),
				fmt.Sprintf("rank %d joins %s as %s.rc1:%d of %s", r, rc.Delta, rep.Job, r-2, rep.Job),
				fmt.Sprintf("rank %d confirmed %s: FINALIZED", r, rc.Delta),
				fmt.Sprintf("rank %d together: the other namespace's rank 0 is rank 0", r),
				fmt.Sprintf("rank %d fenced 1", r),
				fmt.Sprintf("rank %d done", r))
		}
		want = append(want, fmt.Sprintf("rank 0 accepts %s for %s", rc.Delta, app), fmt.Sprintf("rank 0 accepted %s: PENDING", rc.Delta))
		slices.Sort(want)
		got := lines(d, rep.Job)
		// Rank 2 (PMIx rank 0 of the ADD's namespace) spawned a child,
		// which checks that its parent is named <job>.rc1:0.
		if i := slices.IndexFunc(got, func(l string) bool { return strings.HasPrefix(l, "rank 2 spawned ") }); i < 0 {
			t.Errorf("%sno spawn in %q", what, got)
		} else {
			child := strings.TrimPrefix(got[i], "rank 2 spawned ")
			got = slices.Delete(got, i, i+1)
			if end := d.wait(child); end.Code != 0 {
				t.Errorf("%sspawned job %s ended %d: %s\n%s", what, child, end.Code, end.Msg, stderrOf(d, child))
			}
			checkLines(t, what+"child: ", lines(d, child), []string{"child 0: spawned yes, parent right"})
		}
		checkLines(t, what, got, want)
		checkScratchGone(t, rep.Job)
		checkScratchGone(t, rep.Job+".rc1")
	})
}

// TestPMIxRCAddFails: an ADD to a PMIx job that goes wrong leaves
// nothing behind: the new processes cannot start (the program is gone),
// or the job is killed while the ADD waits for its accept. The change is
// ABORTED, every process has ended, and no scratch directory (so no
// registered namespace: both go together) of either namespace is left,
// on 4 virtual nodes.
func TestPMIxRCAddFails(t *testing.T) {
	prog := pmixProgram(t, "rc_follow")
	for _, tc := range []struct {
		name string
		args []string
		// during runs once the ADD is announced; after checks the job's end.
		during func(d *testDVM, job string)
		end    string
	}{
		{"new processes cannot start", []string{"1", "60"},
			nil, wire.JobStateDone},
		{"job killed during the change", []string{"1", "60", "noaccept"},
			func(d *testDVM, job string) {
				d.waitLines(job, 12) // the new processes wait for the accept in their confirm
				d.kill(job)
			}, wire.JobStateKilled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startDVM(t, 4, 1)
			copied := filepath.Join(t.TempDir(), "rc_follow")
			if b, err := os.ReadFile(prog); err != nil || os.WriteFile(copied, b, 0o755) != nil {
				t.Fatalf("copy %s: %v", prog, err)
			}
			rep := launchFollow(t, d, 2, append([]string{copied}, tc.args...)...)
			if tc.during == nil {
				if err := os.Remove(copied); err != nil {
					t.Fatal(err)
				}
			}
			rc, err := d.rc(wire.RCRequest{Job: rep.Job, Type: wire.RCAdd, N: 2})
			if err != nil {
				t.Fatalf("ADD: %v", err)
			}
			if tc.during != nil {
				tc.during(d, rep.Job)
			}
			if got := d.settled(rc.Delta); got.Status != wire.RCAborted {
				t.Errorf("ADD %s ended %s, want ABORTED", rc.Delta, got.Status)
			}
			end := d.wait(rep.Job)
			if end.State != tc.end {
				t.Errorf("job ended %s (%d: %s), want %s\n%s", end.State, end.Code, end.Msg, tc.end, stderrOf(d, rep.Job))
			}
			for _, p := range d.procs(rep.Job) {
				if p.State == wire.ProcStateRunning || p.State == wire.ProcStateLaunching {
					t.Errorf("rank %d still %s", p.Rank, p.State)
				}
			}
			if tc.end == wire.JobStateDone {
				for r := range 2 {
					for _, l := range []string{fmt.Sprintf("rank %d rc ADD ABORTED %s", r, rc.Delta), fmt.Sprintf("rank %d done", r)} {
						if !slices.ContainsFunc(lines(d, rep.Job), func(s string) bool { return strings.HasPrefix(s, l) }) {
							t.Errorf("no line %q in %q", l, lines(d, rep.Job))
						}
					}
				}
			}
			checkScratchGone(t, rep.Job)
			checkScratchGone(t, rep.Job+".rc1")
		})
	}
}

// TestPMIxRCReplace: a REPLACE of rank 1 of a 2-process PMIx job that
// follows changes, on 1 and 4 virtual nodes. The new process forms
// namespace <job>.rc1 (dynrt rank 2), as for an ADD; ranks 0 and 1 get
// every status with the new process and the replaced one under their
// PMIx names (ranks=job.rc1:0 out=job:1); rank 0 accepts (its daemon
// builds DIFFERENCE(UNION(app, delta), replaced): the application set is
// ranks 0 and 2 after it), the new process confirms, and once the change
// is FINALIZED rank 1 leaves; ranks 0 and 2 connect and fence over the
// application set (two namespaces); all three exit 0 and no scratch
// directory is left.
func TestPMIxRCReplace(t *testing.T) {
	prog := pmixProgram(t, "rc_follow")
	onNodes(t, func(what string, d *testDVM) {
		rep := launchFollow(t, d, 2, prog, "1", "60", "fenceset")
		rc := finalized(t, what, d, wire.RCRequest{Job: rep.Job, Type: wire.RCReplace, N: 1, Ranks: wire.Span(1, 1)})
		checkAppSet(t, what, d, rep, wire.RankRanges{{Lo: 0, Hi: 0}, {Lo: 2, Hi: 2}})
		checkAllExited(t, what, d, rep.Job, 3)
		app := "mpi://app/" + rep.App
		var want []string
		for r, last := range []string{"done", "leaves"} {
			want = append(want, followLines(r, wire.RCReplace, rc.Delta, "job.rc1:0", "job:1", app, wire.RCAnnounced, wire.RCPending, wire.RCFinalized)...)
			want = append(want, fmt.Sprintf("rank %d %s", r, last))
		}
		want = append(want,
			"rank 2 malleable",
			fmt.Sprintf("rank 2 joins %s as %s.rc1:0 of %s", rc.Delta, rep.Job, rep.Job),
			fmt.Sprintf("rank 2 confirmed %s: FINALIZED", rc.Delta),
			"rank 2 done",
			fmt.Sprintf("rank 0 fenced %s (2 procs)", app), fmt.Sprintf("rank 2 fenced %s (2 procs)", app),
			fmt.Sprintf("rank 0 accepts %s for %s", rc.Delta, app), fmt.Sprintf("rank 0 accepted %s: PENDING", rc.Delta))
		slices.Sort(want)
		checkLines(t, what, lines(d, rep.Job), want)
		checkScratchGone(t, rep.Job)
		checkScratchGone(t, rep.Job+".rc1")
	})
}

// TestPMIxRCAddThenSub: later changes reach an ADD's processes like
// everyone else. A 2-process job grows by 2 (namespace <job>.rc1), then a
// SUB removes rank 1 of the first namespace and rank 2, PMIx rank 0 of
// the ADD's, on 1 and 4 virtual nodes: every process gets the SUB with
// the removed processes under their PMIx names (as each sees them), the
// two removed ones leave, the application set is ranks 0 and 3, which
// connect and fence over it, all exit 0, nothing is left.
func TestPMIxRCAddThenSub(t *testing.T) {
	prog := pmixProgram(t, "rc_follow")
	onNodes(t, func(what string, d *testDVM) {
		rep := launchFollow(t, d, 2, prog, "2", "60", "fenceset")
		add := finalized(t, what, d, wire.RCRequest{Job: rep.Job, Type: wire.RCAdd, N: 2})
		waitMalleable(t, d, rep.Job) // the new processes too
		sub := finalized(t, what, d, wire.RCRequest{Job: rep.Job, Type: wire.RCSub, Ranks: wire.Span(1, 2)})
		checkAppSet(t, what, d, rep, wire.RankRanges{{Lo: 0, Hi: 0}, {Lo: 3, Hi: 3}})
		checkAllExited(t, what, d, rep.Job, 4)
		app := "mpi://app/" + rep.App
		var want []string
		for r, last := range []string{"done", "leaves"} {
			want = append(want, followLines(r, wire.RCAdd, add.Delta, "job.rc1:0,job.rc1:1", "", app, wire.RCAnnounced, wire.RCPending, wire.RCFinalized)...)
			want = append(want, followLines(r, wire.RCSub, sub.Delta, "job:1,job.rc1:0", "", app, wire.RCAnnounced, wire.RCFinalized)[1:]...)
			want = append(want, fmt.Sprintf("rank %d %s", r, last))
		}
		for r, last := range map[int]string{2: "leaves", 3: "done"} {
			want = append(want,
				fmt.Sprintf("rank %d malleable", r),
				fmt.Sprintf("rank %d joins %s as %s.rc1:%d of %s", r, add.Delta, rep.Job, r-2, rep.Job),
				fmt.Sprintf("rank %d confirmed %s: FINALIZED", r, add.Delta))
			want = append(want, followLines(r, wire.RCSub, sub.Delta, "other:1,job:0", "", app, wire.RCAnnounced, wire.RCFinalized)[1:]...)
			want = append(want, fmt.Sprintf("rank %d %s", r, last))
		}
		for _, rc := range []wire.RC{add, sub} {
			want = append(want, fmt.Sprintf("rank 0 accepts %s for %s", rc.Delta, app))
		}
		want = append(want, fmt.Sprintf("rank 0 accepted %s: PENDING", add.Delta), fmt.Sprintf("rank 0 accepted %s: FINALIZED", sub.Delta),
			fmt.Sprintf("rank 0 fenced %s (2 procs)", app), fmt.Sprintf("rank 3 fenced %s (2 procs)", app))
		slices.Sort(want)
		checkLines(t, what, lines(d, rep.Job), want)
		checkScratchGone(t, rep.Job)
		checkScratchGone(t, rep.Job+".rc1")
	})
}

// finalized requests a change and waits until it has settled, which must
// be as FINALIZED.
func finalized(t *testing.T, what string, d *testDVM, req wire.RCRequest) wire.RC {
	t.Helper()
	rc, err := d.rc(req)
	if err != nil {
		t.Fatalf("%s%s: %v", what, req.Type, err)
	}
	if got := d.settled(rc.Delta); got.Status != wire.RCFinalized {
		t.Fatalf("%s%s %s ended %s (%s)\n%q", what, req.Type, rc.Delta, got.Status, got.Reason, lines(d, req.Job))
	}
	return rc
}

// TestPMIxRCAddAgain: an ADD to a PMIx job whose processes cannot start
// is ABORTED and gives its ranks back; the next ADD gets the same ranks (2
// and 3) in a namespace of its own, <job>.rc2, on 1 and 4 virtual nodes.
// The running processes see the first ADD's processes as job.rc1:0,1 and
// the second's as job.rc2:0,1; the new processes join rc/2 as <job>.rc2;
// all exit 0 and no scratch directory of either namespace is left.
func TestPMIxRCAddAgain(t *testing.T) {
	prog := pmixProgram(t, "rc_follow")
	b, err := os.ReadFile(prog)
	if err != nil {
		t.Fatal(err)
	}
	onNodes(t, func(what string, d *testDVM) {
		copied := filepath.Join(t.TempDir(), "rc_follow")
		if err := os.WriteFile(copied, b, 0o755); err != nil {
			t.Fatal(err)
		}
		rep := launchFollow(t, d, 2, copied, "2")
		if err := os.Remove(copied); err != nil {
			t.Fatal(err)
		}
		first, err := d.rc(wire.RCRequest{Job: rep.Job, Type: wire.RCAdd, N: 2})
		if err != nil {
			t.Fatalf("%sfirst ADD: %v", what, err)
		}
		if got := d.settled(first.Delta); got.Status != wire.RCAborted {
			t.Fatalf("%sfirst ADD %s ended %s, want ABORTED", what, first.Delta, got.Status)
		}
		if err := os.WriteFile(copied, b, 0o755); err != nil {
			t.Fatal(err)
		}
		second := finalized(t, what, d, wire.RCRequest{Job: rep.Job, Type: wire.RCAdd, N: 2})
		if !slices.Equal(second.Ranks, wire.Span(2, 3)) {
			t.Errorf("%ssecond ADD has ranks %s, want 2-3", what, second.Ranks)
		}
		checkAllExited(t, what, d, rep.Job, 4)
		app := "mpi://app/" + rep.App
		var want []string
		for r := range 2 {
			want = append(want, followLines(r, wire.RCAdd, first.Delta, "job.rc1:0,job.rc1:1", "", app, wire.RCAnnounced, wire.RCAborted)...)
			want = append(want, followLines(r, wire.RCAdd, second.Delta, "job.rc2:0,job.rc2:1", "", app, wire.RCAnnounced, wire.RCPending, wire.RCFinalized)[1:]...)
			want = append(want, fmt.Sprintf("rank %d done", r))
		}
		for r := 2; r < 4; r++ {
			want = append(want,
				fmt.Sprintf("rank %d malleable", r),
				fmt.Sprintf("rank %d joins %s as %s.rc2:%d of %s", r, second.Delta, rep.Job, r-2, rep.Job),
				fmt.Sprintf("rank %d confirmed %s: FINALIZED", r, second.Delta),
				fmt.Sprintf("rank %d done", r))
		}
		want = append(want, fmt.Sprintf("rank 0 accepts %s for %s", second.Delta, app), fmt.Sprintf("rank 0 accepted %s: PENDING", second.Delta))
		// The root may have accepted the first ADD before it was aborted,
		// or not: its accept and the PENDING it made are left out; the
		// abort's reason names the failed start.
		var got []string
		for _, l := range lines(d, rep.Job) {
			if strings.Contains(l, first.Delta+" ") || strings.Contains(l, first.Delta+":") {
				if strings.HasPrefix(l, "rank 0 accept") || strings.Contains(l, " PENDING ") {
					continue
				}
				if head, why, ok := strings.Cut(l, " error="); ok {
					if !strings.Contains(why, "could not start") {
						t.Errorf("%sabort of %s: %q", what, first.Delta, why)
					}
					l = head
				}
			}
			got = append(got, l)
		}
		slices.Sort(want)
		checkLines(t, what, got, want)
		for _, ns := range []string{rep.Job, rep.Job + ".rc1", rep.Job + ".rc2"} {
			checkScratchGone(t, ns)
		}
	})
}

// onNodes runs a test on 1 and on 4 virtual nodes of 4 slots in all,
// what naming the case.
func onNodes(t *testing.T, run func(what string, d *testDVM)) {
	for _, nodes := range []int{1, 4} {
		run(fmt.Sprintf("%d nodes: ", nodes), startDVM(t, nodes, 4/nodes))
	}
}

// launchFollow launches argv as a PMIx job of n processes mapped by node
// and waits until every one of them has declared itself malleable.
func launchFollow(t *testing.T, d *testDVM, n uint32, argv ...string) wire.JobLaunchReply {
	t.Helper()
	rep, err := d.launch(wire.JobLaunchReq{Argv: argv, N: n, MapBy: wire.MapByNode, PMI: wire.PMIPMIx})
	if err != nil {
		t.Fatal(err)
	}
	waitMalleable(t, d, rep.Job)
	return rep
}

// checkAppSet checks the members of the application set of rep's job
// after a change: the set the root's daemon built for its accept.
func checkAppSet(t *testing.T, what string, d *testDVM, rep wire.JobLaunchReply, want wire.RankRanges) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in, err := d.c.Pset(ctx, wire.PsetGetReq{Job: rep.Job, Name: "mpi://app/" + rep.App, Members: true})
	if err != nil {
		t.Fatalf("%sapplication set: %v", what, err)
	}
	if !slices.Equal(in.Members, want) {
		t.Errorf("%sapplication set %s: members %s, want %s", what, in.Name, in.Members, want)
	}
}

// checkAllExited waits for job to end and checks that it ended well with
// n processes, each of which exited 0.
func checkAllExited(t *testing.T, what string, d *testDVM, job string, n int) {
	t.Helper()
	end := d.wait(job)
	if end.Code != 0 || end.State != wire.JobStateDone {
		t.Errorf("%sjob ended %d %s: %s\n%s", what, end.Code, end.State, end.Msg, stderrOf(d, job))
	}
	procs := d.procs(job)
	if len(procs) != n {
		t.Errorf("%s%d processes, want %d", what, len(procs), n)
	}
	for _, p := range procs {
		if p.State != wire.ProcStateExited || p.Code != 0 {
			t.Errorf("%srank %d ended %s code %d", what, p.Rank, p.State, p.Code)
		}
	}
}

// followLines is what rank r of rc_follow prints of a change it follows:
// its opt-in, the delta's definition and members, and one line per status
// (with a REPLACE's replaced processes, out).
func followLines(r int, typ, delta, members, out, bound string, statuses ...string) []string {
	lines := []string{
		fmt.Sprintf("rank %d malleable", r),
		fmt.Sprintf("rank %d pset_define %s members=%s", r, delta, members),
		fmt.Sprintf("rank %d delta %s members=%s", r, delta, members),
	}
	if out != "" {
		out = " out=" + out
	}
	for _, st := range statuses {
		lines = append(lines, fmt.Sprintf("rank %d rc %s %s %s ranks=%s%s bound=%s", r, typ, st, delta, members, out, bound))
	}
	return lines
}

// TestPMIxRCFailure: with --on-failure shrink or replace, kill -9 of rank
// 3 of a 4-process PMIx job that follows changes (testdata/pmix/rc_follow.c)
// becomes a SUB of that rank, or a REPLACE of it by a new process (PMIx
// name <job>.rc1:0, dynrt rank 4), which the survivors follow through
// PMIx events like a change asked with dynrc, on 1 and 4 virtual nodes:
// every survivor gets the delta set and the change's statuses, rank 0
// accepts for the application set (ranks 0-2, or 0-2 and 4); a
// replacement joins and confirms; all fence over the set, exit 0, and the
// job ends with status 0; no scratch directory is left.
func TestPMIxRCFailure(t *testing.T) {
	prog := pmixProgram(t, "rc_follow")
	for _, policy := range []string{wire.OnFailureShrink, wire.OnFailureReplace} {
		t.Run(policy, func(t *testing.T) {
			onNodes(t, func(what string, d *testDVM) {
				rep, err := d.launch(wire.JobLaunchReq{Argv: []string{prog, "1", "60", "fenceset"}, N: 4, MapBy: wire.MapByNode, PMI: wire.PMIPMIx, OnFailure: policy})
				if err != nil {
					t.Fatal(err)
				}
				waitMalleable(t, d, rep.Job)
				killed := false
				for _, p := range d.procs(rep.Job) {
					if p.Rank == 3 && p.PID > 0 {
						killed = syscall.Kill(p.PID, syscall.SIGKILL) == nil
					}
				}
				if !killed {
					t.Fatalf("%sno live rank 3 to kill in %+v", what, d.procs(rep.Job))
				}
				delta := pset.DeltaName(rep.App, 1)
				d.started(delta) // made by the master when it learns of the loss
				if rc := d.settled(delta); rc.Status != wire.RCFinalized {
					t.Fatalf("%sthe failure's change %s ended %s (%s)\n%q", what, delta, rc.Status, rc.Reason, lines(d, rep.Job))
				}
				if end := d.wait(rep.Job); end.Code != 0 || end.State != wire.JobStateDone {
					t.Errorf("%sjob ended %s with status %d (%s), want done with 0", what, end.State, end.Code, end.Reason)
				}
				app := "mpi://app/" + rep.App
				typ, members, out, statuses, accepted, set, survivors := wire.RCSub, "job:3", "", []string{wire.RCAnnounced, wire.RCFinalized}, wire.RCFinalized, wire.Span(0, 2), []int{0, 1, 2}
				if policy == wire.OnFailureReplace {
					typ, members, out, statuses, accepted, set, survivors = wire.RCReplace, "job.rc1:0", "job:3", []string{wire.RCAnnounced, wire.RCPending, wire.RCFinalized}, wire.RCPending, wire.RankRanges{{Lo: 0, Hi: 2}, {Lo: 4, Hi: 4}}, []int{0, 1, 2, 4}
				}
				checkAppSet(t, what, d, rep, set)
				want := []string{"rank 3 malleable"}
				for _, r := range survivors {
					if r < 3 {
						want = append(want, followLines(r, typ, delta, members, out, app, statuses...)...)
					} else {
						want = append(want, "rank 4 malleable",
							fmt.Sprintf("rank 4 joins %s as %s.rc1:0 of %s", delta, rep.Job, rep.Job),
							fmt.Sprintf("rank 4 confirmed %s: FINALIZED", delta))
					}
					want = append(want, fmt.Sprintf("rank %d fenced %s (%d procs)", r, app, len(survivors)), fmt.Sprintf("rank %d done", r))
				}
				want = append(want, fmt.Sprintf("rank 0 accepts %s for %s", delta, app), fmt.Sprintf("rank 0 accepted %s: %s", delta, accepted))
				slices.Sort(want)
				checkLines(t, what, lines(d, rep.Job), want)
				checkScratchGone(t, rep.Job)
				checkScratchGone(t, rep.Job+".rc1")
			})
		})
	}
}
