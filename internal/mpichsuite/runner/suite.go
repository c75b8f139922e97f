package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dynrt/dynrt/internal/mpichsuite"
)

// Config is one suite run.
type Config struct {
	SrcDir  string // test/mpi of MPICH's sources
	Cache   string // holds tests-<build> (the configured test programs)
	Dynrun  string // the dynrun binary
	Builds  []Build
	Dirs    []string // directories of test/mpi
	Lists   []string // testlist files per directory (default: testlist)
	Subset  []string // if set, only these tests ("dir/name", see mpichsuite.Select)
	Runners []mpichsuite.Runner
	Ceiling time.Duration // if set, no test's limit is longer
	// AfterHydraLimit, if set, is the limit of the dynrun runners for a
	// test whose Hydra run lasted until its limit: the suite compares
	// tests Hydra passes, and a test Hydra cannot finish on this machine
	// (4–10 busy-polling ranks on 2 cores) would otherwise cost its full
	// limit once per runner. The result's reason says so.
	AfterHydraLimit time.Duration
	// Done holds results of an earlier, interrupted run (mpichsuite.Key):
	// those runs are not repeated; their results are returned as they are.
	Done     map[string]mpichsuite.Result
	Jobs     int    // make -j
	WorkDir  string // for the warm DVM's directory (default os.TempDir)
	Log      *slog.Logger
	Progress func(mpichsuite.Result) // called after each run, if set
}

// TestDir is where build b's test programs are configured and built.
func (c Config) TestDir(b Build) string { return filepath.Join(c.Cache, "tests-"+b.Name) }

// Prepare configures and builds the test programs of every build and
// returns the tests to run per build.
func (c Config) Prepare(ctx context.Context) (map[string][]mpichsuite.Test, error) {
	out := map[string][]mpichsuite.Test{}
	for _, b := range c.Builds {
		td := c.TestDir(b)
		if err := Configure(ctx, c.Log, b, c.SrcDir, td); err != nil {
			return nil, err
		}
		tests, directives, err := Collect(c.SrcDir, td, c.Dirs, c.lists())
		if err != nil {
			return nil, err
		}
		if len(c.Subset) > 0 {
			if tests, err = mpichsuite.Select(tests, c.Subset); err != nil {
				return nil, err
			}
		}
		if err := Make(ctx, c.Log, b, td, tests, directives, c.Jobs); err != nil {
			return nil, err
		}
		out[b.Name] = tests
	}
	return out, nil
}

func (c Config) lists() []string {
	if len(c.Lists) == 0 {
		return []string{"testlist"}
	}
	return c.Lists
}

// Run runs every test of every build under every runner, one at a time,
// and returns the results in run order. A runner that cannot start (the
// warm DVM) fails the whole run.
func (c Config) Run(ctx context.Context, tests map[string][]mpichsuite.Test) ([]mpichsuite.Result, error) {
	var results []mpichsuite.Result
	for _, b := range c.Builds {
		var dvms shared
		if !c.pending(b, tests[b.Name]) {
			rs, err := c.runBuild(ctx, b, tests[b.Name], &dvms) // all recorded: no DVM needed
			results = append(results, rs...)
			if err != nil {
				return results, err
			}
			continue
		}
		if slices.Contains(c.Runners, mpichsuite.DynrunWarm) {
			w, err := StartWarm(ctx, c.Dynrun, c.workDir(), mpichsuite.WarmSlots(tests[b.Name]), b.environ())
			if err != nil {
				return results, err
			}
			dvms.warm = w
		}
		if slices.Contains(c.Runners, mpichsuite.DynrunHosts) {
			h, err := StartHosts(ctx, c.log(), c.Dynrun, mpichsuite.HostSlots(tests[b.Name]), b.environ())
			if err != nil {
				dvms.stop(ctx)
				return results, err
			}
			dvms.hosts = h
		}
		rs, err := c.runBuild(ctx, b, tests[b.Name], &dvms)
		results = append(results, rs...)
		if serr := dvms.stop(ctx); serr != nil && err == nil {
			err = serr
		}
		if err != nil {
			return results, err
		}
	}
	return results, nil
}

// shared holds the DVMs that the runners dynrun-warm and dynrun-hosts
// start once per build.
type shared struct {
	warm  *WarmDVM
	hosts *HostsDVM
}

func (s *shared) stop(ctx context.Context) error {
	var errs []error
	if s.warm != nil {
		errs = append(errs, s.warm.Stop(context.WithoutCancel(ctx)))
	}
	if s.hosts != nil {
		errs = append(errs, s.hosts.Stop(context.WithoutCancel(ctx)))
	}
	return errors.Join(errs...)
}

func (c Config) log() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

func (c Config) workDir() string {
	if c.WorkDir != "" {
		return c.WorkDir
	}
	return os.TempDir()
}

// pending reports whether a run of build b is not in c.Done.
func (c Config) pending(b Build, tests []mpichsuite.Test) bool {
	for _, t := range tests {
		for _, rn := range c.Runners {
			if _, ok := c.Done[mpichsuite.Key(b.Name, t, rn)]; !ok {
				return true
			}
		}
	}
	return false
}

func (c Config) runBuild(ctx context.Context, b Build, tests []mpichsuite.Test, dvms *shared) ([]mpichsuite.Result, error) {
	var results []mpichsuite.Result
	td := c.TestDir(b)
	progRoot := td
	for _, t := range tests {
		missing := Missing(td, t)
		hydraAtLimit := false
		for _, rn := range c.Runners {
			if ctx.Err() != nil {
				return results, ctx.Err()
			}
			if old, ok := c.Done[mpichsuite.Key(b.Name, t, rn)]; ok {
				hydraAtLimit = hydraAtLimit || (rn == mpichsuite.Hydra && old.Verdict.RanIntoLimit())
				results = append(results, old)
				continue
			}
			res := mpichsuite.Result{Build: b.Name, Test: t, Runner: rn}
			limit := mpichsuite.Limit(t, mpichsuite.DefaultLimit, c.Ceiling)
			cut := rn != mpichsuite.Hydra && hydraAtLimit && c.AfterHydraLimit > 0 && c.AfterHydraLimit < limit
			if cut {
				limit = c.AfterHydraLimit
			}
			var run mpichsuite.Run
			switch {
			case missing != "":
				run.NotRun = missing
			default:
				var err error
				run, res.Elapsed, err = c.runOne(ctx, b, t, rn, dvms, progRoot, limit)
				if err != nil {
					return results, err
				}
				if ctx.Err() != nil { // cut short: not a result (a resumed run repeats it)
					return results, ctx.Err()
				}
			}
			res.Verdict = mpichsuite.Judge(t, run)
			if cut {
				res.Verdict.Reason = strings.TrimSpace(fmt.Sprintf("%s [limit %v: Hydra ran into its limit]", res.Verdict.Reason, limit))
			}
			hydraAtLimit = hydraAtLimit || (rn == mpichsuite.Hydra && res.Verdict.RanIntoLimit())
			results = append(results, res)
			if c.Progress != nil {
				c.Progress(res)
			}
		}
	}
	return results, nil
}

func (c Config) runOne(ctx context.Context, b Build, t mpichsuite.Test, rn mpichsuite.Runner, dvms *shared, progRoot string, limit time.Duration) (mpichsuite.Run, time.Duration, error) {
	bin, dvmID := b.Mpiexec, ""
	env := b.environ()
	var dvmProcs map[int]bool
	var wrap []string
	dvmExe := ""
	if rn != mpichsuite.Hydra {
		bin = c.Dynrun
	}
	switch rn {
	case mpichsuite.DynrunWarm:
		dvmID, env, dvmProcs, dvmExe = dvms.warm.ID, dvms.warm.env, dvms.warm.procs, dvms.warm.exe
	case mpichsuite.DynrunHosts:
		h := dvms.hosts
		dvmID, env, dvmProcs, dvmExe, wrap = h.ID, h.env, h.procs, h.exe, h.wrap
	}
	l, err := mpichsuite.Command(rn, t, bin, dvmID)
	if err != nil {
		return mpichsuite.Run{NotRun: err.Error()}, 0, nil
	}
	e := exec1{
		argv:     append(slices.Clone(wrap), l.Argv...),
		dir:      filepath.Join(c.TestDir(b), t.Dir, path.Dir(t.Name)),
		env:      append(slices.Clone(env), l.Env...),
		limit:    limit,
		backstop: Backstop,
		mark:     randomHex(8),
		progRoot: progRoot,
		dvm:      dvmProcs,
		dvmExe:   dvmExe,
	}
	run, elapsed := e.run(ctx)
	// A test that broke its DVM fails, and the rest needs a new one.
	switch {
	case rn == mpichsuite.DynrunWarm && !dvms.warm.Alive():
		run.Harm = "the warm DVM lost a process during this test (restarted): " + strings.Join(dvms.warm.Lost(), ", ")
		if err := dvms.warm.restart(ctx); err != nil {
			return run, elapsed, fmt.Errorf("restart the warm DVM after %s: %w", t.ID(), err)
		}
	case rn == mpichsuite.DynrunHosts && !dvms.hosts.Alive():
		run.Harm = "the DVM over the hosts lost a process during this test (restarted): " + strings.Join(dvms.hosts.Lost(), ", ")
		if err := dvms.hosts.restart(ctx); err != nil {
			return run, elapsed, fmt.Errorf("restart the DVM over the hosts after %s: %w", t.ID(), err)
		}
	}
	return run, elapsed, nil
}
