package proc

import (
	"context"
	"testing"
)

// The guard's costs, phase by phase (docs/BENCHMARKS.md, "Cost of the
// guard"): what a private `dynrun -n 1` pays once and a warm launch per job.

// BenchmarkGuardStartClose starts a guard and closes it with nothing
// started under it: the re-exec, the cgroup subtree and the final sweep.
func BenchmarkGuardStartClose(b *testing.B) {
	for b.Loop() {
		g, err := StartGuard()
		if err != nil {
			b.Fatal(err)
		}
		if err := g.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGuardJob starts /bin/true as a one-process job under a guard,
// waits for it and ends the job (EndGroup), as a daemon does per launch.
func BenchmarkGuardJob(b *testing.B) {
	g, err := StartGuard()
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	ctx := context.Background()
	for b.Loop() {
		p, err := Start(ctx, Spec{Path: "/bin/true", Guard: g, GuardGroup: "job"})
		if err != nil {
			b.Fatal(err)
		}
		if st := p.Wait(); !st.Success() {
			b.Fatal(st)
		}
		g.EndGroup("job", "DYNRT_JOB")
	}
}

// BenchmarkGuardScan is one look through /proc for marked processes that
// finds none: the sweep's cost on a machine with this many processes.
func BenchmarkGuardScan(b *testing.B) {
	for b.Loop() {
		if n := killAllMarked(envEntry(EnvGuard, "nobody")); n != 0 {
			b.Fatal(n)
		}
	}
}

// BenchmarkGuardStart is what starting a guard costs its caller: the
// secret, the cgroup subtree and the fork and exec of the guard, which
// Start waits for.
func BenchmarkGuardStart(b *testing.B) {
	var gs []*Guard
	for b.Loop() {
		g, err := StartGuard()
		if err != nil {
			b.Fatal(err)
		}
		gs = append(gs, g)
	}
	b.StopTimer()
	for _, g := range gs {
		g.Close()
	}
}
