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
	// Done holds results of an earlier, interrupted run (mpichsuite.Key,
	// by try): those runs are not repeated; their results are returned
	// as they are. Rechecks follow the same order again, so a resumed
	// run takes its recorded tries where they come.
	Done map[string]mpichsuite.Result
	// Recheck: when a dynrun runner's first try disagrees with its
	// reference's, the pair runs again, alternating, up to Recheck more
	// times each (mpichsuite.Recheck).
	Recheck int
	// HostsPrefix starts the names of the hosts' namespaces (default
	// HostsPrefix): runs at the same time need their own.
	HostsPrefix string
	Jobs        int    // make -j
	WorkDir     string // for the warm DVM's directory (default os.TempDir)
	Log         *slog.Logger
	Progress    func(mpichsuite.Result) // called after each run, if set
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
// and returns the results in run order. The runners run in table order
// (mpichsuite.Runners), so that a test's references run before the dynrun
// runners compared with them. A runner that cannot start (the warm DVM,
// the hosts) fails the whole run.
func (c Config) Run(ctx context.Context, tests map[string][]mpichsuite.Test) ([]mpichsuite.Result, error) {
	c.Runners = mpichsuite.Sorted(c.Runners)
	var results []mpichsuite.Result
	for _, b := range c.Builds {
		dvms := &shared{c: c, b: b, tests: tests[b.Name]}
		rs, err := c.runBuild(ctx, b, tests[b.Name], dvms)
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

// shared holds what runners share between the tests of a build: the warm
// DVM of dynrun-warm, the hosts of hydra-hosts and dynrun-hosts (with the
// DVM of dynrun-hosts when it runs). Each is started when first needed, so
// that a resumed run whose runs are all recorded starts nothing.
type shared struct {
	c     Config
	b     Build
	tests []mpichsuite.Test
	warm  *WarmDVM
	hosts *Hosts
}

func (s *shared) warmDVM(ctx context.Context) (*WarmDVM, error) {
	if s.warm == nil {
		w, err := StartWarm(ctx, s.c.Dynrun, s.c.workDir(), mpichsuite.WarmSlots(s.tests), s.b.environ())
		if err != nil {
			return nil, err
		}
		s.warm = w
	}
	return s.warm, nil
}

// hostsFor returns the build's hosts, with the DVM when dynrun-hosts is
// among the runners (one cluster for both hosts runners).
func (s *shared) hostsFor(ctx context.Context) (*Hosts, error) {
	if s.hosts == nil {
		cfg := HostsConfig{Prefix: s.c.HostsPrefix, Slots: mpichsuite.HostSlots(s.tests), Env: s.b.environ()}
		if slices.Contains(s.c.Runners, mpichsuite.DynrunHosts) {
			cfg.Dynrun = s.c.Dynrun
		}
		h, err := StartHosts(ctx, s.c.log(), cfg)
		if err != nil {
			return nil, err
		}
		s.hosts = h
	}
	return s.hosts, nil
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

func (c Config) runBuild(ctx context.Context, b Build, tests []mpichsuite.Test, dvms *shared) ([]mpichsuite.Result, error) {
	var results []mpichsuite.Result
	have := func(r mpichsuite.Runner) bool { return slices.Contains(c.Runners, r) }
	for _, t := range tests {
		tr := testRun{c: c, b: b, t: t, dvms: dvms, missing: Missing(c.TestDir(b), t),
			atLimit: map[mpichsuite.Runner]bool{}, tries: map[mpichsuite.Runner][]mpichsuite.Result{}}
		for _, rn := range c.Runners {
			res, err := tr.try(ctx, rn)
			if err != nil {
				return results, err
			}
			tr.atLimit[rn] = res.Verdict.RanIntoLimit()
			results = append(results, res)
		}
		// A dynrun runner whose first try disagrees with its
		// reference's runs again with it, alternating (Recheck).
		for _, rn := range c.Runners {
			ref := rn.Reference(have)
			if ref == rn || !have(ref) {
				continue
			}
			for {
				p := mpichsuite.Pair{Build: b.Name, Test: t, Runner: rn, Ref: ref, Tries: tr.tries[rn], RefTries: tr.tries[ref]}
				isRef, ok := mpichsuite.Recheck(p, c.Recheck)
				if !ok {
					break
				}
				side := rn
				if isRef {
					side = ref
				}
				res, err := tr.try(ctx, side)
				if err != nil {
					return results, err
				}
				results = append(results, res)
			}
		}
	}
	return results, nil
}

// testRun is one test of one build under the runners, with its tries.
type testRun struct {
	c       Config
	b       Build
	t       mpichsuite.Test
	dvms    *shared
	missing string // why its program is missing, if it is
	// atLimit: the runners whose first try ran into the limit.
	atLimit map[mpichsuite.Runner]bool
	tries   map[mpichsuite.Runner][]mpichsuite.Result
}

// try runs the test's next try under rn, or takes it from c.Done.
func (tr *testRun) try(ctx context.Context, rn mpichsuite.Runner) (mpichsuite.Result, error) {
	c, b, t := tr.c, tr.b, tr.t
	n := len(tr.tries[rn]) + 1
	if ctx.Err() != nil {
		return mpichsuite.Result{}, ctx.Err()
	}
	if old, ok := c.Done[mpichsuite.Key(b.Name, t, rn, n)]; ok {
		tr.tries[rn] = append(tr.tries[rn], old)
		return old, nil
	}
	res := mpichsuite.Result{Build: b.Name, Test: t, Runner: rn, Try: n}
	limit := mpichsuite.Limit(t, mpichsuite.DefaultLimit, c.Ceiling)
	// Every runner but Hydra is cut when Hydra's first try ran into its
	// limit, a dynrun runner also when its own reference's did.
	ref := rn.Reference(func(r mpichsuite.Runner) bool { return slices.Contains(c.Runners, r) })
	why := ""
	switch {
	case rn != mpichsuite.Hydra && tr.atLimit[mpichsuite.Hydra]:
		why = "Hydra"
	case ref != rn && tr.atLimit[ref]:
		why = string(ref)
	}
	cut := why != "" && c.AfterHydraLimit > 0 && c.AfterHydraLimit < limit
	if cut {
		limit = c.AfterHydraLimit
	}
	var run mpichsuite.Run
	switch {
	case tr.missing != "":
		run.NotRun = tr.missing
	default:
		var err error
		run, res.Elapsed, err = c.runOne(ctx, b, t, rn, tr.dvms, c.TestDir(b), limit)
		if err != nil {
			return res, err
		}
		if ctx.Err() != nil { // cut short: not a result (a resumed run repeats it)
			return res, ctx.Err()
		}
	}
	res.Verdict = mpichsuite.Judge(t, run)
	if cut {
		res.Verdict.Reason = strings.TrimSpace(fmt.Sprintf("%s [limit %v: %s ran into its limit]", res.Verdict.Reason, limit, why))
	}
	tr.tries[rn] = append(tr.tries[rn], res)
	if c.Progress != nil {
		c.Progress(res)
	}
	return res, nil
}

func (c Config) runOne(ctx context.Context, b Build, t mpichsuite.Test, rn mpichsuite.Runner, dvms *shared, progRoot string, limit time.Duration) (mpichsuite.Run, time.Duration, error) {
	bin := b.Mpiexec
	if rn.Dynrun() {
		bin = c.Dynrun
	}
	e := exec1{
		dir:      filepath.Join(c.TestDir(b), t.Dir, path.Dir(t.Name)),
		env:      b.environ(),
		limit:    limit,
		backstop: Backstop,
		mark:     randomHex(8),
		progRoot: progRoot,
	}
	var at mpichsuite.Place
	var hosts *Hosts
	switch rn {
	case mpichsuite.DynrunWarm:
		w, err := dvms.warmDVM(ctx)
		if err != nil {
			return mpichsuite.Run{}, 0, err
		}
		at.DVM, e.env, e.dvm, e.dvmExe = w.ID, w.env, w.procs, w.exe
	case mpichsuite.HydraHosts, mpichsuite.DynrunHosts:
		h, err := dvms.hostsFor(ctx)
		if err != nil {
			return mpichsuite.Run{}, 0, err
		}
		hosts = h
		at = mpichsuite.Place{DVM: h.ID, LauncherExec: h.sshExec, Hosts: h.hosts}
		e.env, e.dvm, e.dvmExe, e.netns = h.env, h.procs, h.exe, h.netns
		e.argv = slices.Clone(h.wrap)
	}
	l, err := mpichsuite.Command(rn, t, bin, at)
	if err != nil {
		return mpichsuite.Run{NotRun: err.Error()}, 0, nil
	}
	e.argv = append(e.argv, l.Argv...)
	e.env = append(slices.Clone(e.env), l.Env...)
	run, elapsed := e.run(ctx)
	// A test that broke its DVM fails, and the rest needs a new one.
	switch {
	case rn == mpichsuite.DynrunWarm && !dvms.warm.Alive():
		run.Harm = "the warm DVM lost a process during this test (restarted): " + strings.Join(dvms.warm.Lost(), ", ")
		if err := dvms.warm.restart(ctx); err != nil {
			return run, elapsed, fmt.Errorf("restart the warm DVM after %s: %w", t.ID(), err)
		}
	case hosts != nil && !hosts.Alive():
		run.Harm = "the DVM over the hosts lost a process during this test (restarted): " + strings.Join(hosts.Lost(), ", ")
		if err := hosts.restart(ctx); err != nil {
			return run, elapsed, fmt.Errorf("restart the DVM over the hosts after %s: %w", t.ID(), err)
		}
	}
	return run, elapsed, nil
}
