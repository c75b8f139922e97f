// Command mpichsuite runs MPICH's test suite (test/mpi) under the chosen
// MPICH builds' mpiexec.hydra and under dynrun (private DVM, warm DVM, and
// both over namespace hosts), prints a table and a summary, writes a TSV
// result file and exits 1 when a test passes under its reference (Hydra,
// or Hydra over the same hosts) but not under dynrun (2 on other errors).
// scripts/mpich-suite.sh builds what it needs and runs it; see docs/mpi.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/internal/mpichsuite"
	"github.com/dynrt/dynrt/internal/mpichsuite/runner"
)

// DefaultDirs are the directories of test/mpi the suite runs by default.
const DefaultDirs = "init,pt2pt,coll,comm,group,info,attr,topo,rma,spawn,ft"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func defaultCache() string {
	if c := os.Getenv("DYNRT_MPICH_CACHE"); c != "" {
		return c
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "dynrt")
}

func split(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mpichsuite", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cache := fs.String("cache", defaultCache(), "cache directory: MPICH sources (src/), builds, test programs (tests-<build>)")
	src := fs.String("src", "", "test/mpi of MPICH's sources (default <cache>/src/mpich-4.0.2/test/mpi)")
	dynrun := fs.String("dynrun", "", "the dynrun binary (required)")
	builds := fs.String("builds", "", "MPICH builds, comma-separated, of "+strings.Join(runner.BuildNames, ",")+" (default: every one present)")
	dirs := fs.String("dirs", "", "directories of test/mpi (default "+DefaultDirs+", or the subset's)")
	subset := fs.String("subset", "", "a named subset of tests (fast, ci)")
	only := fs.String("tests", "", "only these tests, comma-separated dir/program names (e.g. rma/win_shared,ft/die)")
	lists := fs.String("lists", "testlist", "testlist files per directory (runtests' make testing also reads testlist.dtp,testlist.cvar)")
	runners := fs.String("runners", "", "runners (default hydra,dynrun-private,dynrun-warm, and hydra-hosts,dynrun-hosts where namespace hosts can be built)")
	hostsPrefix := fs.String("hosts-prefix", runner.HostsPrefix, "prefix of the namespace hosts' names (the pid is added; runs at the same time need their own)")
	ceiling := fs.Duration("timeout", 0, "at most this time limit per test (default: the testlist's timeLimit, else 180s)")
	jobs := fs.Int("j", 2, "make -j for the test programs")
	out := fs.String("out", "bench-out/mpich-suite", "directory for the result file (results-<time>.tsv and results.tsv)")
	verbose := fs.Bool("v", false, "print each result as it comes")
	resume := fs.String("resume", "", "a result file or journal of an earlier run: its runs are not repeated, its results count")
	recheck := fs.Int("recheck", 0, "when a dynrun runner's first try disagrees with its reference's, run the pair again, alternating, up to this many more times each")
	afterHydra := fs.Duration("after-hydra-limit", 0, "if set, the dynrun runners' time limit for a test whose Hydra run lasted until its limit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	fail := func(err error) int {
		fmt.Fprintln(stderr, "mpichsuite:", err)
		return 2
	}
	if *dynrun == "" {
		return fail(errors.New("-dynrun is required (build it with go build -o DIR/dynrun ./cmd/dynrun)"))
	}
	cfg := runner.Config{
		SrcDir:  *src,
		Cache:   *cache,
		Dynrun:  *dynrun,
		Lists:   split(*lists),
		Ceiling: *ceiling,
		Jobs:    *jobs,
		Log:     log,
	}
	if cfg.SrcDir == "" {
		cfg.SrcDir = filepath.Join(*cache, "src", "mpich-4.0.2", "test", "mpi")
	}
	if _, err := os.Stat(filepath.Join(cfg.SrcDir, "runtests.in")); err != nil {
		return fail(fmt.Errorf("%s is not MPICH's test/mpi (no runtests.in): run scripts/mpich-suite.sh, which fetches the sources, or give -src", cfg.SrcDir))
	}
	chosen := split(*runners)
	if len(chosen) == 0 {
		chosen = []string{"hydra", "dynrun-private", "dynrun-warm"}
		if why := runner.HostsUnsupported(*dynrun); why != "" {
			fmt.Fprintf(stderr, "mpichsuite: runners hydra-hosts and dynrun-hosts skipped: %s\n", why)
		} else {
			chosen = append(chosen, "hydra-hosts", "dynrun-hosts")
		}
	}
	somewhere := mpichsuite.Place{DVM: "x", LauncherExec: "x", Hosts: []string{"x"}}
	for _, r := range chosen {
		if _, err := mpichsuite.Command(mpichsuite.Runner(r), mpichsuite.Test{NP: 1, Name: "x"}, "x", somewhere); err != nil {
			return fail(err)
		}
		cfg.Runners = append(cfg.Runners, mpichsuite.Runner(r))
	}
	cfg.HostsPrefix = *hostsPrefix
	if *subset != "" {
		names, err := mpichsuite.Subset(*subset)
		if err != nil {
			return fail(err)
		}
		cfg.Subset = names
		cfg.Dirs = mpichsuite.Dirs(names)
	}
	if *only != "" {
		cfg.Subset = append(cfg.Subset, split(*only)...)
		cfg.Dirs = mpichsuite.Dirs(cfg.Subset)
	}
	if *dirs != "" {
		cfg.Dirs = split(*dirs)
	} else if cfg.Dirs == nil {
		cfg.Dirs = split(DefaultDirs)
	}
	names := split(*builds)
	explicit := len(names) > 0
	if !explicit {
		names = runner.BuildNames
	}
	for _, n := range names {
		b, present, err := runner.KnownBuild(n, *cache)
		if err != nil {
			return fail(err)
		}
		if !present {
			if explicit {
				return fail(fmt.Errorf("MPICH build %s is not present (run scripts/mpich-suite.sh to build it)", n))
			}
			fmt.Fprintf(stderr, "mpichsuite: build %s not present, skipped\n", n)
			continue
		}
		cfg.Builds = append(cfg.Builds, b)
	}
	if len(cfg.Builds) == 0 {
		return fail(errors.New("no MPICH build present"))
	}
	cfg.AfterHydraLimit = *afterHydra
	if *recheck < 0 {
		return fail(fmt.Errorf("-recheck %d: want 0 or more tries", *recheck))
	}
	cfg.Recheck = *recheck
	var done []mpichsuite.Result
	if *resume != "" {
		var err error
		if done, err = readResults(*resume); err != nil {
			return fail(err)
		}
		cfg.Done = map[string]mpichsuite.Result{}
		for _, r := range done {
			cfg.Done[mpichsuite.Key(r.Build, r.Test, r.Runner, r.Try)] = r
		}
		fmt.Fprintf(stderr, "mpichsuite: resuming: %d runs recorded in %s are not repeated\n", len(cfg.Done), *resume)
	}
	// The journal keeps every result as it comes (and those resumed), so
	// that a run cut short (a machine stopped, a session ended) is resumed
	// from it with -resume.
	journal, jpath, err := openJournal(*out, done)
	if err != nil {
		return fail(err)
	}
	defer journal.Close()
	fmt.Fprintln(stderr, "mpichsuite: journal:", jpath)
	cfg.Progress = func(r mpichsuite.Result) {
		err := mpichsuite.WriteTSVRow(journal, r)
		if err == nil {
			err = journal.Sync()
		}
		if err != nil {
			fmt.Fprintln(stderr, "mpichsuite: journal:", err)
		}
		if *verbose {
			runner := string(r.Runner)
			if r.TryNo() > 1 {
				runner += fmt.Sprintf(" #%d", r.TryNo())
			}
			fmt.Fprintf(stdout, "%-9s %-15s %-40s %-14s %6.1fs %s\n", r.Build, runner, r.Test.ID(), r.Verdict.Label(r.Test), r.Elapsed.Seconds(), r.Verdict.Reason)
		}
	}
	start := time.Now()
	tests, err := cfg.Prepare(ctx)
	if err != nil {
		return fail(err)
	}
	built := time.Since(start)
	results, runErr := cfg.Run(ctx, tests)
	if len(results) > 0 {
		if err := mpichsuite.Table(stdout, results); err != nil {
			return fail(err)
		}
		builds := mpichsuite.SortedBuilds(results)
		fmt.Fprintln(stdout)
		mpichsuite.Summary(stdout, builds, results)
		mpichsuite.WriteTotals(stdout, builds, results)
		fmt.Fprintf(stdout, "preparing the test programs took %.0fs, running %.0fs\n", built.Seconds(), time.Since(start).Seconds()-built.Seconds())
		if p, err := writeResults(*out, results); err != nil {
			fmt.Fprintln(stderr, "mpichsuite:", err)
		} else {
			fmt.Fprintln(stdout, "results:", p)
		}
	}
	if runErr != nil {
		return fail(runErr)
	}
	mpichsuite.WriteComparison(stdout, results)
	diffs := mpichsuite.Differences(results)
	if len(diffs) > 0 {
		fmt.Fprintf(stdout, "\n%d runs pass under their reference (hydra; hydra-hosts for dynrun-hosts) but not under dynrun:\n", len(diffs))
		for _, d := range diffs {
			fmt.Fprintln(stdout, "  "+d.String())
		}
		return 1
	}
	fmt.Fprintln(stdout, "dynrun passes every test its reference passes (hydra; hydra-hosts for dynrun-hosts)")
	return 0
}

func readResults(p string) ([]mpichsuite.Result, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("-resume: %w", err)
	}
	defer f.Close()
	rs, err := mpichsuite.ReadTSV(f)
	if err != nil {
		return nil, fmt.Errorf("-resume %s: %w", p, err)
	}
	return rs, nil
}

// openJournal creates dir/journal-<time>.tsv with the header and the
// results of done.
func openJournal(dir string, done []mpichsuite.Result) (*os.File, string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	p := filepath.Join(dir, "journal-"+time.Now().UTC().Format("20060102T150405Z")+".tsv")
	f, err := os.Create(p)
	if err != nil {
		return nil, "", err
	}
	if err := mpichsuite.WriteTSV(f, done); err != nil {
		f.Close()
		return nil, "", err
	}
	return f, p, nil
}

// writeResults writes the TSV to dir/results-<time>.tsv and copies it to
// dir/results.tsv (the latest run).
func writeResults(dir string, results []mpichsuite.Result) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	p := filepath.Join(dir, "results-"+time.Now().UTC().Format("20060102T150405Z")+".tsv")
	f, err := os.Create(p)
	if err != nil {
		return "", err
	}
	if err := mpichsuite.WriteTSV(f, results); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	return p, os.WriteFile(filepath.Join(dir, "results.tsv"), data, 0o644)
}
