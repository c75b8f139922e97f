// Package csynthetic_test runs examples/c-synthetic, the synthetic
// benchmark in C on libdynrt, on a real DVM: grown and shrunk by itself,
// by a tool (what dynrc add/sub/replace send), and after the loss of a
// process.
package csynthetic_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/examples/synthetic/report"
	"github.com/dynrt/dynrt/internal/dvmtest"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

var progs = &dvmtest.Programs{Race: dvmtest.Race}

func TestMain(m *testing.M) { dvmtest.Main(m, progs) }

// goWork is the Go benchmark's count (examples/synthetic/work.go), written
// again here: the C program's result must equal it exactly.
func goWork(problem int64) int64 {
	dt := 4.5 / float64(problem)
	vx, vy := 25*math.Cos(math.Pi/3), 25*math.Sin(math.Pi/3)
	var n int64
	for i := int64(0); i < problem; i++ {
		t := float64(i) * dt
		x, y := vx*t, vy*t-9.81/2*t*t+1.5
		if x > 12 && x < 40 && y > 8 && y < 30 {
			n++
		}
	}
	return n
}

type cdvm struct {
	t   *testing.T
	d   *dvmtest.DVM
	c   *tool.Client
	out *dvmtest.Output
	exe string
}

func start(t *testing.T, nodes, slots int) *cdvm {
	dir := progs.BuildC(t)
	d := dvmtest.Start(t, dvmtest.Options{Nodes: nodes, Slots: slots})
	c := d.Attach(t)
	return &cdvm{t: t, d: d, c: c, out: dvmtest.CollectOutput(c), exe: filepath.Join(dir, "c-synthetic")}
}

func (d *cdvm) launch(n int, onFailure string, args ...string) string {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := d.c.Launch(ctx, wire.JobLaunchReq{
		Argv: append([]string{d.exe}, args...), N: uint32(n), Env: d.d.Env, OnFailure: onFailure,
		Output: wire.OutputFlags{Forward: true},
	})
	if err != nil {
		d.t.Fatalf("launch %v: %v", args, err)
	}
	return rep.Job
}

// output splits a job's output into rank 0's stdout and every stderr line.
func (d *cdvm) output(job string) (root, errs string) {
	var r, e strings.Builder
	for _, l := range d.out.Lines(job) {
		switch {
		case l.Stream == wire.StreamStderr:
			fmt.Fprintf(&e, "rank %d: %s\n", l.Rank, l.Line)
		case l.Rank == 0:
			r.Write(l.Line)
			r.WriteByte('\n')
		}
	}
	return r.String(), e.String()
}

// run waits for the job's successful end and reads rank 0's lines back.
func (d *cdvm) run(job string) report.Run {
	d.t.Helper()
	end := dvmtest.WaitJob(d.t, d.c, job, 90*time.Second)
	root, errs := d.output(job)
	if end.State != wire.JobStateDone || end.Code != 0 {
		d.t.Fatalf("job %s ended %s with code %d: %s\nstderr:\n%s\nrank 0:\n%s", job, end.State, end.Code, end.Msg, errs, root)
	}
	run, err := report.Read(strings.NewReader(root))
	if err != nil || run.End == nil {
		d.t.Fatalf("read the lines: %v\n%s", err, root)
	}
	return run
}

// check: every iteration counted the Go benchmark's result, and the
// processes of each iteration follow from the start and the changes that
// ended before it, which must be want (type and size, in order).
func check(t *testing.T, run report.Run, problem int64, start int, want []string) {
	t.Helper()
	count := goWork(problem)
	if run.End.Count != count {
		t.Errorf("end line: work result %d, the Go benchmark counts %d", run.End.Count, count)
	}
	procs := start
	var got []string
	for i, it := range run.Iters {
		if it.Iter != i || it.Count != count || it.Procs != procs {
			t.Errorf("iteration line %d: iteration %d with %d processes counted %d; want %d with %d processes, count %d",
				i, it.Iter, it.Procs, it.Count, i, procs, count)
		}
		if it.Delta != "" && it.RCStatus == wire.RCFinalized {
			got = append(got, fmt.Sprintf("%s %d", it.RCType, it.RCN))
			switch it.RCType {
			case wire.RCAdd:
				procs += it.RCN
			case wire.RCSub:
				procs -= it.RCN
			}
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("changes %v, want %v", got, want)
	}
	if run.End.FinalProcs != procs {
		t.Errorf("end line: %d processes, the iterations say %d", run.End.FinalProcs, procs)
	}
	if len(run.Changes) != len(want) {
		t.Fatalf("%d change lines, want %d", len(run.Changes), len(want))
	}
	for _, c := range run.Changes {
		if c.Status != wire.RCFinalized || c.AnnouncedMS <= 0 || c.FinalizedMS < c.AnnouncedMS || c.Phase2MS <= 0 || c.Phase3MS <= 0 {
			t.Errorf("change %s: not FINALIZED or step times missing: %+v", c.Delta, c)
		}
	}
}

// TestAppTrigger: the program grows and shrinks itself (rank 0 asks for
// the changes, thesis §8.1.1), with the non-blocking and the blocking
// accept.
func TestAppTrigger(t *testing.T) {
	d := start(t, 2, 3)
	const problem = 200000
	for _, tc := range []struct {
		name        string
		start       int
		args        []string
		changes     []string
		final       int
		blockingArg bool
	}{
		{"grow", 2, []string{"--limit", "4", "--delta", "1"}, []string{"ADD 1", "ADD 1"}, 4, false},
		{"grow-blocking", 2, []string{"--limit", "5", "--delta", "3"}, []string{"ADD 3"}, 5, true},
		{"shrink", 4, []string{"--limit", "1", "--delta", "2"}, []string{"SUB 2", "SUB 1"}, 1, false},
		// -f 1 and removed processes that take 300 ms to leave: the next
		// request comes while the last SUB is still in flight; it is
		// queued (answered NULL at once) and must not be asked for again
		// before it is announced.
		{"shrink-linger", 4, []string{"--limit", "1", "--delta", "1", "-f", "1", "--test-linger", "300"}, []string{"SUB 1", "SUB 1", "SUB 1"}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-i", "8", "-f", "3", "--start", fmt.Sprint(tc.start), "--problem-size", fmt.Sprint(problem)}, tc.args...)
			if tc.blockingArg {
				args = append(args, "-b")
			}
			job := d.launch(tc.start, "", args...)
			run := d.run(job)
			check(t, run, problem, tc.start, tc.changes)
			// Rank 0 asked for each change once (the end line's requests).
			root, _ := d.output(job)
			if want := fmt.Sprintf(`"requests":%d}`, len(tc.changes)); !strings.Contains(root, want) {
				t.Errorf("end line without %s:\n%s", want, root)
			}
			if run.End.FinalProcs != tc.final {
				t.Errorf("ended with %d processes, want %d", run.End.FinalProcs, tc.final)
			}
		})
	}
}

// TestExternal: the changes come from a tool (the requests dynrc add, sub
// and replace send) while the program runs with --trigger external.
func TestExternal(t *testing.T) {
	d := start(t, 2, 3)
	const problem = 100000
	job := d.launch(3, "", "--trigger", "external", "--changes", "3", "-i", "4", "--problem-size", fmt.Sprint(problem))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, req := range []wire.RCRequest{
		{Type: wire.RCAdd, N: 2},
		{Type: wire.RCSub, N: 1},
		{Type: wire.RCReplace, Ranks: wire.RangesOf([]uint32{1})},
	} {
		req.Job, req.Wait, req.Requester, req.RequesterID = job, true, wire.ByTool, "test"
		rec, err := d.c.RequestRC(ctx, req)
		if err != nil || rec.Status != wire.RCFinalized {
			root, errs := d.output(job)
			t.Fatalf("%s: %s %v\nstderr:\n%s\nrank 0:\n%s", req.Type, rec.Status, err, errs, root)
		}
	}
	run := d.run(job)
	check(t, run, problem, 3, []string{"ADD 2", "SUB 1", "REPLACE 1"})
	if run.End.FinalProcs != 4 {
		t.Errorf("ended with %d processes, want 4", run.End.FinalProcs)
	}
}

// TestWrongResult: new processes that add one to their count (--test-skew)
// must fail the run: the check is real.
func TestWrongResult(t *testing.T) {
	d := start(t, 1, 3)
	job := d.launch(2, "", "-i", "6", "-f", "2", "--limit", "3", "--delta", "1", "--problem-size", "50000", "--test-skew", "1")
	end := dvmtest.WaitJob(t, d.c, job, 60*time.Second)
	_, errs := d.output(job)
	if end.Code != 1 || !strings.Contains(errs, "work result") {
		t.Errorf("job ended %s with code %d, want 1 and a wrong work result reported; stderr:\n%s", end.State, end.Code, errs)
	}
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s was not created", path)
}

// TestLoss: under --on-failure shrink, a process killed with SIGKILL
// becomes a failure SUB: the survivors accept it and go on with the
// result still exact. A lost root ends the run with status 3 and a
// report.
func TestLoss(t *testing.T) {
	d := start(t, 2, 2)
	const problem = 100000
	for _, tc := range []struct {
		name  string
		kill  uint32
		code  int
		stder string
	}{
		{"member", 2, 0, "recovered from the loss of 1 rank"},
		{"root", 0, 3, "the root (rank 0) was lost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hold := t.TempDir()
			job := d.launch(4, wire.OnFailureShrink, "-i", "12", "--problem-size", fmt.Sprint(problem), "--test-hold", hold)
			// Every process waits at iteration 3 until the file go exists.
			for r := 0; r < 4; r++ {
				waitFile(t, filepath.Join(hold, fmt.Sprint(r)))
			}
			procs := dvmtest.RunningProcs(t, d.c, job, 4)
			if err := syscall.Kill(procs[tc.kill].PID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(hold, "go"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			end := dvmtest.WaitJob(t, d.c, job, 60*time.Second)
			root, errs := d.output(job)
			if end.Code != tc.code || !strings.Contains(errs, tc.stder) {
				t.Fatalf("job ended %s with code %d (%s), want code %d and %q on stderr; stderr:\n%s\nrank 0:\n%s",
					end.State, end.Code, end.Msg, tc.code, tc.stder, errs, root)
			}
			if tc.code != 0 {
				return
			}
			run, err := report.Read(strings.NewReader(root))
			if err != nil || run.End == nil {
				t.Fatalf("read the lines: %v\n%s", err, root)
			}
			count := goWork(problem)
			for _, it := range run.Iters {
				if it.Count != count {
					t.Errorf("iteration %d with %d processes counted %d, want %d", it.Iter, it.Procs, it.Count, count)
				}
			}
			if n := len(run.Iters); n != 12 || run.Iters[2].Procs != 4 || run.Iters[3].Procs != 3 || run.End.FinalProcs != 3 {
				t.Errorf("iterations: %+v, want 12, the 4th and later with 3 processes", run.Iters)
			}
		})
	}
}
