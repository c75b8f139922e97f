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
)

// The programs run by the live tests, built without the race detector:
// the harness checks the runtime's invariants, not its data races (the
// packages' own tests do), and uninstrumented binaries keep the run short.
var progs = &dvmtest.Programs{}

func TestMain(m *testing.M) { dvmtest.Main(m, progs) }

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
	sum, err := Run(ctx, Config{
		Dynrun: progs.Build(t, "github.com/dynrt/dynrt/cmd/dynrun"), Malleable: progs.Build(t, "github.com/dynrt/dynrt/internal/malleable"),
		Dir: dir, Mark: mark, Seed: shortSeed, Steps: shortSteps, Faults: shortFaults, FaultRate: 0.6,
		StopAtViolation: true, Log: &log,
	})
	t.Logf("run:\n%s%s", log.String(), sum)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Violations) > 0 {
		t.Errorf("invariants broken (replay: go run ./scripts/chaos -seed %d -steps %d -fault-rate 0.6 -faults %s):\n%s", sum.Seed, shortSteps, FaultNames(shortFaults), sum.Violations[0])
	}
	if sum.Steps != shortSteps || sum.InjectedFaults() < shortSteps/3 {
		t.Errorf("ran %d steps with %d faults, want %d steps and at least %d faults", sum.Steps, sum.InjectedFaults(), shortSteps, shortSteps/3)
	}
}
