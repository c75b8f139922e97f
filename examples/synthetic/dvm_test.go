package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/examples/synthetic/report"
	"github.com/dynrt/dynrt/internal/dvmtest"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// The test binary doubles as the node daemon of the virtual nodes
// (internal/dvmtest); the benchmark itself is built once per run (by
// progs) into a temp dir that TestMain removes.
var progs = &dvmtest.Programs{Race: dvmtest.Race}

func TestMain(m *testing.M) { dvmtest.Main(m, progs) }

// testDVM collects the output of the jobs of a test DVM.
type testDVM struct {
	t   *testing.T
	d   *dvmtest.DVM
	c   *tool.Client
	out *dvmtest.Output
}

func startDVM(t *testing.T, nodes, slots int) *testDVM {
	return startDVMWith(t, dvmtest.Options{Nodes: nodes, Slots: slots})
}

func startDVMWith(t *testing.T, o dvmtest.Options) *testDVM {
	d := &testDVM{t: t}
	d.d = dvmtest.Start(t, o)
	d.c = d.d.Attach(t)
	d.out = dvmtest.CollectOutput(d.c)
	return d
}

func (d *testDVM) launch(n int, args ...string) string {
	d.t.Helper()
	exe := progs.Build(d.t, "github.com/dynrt/dynrt/examples/synthetic") // before the launch's deadline: a build under load takes many seconds
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := d.c.Launch(ctx, wire.JobLaunchReq{
		Argv: append([]string{exe}, args...), N: uint32(n), Env: d.d.Env,
		Output: wire.OutputFlags{Forward: true},
	})
	if err != nil {
		d.t.Fatalf("launch %v: %v", args, err)
	}
	return rep.Job
}

// wait waits for a job's successful end and returns rank 0's stdout.
func (d *testDVM) wait(job string) string {
	d.t.Helper()
	end := dvmtest.WaitJob(d.t, d.c, job, 60*time.Second)
	var root, errs strings.Builder
	for _, l := range d.out.Lines(job) {
		switch {
		case l.Stream == wire.StreamStderr:
			fmt.Fprintf(&errs, "rank %d: %s\n", l.Rank, l.Line)
		case l.Rank == 0:
			root.Write(l.Line)
			root.WriteByte('\n')
		}
	}
	if end.State != wire.JobStateDone || end.Code != 0 {
		d.t.Fatalf("job %s ended %s with code %d: %s\nstderr:\n%s\nrank 0:\n%s", job, end.State, end.Code, end.Msg, errs.String(), root.String())
	}
	if errs.Len() > 0 {
		d.t.Errorf("job %s wrote to stderr:\n%s", job, errs.String())
	}
	return root.String()
}

// checkRun checks the lines of a run against the processes it started with
// and the changes it should have made (in order).
func checkRun(t *testing.T, text string, start int, problem int64, want []change) report.Run {
	t.Helper()
	run, err := report.Read(strings.NewReader(text))
	if err != nil {
		t.Fatalf("read the lines: %v\n%s", err, text)
	}
	if run.End == nil || len(run.Iters) == 0 {
		t.Fatalf("no end line or no iterations:\n%s", text)
	}
	count := work(problem, 0, problem)
	if run.End.Count != count {
		t.Errorf("end line: work result %d, one process counts %d", run.End.Count, count)
	}
	procs := start
	for i, it := range run.Iters {
		if it.Iter != i {
			t.Fatalf("line %d is iteration %d", i, it.Iter)
		}
		if it.Count != count {
			t.Errorf("iteration %d with %d processes: work result %d, want %d", i, it.Procs, it.Count, count)
		}
		if it.Procs != procs {
			t.Errorf("iteration %d ran with %d processes, want %d", i, it.Procs, procs)
		}
		if it.RCStatus == wire.RCFinalized {
			if it.RCType == wire.RCAdd {
				procs += it.RCN
			} else {
				procs -= it.RCN
			}
		}
		if it.WorkMS <= 0 || it.SyncMS <= 0 || it.RCMS <= 0 {
			t.Errorf("iteration %d: times not measured: %+v", i, it)
		}
	}
	if run.End.FinalProcs != procs {
		t.Errorf("end line: %d processes, the iterations say %d", run.End.FinalProcs, procs)
	}
	if len(run.Changes) != len(want) {
		t.Fatalf("%d changes, want %d (%v):\n%s", len(run.Changes), len(want), want, text)
	}
	n := start
	for i, c := range run.Changes {
		if c.Type != want[i].Type || c.N != want[i].N || c.Status != wire.RCFinalized {
			t.Errorf("change %d: %s %d %s, want %s %d FINALIZED", i+1, c.Type, c.N, c.Status, want[i].Type, want[i].N)
		}
		next := n + c.N
		if c.Type == wire.RCSub {
			next = n - c.N
		}
		if c.From != n || c.To != next {
			t.Errorf("change %d: %d → %d processes, want %d → %d", i+1, c.From, c.To, n, next)
		}
		n = next
		if c.AnnouncedMS <= 0 || c.FinalizedMS < c.AnnouncedMS || c.Phase2MS <= 0 || c.Phase3MS <= 0 || c.CommMS <= 0 {
			t.Errorf("change %d: step times missing or out of order: %+v", i+1, c)
		}
		if c.Type == wire.RCAdd && c.StartedMS <= 0 {
			t.Errorf("change %d: an ADD without its all-started time: %+v", i+1, c)
		}
		if c.Type == wire.RCSub && c.ExitedMS < c.FinalizedMS {
			t.Errorf("change %d: a SUB whose exits were not seen: %+v", i+1, c)
		}
	}
	return run
}

// checkTables checks that rank 0 printed the summary tables with a row for
// every n_delta of the changes.
func checkTables(t *testing.T, text string, changes []change) {
	t.Helper()
	for _, title := range []string{"# Table 8.2 shape", "# Table 8.3 shape", "# Figure 8.2 shape", "# Figure 8.3 shape", "# work result: "} {
		if !strings.Contains(text, title) {
			t.Errorf("no %q in the output:\n%s", title, text)
		}
	}
	lines := strings.Split(text, "\n")
	for _, c := range changes {
		table := "# Table 8.2"
		if c.Type == wire.RCSub {
			table = "# Table 8.3"
		}
		found := false
		for i, l := range lines {
			if !strings.HasPrefix(l, table) {
				continue
			}
			for _, row := range lines[i+2:] {
				f := strings.Fields(strings.TrimPrefix(row, "#"))
				if len(f) == 0 {
					break
				}
				found = found || f[0] == fmt.Sprint(c.N)
			}
		}
		if !found {
			t.Errorf("%s has no row for n_delta %d:\n%s", table, c.N, text)
		}
	}
}

// An application-triggered grow and, at the same time in another job, an
// application-triggered shrink (inc mode, thesis §8.1.1): the processes
// follow the plan, the work result never changes, every change ends
// FINALIZED, and the tables come out.
func TestAppTriggeredGrowAndShrink(t *testing.T) {
	d := startDVM(t, 2, 8)
	const problem = 100_000
	common := []string{"--mode", "inc", "--delta", "2", "-f", "2", "-i", "9", "--problem-size", fmt.Sprint(problem), "--timeout", "50s"}
	grow := d.launch(2, append([]string{"--start", "2", "--limit", "6"}, common...)...)
	shrink := d.launch(6, append([]string{"--start", "6", "--limit", "2"}, common...)...)

	growPlan := []change{{wire.RCAdd, 2}, {wire.RCAdd, 2}}
	text := d.wait(grow)
	run := checkRun(t, text, 2, problem, growPlan)
	checkTables(t, text, growPlan)
	if run.Changes[0].PendingIters+run.Changes[1].PendingIters == 0 {
		// Non-blocking accept: the runtime answers PENDING at least once
		// while the new processes start (they cannot confirm before the
		// accept is published).
		t.Errorf("no iteration saw a change PENDING:\n%s", text)
	}

	shrinkPlan := []change{{wire.RCSub, 2}, {wire.RCSub, 2}}
	text = d.wait(shrink)
	checkRun(t, text, 6, problem, shrinkPlan)
	checkTables(t, text, shrinkPlan)
}

// Changes sent from outside (lib/tool, as dynrc does): the program only
// adapts, keeps going until both changes have ended, and writes its lines
// to the file --out names; blocking accept.
func TestExternalTrigger(t *testing.T) {
	d := startDVM(t, 2, 4)
	const problem = 300_000
	out := filepath.Join(t.TempDir(), "run.jsonl")
	job := d.launch(2, "--trigger", "external", "--changes", "2", "-i", "3", "-b",
		"--problem-size", fmt.Sprint(problem), "--out", out, "--timeout", "50s")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, req := range []wire.RCRequest{{Job: job, Type: wire.RCAdd, N: 3}, {Job: job, Type: wire.RCSub, N: 1}} {
		req.Wait = true
		req.Queue = true
		req.TimeoutMS = 20_000
		rc, err := d.c.RequestRC(ctx, req)
		if err != nil {
			t.Fatalf("%s %d: %v", req.Type, req.N, err)
		}
		if rc.Status != wire.RCFinalized {
			t.Fatalf("%s %d ended %s: %s", req.Type, req.N, rc.Status, rc.Reason)
		}
	}
	stdout := d.wait(job)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	plan := []change{{wire.RCAdd, 3}, {wire.RCSub, 1}}
	run := checkRun(t, string(b), 2, problem, plan)
	for _, c := range run.Changes {
		if c.Requester != wire.ByTool || !c.Blocking || c.PendingIters != 0 {
			t.Errorf("change %s: requester %q, blocking %v, %d pending iterations; want tool, true, 0", c.Delta, c.Requester, c.Blocking, c.PendingIters)
		}
	}
	if strings.Contains(stdout, `{"kind"`) {
		t.Errorf("JSON lines on stdout although --out was given:\n%s", stdout)
	}
	checkTables(t, stdout, plan)
}

// The check itself: processes that joined and miscount (a test flag) make
// every process see a changed sum, and the run fails.
func TestWorkCheckFails(t *testing.T) {
	d := startDVM(t, 1, 4)
	job := d.launch(2, "--mode", "inc", "--start", "2", "--limit", "3", "--delta", "1", "-f", "1", "-i", "4", "-b",
		"--problem-size", "10000", "--test-skew", "1", "--timeout", "50s")
	if end := dvmtest.WaitJob(t, d.c, job, 60*time.Second); end.State == wire.JobStateDone && end.Code == 0 {
		t.Fatal("the run with a miscounting process succeeded")
	}
	lines := d.out.Lines(job)
	found := false
	for _, l := range lines {
		found = found || (l.Stream == wire.StreamStderr && strings.Contains(string(l.Line), "the work result is"))
	}
	if !found {
		t.Errorf("no process reported the changed work result; output: %v", lines)
	}
}
