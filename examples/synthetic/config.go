package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"
)

const (
	modeInc  = "inc"
	modeStep = "step"

	triggerApp      = "app"
	triggerExternal = "external"

	exchangeComm = "comm"
	exchangeKV   = "kv"
)

// config is the parameter set of thesis table 8.1 plus what running it
// here needs.
type config struct {
	mode     string // inc or step
	start    int    // n_start: the job must be launched with this many processes (0: not checked)
	limit    int    // n_limit
	delta    int    // n_delta
	freq     int    // f: a change every f iterations (app trigger)
	iters    int    // i: iterations
	blocking bool   // b: blocking accept
	problem  int64  // sampling points per iteration, over all processes
	trigger  string // app or external
	changes  int    // external trigger: run on until this many changes have ended
	out      string // JSON lines file ("" or "-": stdout)
	tables   bool   // print the summary tables at the end
	timeout  time.Duration
	confirm  time.Duration // app trigger: the runtime's confirm timeout for each change (0: its default)
	tag      string        // communicator tag
	verbose  bool
	skew     int64  // tests: a process started by an ADD adds this to its count, which the check must catch
	stopMark string // tests: at the first stop, create <dir>/<rank> and wait for <dir>/go
	exchange string // comm (lib/comm) or kv (c-synthetic's protocol: kv.go)
}

// parseArgs reads the flags (args without the program name).
func parseArgs(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("synthetic", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.mode, "mode", modeInc, "mode of the changes: inc or step")
	fs.IntVar(&c.start, "start", 0, "n_start: processes the job is launched with (checked; 0: any)")
	fs.IntVar(&c.limit, "limit", 0, "n_limit: upper (grow) or lower (shrink) limit of processes")
	fs.IntVar(&c.delta, "delta", 0, "n_delta: processes added or removed per change (step mode: per step)")
	fs.IntVar(&c.freq, "f", 10, "a change every f iterations (app trigger)")
	fs.IntVar(&c.iters, "i", 70, "iterations")
	fs.BoolVar(&c.blocking, "b", false, "blocking accept: wait in phase 3 until the new processes confirm")
	fs.Int64Var(&c.problem, "problem-size", 20_000_000, "sampling points per iteration, split over the processes")
	fs.StringVar(&c.trigger, "trigger", triggerApp, "who asks for the changes: app (rank 0, via RequestRC) or external (dynrc)")
	fs.IntVar(&c.changes, "changes", 0, "external trigger: keep iterating until this many changes have ended")
	fs.StringVar(&c.out, "out", "", "file for the JSON lines (default stdout)")
	fs.BoolVar(&c.tables, "tables", true, "print the summary tables at the end (lines starting with '# ')")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Minute, "limit of the whole run")
	fs.DurationVar(&c.confirm, "confirm-timeout", 0, "app trigger: confirm timeout of each change (0: the runtime's)")
	fs.StringVar(&c.tag, "tag", "synthetic", "communicator tag")
	fs.StringVar(&c.exchange, "exchange", exchangeComm, "how ranks talk: comm (lib/comm) or kv (examples/c-synthetic's key-value protocol, for jobs mixing both programs)")
	fs.BoolVar(&c.verbose, "v", false, "debug log on stderr")
	fs.Int64Var(&c.skew, "test-skew", 0, "for tests: processes started by an ADD miscount by this much")
	fs.StringVar(&c.stopMark, "test-stop-mark", "", "for tests: at the first decision to stop, create <dir>/<rank> and wait for <dir>/go")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return c, c.check()
}

func (c config) check() error {
	var errs []error
	if c.mode != modeInc && c.mode != modeStep {
		errs = append(errs, fmt.Errorf("--mode %q: want inc or step", c.mode))
	}
	if c.trigger != triggerApp && c.trigger != triggerExternal {
		errs = append(errs, fmt.Errorf("--trigger %q: want app or external", c.trigger))
	}
	if c.exchange != exchangeComm && c.exchange != exchangeKV {
		errs = append(errs, fmt.Errorf("--exchange %q: want comm or kv", c.exchange))
	}
	if c.exchange == exchangeKV && (c.mode != modeInc || c.stopMark != "") {
		errs = append(errs, errors.New("--exchange kv runs --mode inc only, without --test-stop-mark (as examples/c-synthetic)"))
	}
	if c.iters < 1 || c.freq < 1 {
		errs = append(errs, errors.New("-i and -f must be at least 1"))
	}
	if c.problem < 1 {
		errs = append(errs, errors.New("--problem-size must be at least 1"))
	}
	if c.start < 0 || c.limit < 0 || c.delta < 0 || c.changes < 0 {
		errs = append(errs, errors.New("--start, --limit, --delta and --changes cannot be negative"))
	}
	if c.trigger == triggerApp && c.limit > 0 && c.delta == 0 {
		errs = append(errs, errors.New("--limit needs --delta"))
	}
	if c.trigger == triggerApp && c.limit > 0 && c.start == 0 {
		errs = append(errs, errors.New("--limit needs --start (the plan starts from it)"))
	}
	return errors.Join(errs...)
}
