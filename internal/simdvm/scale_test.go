package simdvm

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/dvmtest"
	"github.com/dynrt/dynrt/lib/simnode"
	"github.com/dynrt/dynrt/wire"
)

// TestScale256 runs a DVM of 256 simulated nodes (issue 16's short scale
// test): a job with a process on every node starts and is killed, and a
// malleable job grows and shrinks until FINALIZED. The malleable job has
// one process per node, and changes by as many; under the race detector
// (about ten times slower, with a limit of 8,128 goroutines) it has 32
// processes on 32 of the nodes, a change that touches few of the DVM's
// nodes. scripts/bench-scale.sh runs the large sizes.
func TestScale256(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 256 simulated nodes")
	}
	nodes, slots := 256, 3
	if v, err := strconv.Atoi(os.Getenv("SIMDVM_NODES")); err == nil { // by hand: other sizes
		nodes = v
	}
	mall := nodes
	if dvmtest.Race {
		mall = 32
	}
	t0 := time.Now()
	d, c := start(t, nodes, slots)
	t.Logf("DVM of %d nodes up in %v", nodes, time.Since(t0))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t0 = time.Now()
	idle := launch(t, c, wire.JobLaunchReq{Argv: []string{simnode.Idle}, N: uint32(nodes), MapBy: wire.MapByNode, PMI: wire.PMINone})
	t.Logf("launch of %d processes: %v", nodes, time.Since(t0))
	if got := d.Running(); got != nodes {
		t.Fatalf("%d processes run, want %d", got, nodes)
	}

	// The malleable processes print only their errors.
	c.OnOutput(func(l wire.OutputLine) { t.Logf("%s rank %d: %s", l.Job, l.Rank, l.Line) })
	job := launch(t, c, wire.JobLaunchReq{Argv: []string{simnode.Malleable}, N: uint32(mall), MapBy: wire.MapByNode, PMI: wire.PMINone, Output: wire.OutputFlags{Forward: true}})
	for _, step := range []struct {
		typ  string
		size int
	}{{wire.RCAdd, 2 * mall}, {wire.RCSub, mall}} {
		t0 = time.Now()
		cpu0 := cpuTime()
		rc, err := c.RequestRC(ctx, wire.RCRequest{Job: job.Job, Type: step.typ, N: uint32(mall), Wait: true})
		if err != nil {
			t.Fatalf("%s %d: %v", step.typ, mall, err)
		}
		if rc.Status != wire.RCFinalized {
			t.Fatalf("%s %d: %s, want FINALIZED", step.typ, mall, rc.Status)
		}
		t.Logf("%s of %d processes until FINALIZED: %v, CPU %v (%s)", step.typ, mall, time.Since(t0), cpuTime()-cpu0, steps(rc.Times))
		info, err := c.Job(ctx, wire.JobStateReq{Job: job.Job})
		if err != nil {
			t.Fatal(err)
		}
		if int(info.Size) != step.size {
			t.Errorf("after %s: job size %d, want %d", step.typ, info.Size, step.size)
		}
	}
	if got, want := d.Running(), nodes+mall; got != want {
		t.Errorf("%d processes run, want %d", got, want)
	}
	for _, j := range []string{idle.Job, job.Job} {
		if err := c.KillJob(ctx, j, 0, time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := c.WaitJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	if n := d.Running(); n != 0 {
		t.Errorf("%d processes run after the kills", n)
	}
}

// steps spells the step times of a change, in ms from its request.
func steps(ts wire.RCTimes) string {
	out := ""
	for _, s := range []struct {
		name string
		t    int64
	}{{"placed", ts.Placed}, {"defined", ts.Defined}, {"jobdata", ts.JobData}, {"announced", ts.Announced}, {"launched", ts.Launched},
		{"started", ts.Started}, {"accepted", ts.Accepted}, {"confirmed", ts.Confirmed}, {"finalized", ts.Finalized}, {"exited", ts.Exited}} {
		if s.t != 0 {
			out += fmt.Sprintf(" %s %.1f", s.name, float64(s.t-ts.Requested)/1e6)
		}
	}
	return out
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
