package chaos

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/dvmtest"
	"github.com/dynrt/dynrt/internal/leakcheck"
	"github.com/dynrt/dynrt/wire"
)

// The programs run by the live tests, built without the race detector:
// the harness checks the runtime's invariants, not its data races (the
// packages' own tests do), and uninstrumented binaries keep the run short.
var progs = &dvmtest.Programs{}

func TestMain(m *testing.M) { dvmtest.Main(m, progs) }

// liveRun runs the harness as cfg says on a live DVM of its own (the
// programs, directory, mark and log filled in), logs the run and returns
// its summary; it skips in -short mode and fails t if the run could not
// be carried out.
func liveRun(t *testing.T, cfg Config) Summary {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a DVM and jobs")
	}
	dir := filepath.Join(t.TempDir(), "d")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	mark := leakcheck.NewMark(t)
	t.Cleanup(func() { leakcheck.WaitClean(t, dir, mark, 10*time.Second) })
	var log strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg.Dynrun = progs.Build(t, "github.com/dynrt/dynrt/cmd/dynrun")
	cfg.Malleable = progs.Build(t, "github.com/dynrt/dynrt/internal/malleable")
	cfg.Dir, cfg.Mark, cfg.StopAtViolation, cfg.Log = dir, mark, true, &log
	sum, err := Run(ctx, cfg)
	t.Logf("run:\n%s%s", log.String(), sum)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// shortFaults are the fault kinds the short run of `make test` injects:
// the ones whose invariants hold on main (every kind, since the fixes of
// issue 11 landed).
var shortFaults = AllFaults

// shortSeed is a seed whose first shortSteps steps draw every fault kind.
const shortSeed, shortSteps = 5, 40

// TestChaosShort is the fixed-seed run of `make test`: a live DVM of four
// virtual nodes (real daemons, real malleable processes), a seeded
// sequence of changes and faults, every invariant checked after every
// step, nothing left running at the end.
func TestChaosShort(t *testing.T) {
	sum := liveRun(t, Config{Seed: shortSeed, Steps: shortSteps, Faults: shortFaults, FaultRate: 0.6})
	if len(sum.Violations) > 0 {
		t.Errorf("invariants broken (replay: go run ./scripts/chaos -seed %d -steps %d -fault-rate 0.6 -faults %s):\n%s", sum.Seed, shortSteps, FaultNames(shortFaults), sum.Violations[0])
	}
	if sum.Steps != shortSteps || sum.InjectedFaults() < shortSteps/3 {
		t.Errorf("ran %d steps with %d faults, want %d steps and at least %d faults", sum.Steps, sum.InjectedFaults(), shortSteps, shortSteps/3)
	}
}

// elasticSeed, elasticSteps: a seed whose elastic steps grow the DVM 3
// times and shrink it 5 times (one drain with a SUB, refusals of a node
// that holds a whole job), with faults.
const elasticSeed, elasticSteps = 39, 30

// TestChaosElastic is TestChaosShort for a DVM that gains and loses
// nodes: the seeded steps also grow the DVM by a virtual node and shrink
// one with --drain (a SUB of each job's ranks there, accepted by the
// malleable program), among changes and faults, with every invariant
// checked after every step.
func TestChaosElastic(t *testing.T) {
	sum := liveRun(t, Config{Seed: elasticSeed, Steps: elasticSteps, Faults: AllFaults, FaultRate: 0.3, Elastic: true})
	if len(sum.Violations) > 0 {
		t.Errorf("invariants broken (replay: go run ./scripts/chaos -elastic -seed %d -steps %d -fault-rate 0.3):\n%s", sum.Seed, elasticSteps, sum.Violations[0])
	}
	if sum.Steps != elasticSteps || sum.Ops[OpGrow] < 3 || sum.Ops[OpShrink] < 3 || sum.Drained < 1 {
		t.Errorf("ran %d steps with %d grows, %d shrinks and %d drain SUBs; want %d steps, at least 3 grows and shrinks, and a drain",
			sum.Steps, sum.Ops[OpGrow], sum.Ops[OpShrink], sum.Drained, elasticSteps)
	}
}

// TestChaosShrink is TestChaosShort with every job under a failure policy
// that keeps it: --on-failure shrink (each loss — kill -9 of a member, of
// a daemon, a hung daemon declared down — becomes a failure SUB that the
// malleable program accepts) and --on-failure replace (a failure REPLACE:
// the lost ranks out, as many new processes in, which confirm). Invariant
// (g) is checked with the others after every step.
func TestChaosShrink(t *testing.T) {
	for _, policy := range []string{wire.OnFailureShrink, wire.OnFailureReplace} {
		t.Run(policy, func(t *testing.T) {
			sum := liveRun(t, Config{Seed: shortSeed, Steps: shortSteps, Faults: shortFaults, FaultRate: 0.6, Policy: policy})
			if len(sum.Violations) > 0 {
				t.Errorf("invariants broken (replay: go run ./scripts/chaos -policy %s -seed %d -steps %d -fault-rate 0.6 -faults %s):\n%s", policy, sum.Seed, shortSteps, FaultNames(shortFaults), sum.Violations[0])
			}
			if sum.Steps != shortSteps || sum.FailureChanges[wire.RCFinalized] < 1 {
				t.Errorf("ran %d steps with failure changes %v, want %d steps and at least one FINALIZED failure change", sum.Steps, sum.FailureChanges, shortSteps)
			}
		})
	}
}
