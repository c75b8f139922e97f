package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/examples/synthetic/report"
	"github.com/dynrt/dynrt/internal/dvmtest"
	"github.com/dynrt/dynrt/wire"
)

// TestSurviveFailures: the benchmark, 8 processes on 4 virtual nodes × 3
// slots, survives kill -9 of a rank, of rank 0 (whose successor goes on
// with the report) and of a node's daemon with every rank on it, under
// dynrun --on-failure shrink (the job goes on smaller) and replace (new
// processes join in place of the lost): the job ends with status 0,
// every iteration is reported once, in order, with the same work result
// (the iteration the loss interrupted is done again), and the report holds
// the failure change.
func TestSurviveFailures(t *testing.T) {
	d := startDVM(t, 4, 3)
	const problem = 2_000_000
	count := work(problem, 0, problem)
	// The node kills come last: each takes a node out of the DVM.
	tests := []struct {
		name   string
		policy string
		rank   uint32 // killed, or
		nodeOf bool   // the daemon of its node killed
		second uint32 // killed 40 ms later (0: none): during the recovery, or folded into its change
	}{
		{"shrink: kill -9 of rank 3", wire.OnFailureShrink, 3, false, 0},
		{"shrink: kill -9 of rank 0", wire.OnFailureShrink, 0, false, 0},
		{"replace: kill -9 of rank 3", wire.OnFailureReplace, 3, false, 0},
		{"shrink: a loss during the recovery", wire.OnFailureShrink, 3, false, 6},
		{"replace: kill -9 of a node's daemon", wire.OnFailureReplace, 4, true, 0},
		{"shrink: kill -9 of a node's daemon", wire.OnFailureShrink, 4, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			iters := "30" // then on until the failure change has ended
			if tc.second != 0 {
				// Far beyond the second kill (iterations take ms), so
				// the job cannot have ended before it.
				iters = "600"
			}
			job := d.launchPolicy(t, tc.policy, 8, "--trigger", "external", "--changes", "1", "-i", iters, "--tables=false",
				"--problem-size", fmt.Sprint(problem), "--timeout", "80s")
			procs := dvmtest.RunningProcs(t, d.c, job, 8)
			d.intoIterations(t, job)
			lost := 1
			if tc.nodeOf {
				node := procs[tc.rank].Node
				lost = 0
				for _, p := range procs {
					if p.Node == node {
						lost++
					}
				}
				kill(t, dvmtest.DaemonPID(t, d.c, node))
			} else {
				kill(t, procs[tc.rank].PID)
			}
			if tc.second != 0 {
				time.Sleep(40 * time.Millisecond)
				kill(t, procs[tc.second].PID)
				lost++
			}
			final, typ := 8-lost, wire.RCSub
			if tc.policy == wire.OnFailureReplace {
				final, typ = 8, wire.RCReplace
			}
			run := d.survived(t, job, count)
			if run.End.Count != count || run.End.FinalProcs != final || run.End.Iters != len(run.Iters) {
				t.Errorf("end line %+v: want count %d, %d processes, %d iterations", *run.End, count, final, len(run.Iters))
			}
			// One failure change, or (a loss during the recovery of
			// another) two, whose sizes follow on.
			n, from := 0, 8
			for _, c := range run.Changes {
				n += c.N
				if c.Type != typ || c.Status != wire.RCFinalized || c.Requester != wire.ByRuntime || c.From != from {
					t.Errorf("failure change %+v: want a FINALIZED %s by the runtime from %d processes", c, typ, from)
				}
				from = c.To
			}
			if len(run.Changes) == 0 || n != lost || from != final {
				t.Errorf("changes %+v: want failure changes of %d processes in all, 8 → %d", run.Changes, lost, final)
			}
		})
	}
}

// TestLossAtTheEnd: a rank lost after rank 0 has told everyone to stop,
// before they have left, is recovered from like any other loss: the
// survivors (rank 0 included) find it in the barrier that ends the loop,
// accept the failure change and stop again, 7 of them. Without that
// barrier rank 0 ended at once and the job failed with the loss
// unhandled.
func TestLossAtTheEnd(t *testing.T) {
	d := startDVM(t, 4, 3)
	const problem = 2_000_000
	count := work(problem, 0, problem)
	mark := t.TempDir()
	job := d.launchPolicy(t, wire.OnFailureShrink, 8, "--trigger", "external", "-i", "5", "--tables=false",
		"--problem-size", fmt.Sprint(problem), "--timeout", "80s", "--test-stop-mark", mark)
	procs := dvmtest.RunningProcs(t, d.c, job, 8)
	deadline := time.Now().Add(60 * time.Second)
	for r := range 8 {
		for {
			if _, err := os.Stat(filepath.Join(mark, fmt.Sprint(r))); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("rank %d never reached the end of its loop", r)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	kill(t, procs[6].PID)
	if err := os.WriteFile(filepath.Join(mark, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	run := d.survived(t, job, count)
	if run.End.FinalProcs != 7 || len(run.Changes) != 1 || run.Changes[0].N != 1 || run.Changes[0].Type != wire.RCSub || run.Changes[0].Requester != wire.ByRuntime {
		t.Errorf("end %+v, changes %+v: want one failure SUB of rank 6 and 7 processes at the end", *run.End, run.Changes)
	}
}

// TestSurviveHungNode: the daemon of rank 4's node is stopped (SIGSTOP)
// under --on-failure shrink and replace; its processes keep running but
// can no longer reach the runtime. The heartbeats declare the node down,
// its ranks become a failure change, and the others go on without them
// (or with new processes in their place) with the same work result.
func TestSurviveHungNode(t *testing.T) {
	for _, policy := range []string{wire.OnFailureShrink, wire.OnFailureReplace} {
		t.Run(policy, func(t *testing.T) { surviveHungNode(t, policy) })
	}
}

func surviveHungNode(t *testing.T, policy string) {
	slots := 2
	if policy == wire.OnFailureReplace {
		slots = 3 // free slots for the new processes off the hung node
	}
	d := startDVMWith(t, dvmtest.Options{Nodes: 4, Slots: slots, HeartbeatInterval: 250 * time.Millisecond, HeartbeatMisses: 8})
	const problem = 2_000_000
	count := work(problem, 0, problem)
	job := d.launchPolicy(t, policy, 8, "--trigger", "external", "--changes", "1", "-i", "30", "--tables=false",
		"--problem-size", fmt.Sprint(problem), "--timeout", "80s")
	procs := dvmtest.RunningProcs(t, d.c, job, 8)
	d.intoIterations(t, job)
	node := procs[4].Node
	lost := 0
	for _, p := range procs {
		if p.Node == node {
			lost++
		}
	}
	pid := dvmtest.DaemonPID(t, d.c, node)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Running again, it finds itself declared down, kills its processes
	// and exits; the DVM's cleanup checks that nothing is left.
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	run := d.survived(t, job, count)
	_ = syscall.Kill(pid, syscall.SIGCONT)
	final := 8 - lost
	if policy == wire.OnFailureReplace {
		final = 8
	}
	if len(run.Changes) != 1 || run.Changes[0].N != lost || run.Changes[0].Status != wire.RCFinalized || run.End.FinalProcs != final {
		t.Errorf("changes %+v, end %+v: want one FINALIZED failure change of %d processes, %d at the end", run.Changes, *run.End, lost, final)
	}
}

// survived waits for the end of job, which must be a success without
// anything on stderr, and checks that every iteration was reported once,
// in order, with the work result count.
func (d *testDVM) survived(t *testing.T, job string, count int64) report.Run {
	t.Helper()
	end := dvmtest.WaitJob(t, d.c, job, 90*time.Second)
	text, errs := d.byRank(job)
	if end.State != wire.JobStateDone || end.Code != 0 || errs != "" {
		t.Fatalf("job ended %s with code %d: %s\nstderr:\n%s\nstdout:\n%s", end.State, end.Code, end.Msg, errs, text)
	}
	run, err := report.Read(strings.NewReader(text))
	if err != nil || run.End == nil {
		t.Fatalf("read the lines: %v\n%s", err, text)
	}
	for i, it := range run.Iters {
		if it.Iter != i || it.Count != count {
			t.Errorf("line %d: iteration %d with %d processes counted %d, want iteration %d and %d", i, it.Iter, it.Procs, it.Count, i, count)
		}
	}
	return run
}

// intoIterations waits until job has reported an iteration, so that a
// kill hits the loop. A fixed sleep did not do it under load (CI: rank 0
// was killed while the first communicator was being built, which
// synthetic does not survive: docs/synthetic.md "Failures").
func (d *testDVM) intoIterations(t *testing.T, job string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		text, _ := d.byRank(job)
		if run, err := report.Read(strings.NewReader(text)); err == nil && len(run.Iters) > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("job %s reported no iteration within 30s", job)
}

func kill(t *testing.T, pid int) {
	t.Helper()
	if pid <= 0 {
		t.Fatal("no pid")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// launchPolicy starts n processes of the benchmark under the failure
// policy.
func (d *testDVM) launchPolicy(t *testing.T, policy string, n int, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := d.c.Launch(ctx, wire.JobLaunchReq{
		Argv: append([]string{progs.Build(t, "github.com/dynrt/dynrt/examples/synthetic")}, args...), N: uint32(n), Env: d.d.Env,
		Output: wire.OutputFlags{Forward: true}, OnFailure: policy,
	})
	if err != nil {
		t.Fatalf("launch %v: %v", args, err)
	}
	return rep.Job
}

// byRank returns the stdout lines of job, rank after rank (a successor of
// a lost rank 0 goes on with the report where it stopped), and stderr.
func (d *testDVM) byRank(job string) (string, string) {
	out := map[uint32]*strings.Builder{}
	var errs strings.Builder
	for _, l := range d.out.Lines(job) {
		if l.Stream == wire.StreamStderr {
			fmt.Fprintf(&errs, "rank %d: %s\n", l.Rank, l.Line)
			continue
		}
		if out[l.Rank] == nil {
			out[l.Rank] = &strings.Builder{}
		}
		out[l.Rank].Write(l.Line)
		out[l.Rank].WriteByte('\n')
	}
	var all strings.Builder
	for r := range uint32(64) {
		if b := out[r]; b != nil {
			all.WriteString(b.String())
		}
	}
	return all.String(), errs.String()
}
