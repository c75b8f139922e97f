// Command heat is a malleable 2-D heat equation solver (Jacobi iteration on
// an NX×NY grid with fixed boundary values) for dynrt. The grid's rows are
// split in contiguous blocks over the processes of a communicator built on
// the application's process set; every step exchanges one ghost row with
// each neighbour, and every --residual-every steps the max-norm of the
// update is reduced over all processes.
//
// The job grows and shrinks while it runs: rank 0 asks for the changes of
// --schedule itself (thesis §7.4.4), or they come from dynrc (--trigger
// external). On each change the processes run the three phases (the root's
// set operation, the accept over the communicator, confirm for the new
// processes), build a communicator over the new set, and move the rows to
// the new decomposition before they go on. The result does not depend on
// the schedule: the final grid equals a static run's bit for bit.
//
// The root reports the time of every phase and thesis §8.4's amortisation
// figure: a change that cost O_rc and made each step G_rc faster pays back
// after more than O_rc/G_rc steps. See docs/heat.md.
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
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/lib/cliutil"
)

func main() { cliutil.RunMain(Main) }

// config is the command line.
type config struct {
	nx, ny, steps int
	check         int // steps between the root's looks for a resource change
	resEvery      int // steps between residual reductions
	schedule      []Request
	trigger       string // "app" (the schedule) or "external" (dynrc)
	wait          int    // changes to wait for after the last step (external)
	blocking      bool   // accept blocks until the new processes confirmed
	out           string // final grid file, written by the root
	json          bool
	timeout       time.Duration
	stacksOnTerm  bool // print the goroutines' stacks on SIGTERM (tests)
	tcp           bool
	buddy         bool          // keep checkpoints and a copy on a buddy: survive a lost process
	ckEvery       int           // steps between checkpoints (at checks)
	failureWait   time.Duration // after a communication error, how long to wait for the failure change
}

const (
	triggerApp      = "app"
	triggerExternal = "external"
)

// parseFlags reads the command line (without the program name).
func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	var sched string
	fs := flag.NewFlagSet("heat", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.nx, "nx", 64, "grid rows (split over the processes)")
	fs.IntVar(&c.ny, "ny", 64, "grid columns")
	fs.IntVar(&c.steps, "steps", 200, "Jacobi steps")
	fs.IntVar(&c.check, "check", 10, "steps between the root's checks for a resource change")
	fs.IntVar(&c.resEvery, "residual-every", 10, "steps between residual reductions")
	fs.StringVar(&sched, "schedule", "", `changes rank 0 requests: "STEP:+N" adds N, "STEP:-N" removes N, "STEP:-rA/B" removes communicator ranks A and B; comma-separated, e.g. "20:+2,40:-1"`)
	fs.StringVar(&c.trigger, "trigger", triggerApp, "app (changes from --schedule) or external (changes from dynrc)")
	fs.IntVar(&c.wait, "wait-changes", 0, "with --trigger external: after the last step, wait until this many changes have ended (for scripted runs)")
	fs.BoolVar(&c.blocking, "blocking", false, "accept blocks until the new processes of a grow confirmed")
	fs.BoolVar(&c.blocking, "b", false, "short for --blocking")
	fs.StringVar(&c.out, "out", "", "write the final grid to this file (text, exact float64)")
	fs.BoolVar(&c.json, "json", false, "print JSON lines (segments, changes, summary) instead of tables")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Minute, "limit of the whole run")
	fs.BoolVar(&c.tcp, "tcp", false, "use TCP between processes on one host too")
	fs.BoolVar(&c.stacksOnTerm, "stacks-on-term", false, "on SIGTERM, print every goroutine's stack to stderr and exit 143: where a process the runtime terminated was (the tests use it)")
	fs.BoolVar(&c.buddy, "buddy", false, "survive lost processes (dynrun --on-failure shrink): checkpoint the rows and keep a copy on a process of another node")
	fs.IntVar(&c.ckEvery, "checkpoint-every", 0, "with --buddy: steps between checkpoints, taken at the first check after them (0: every --check steps)")
	fs.DurationVar(&c.failureWait, "failure-wait", 2*time.Minute, "with --buddy: how long a process whose communication failed waits for the runtime's failure change")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.nx < 3 || c.ny < 3:
		return c, fmt.Errorf("grid %dx%d: --nx and --ny must be at least 3", c.nx, c.ny)
	case c.nx*c.ny > 1<<26:
		return c, fmt.Errorf("grid %dx%d: more than 2^26 cells", c.nx, c.ny)
	case c.steps < 1:
		return c, fmt.Errorf("--steps %d: must be positive", c.steps)
	case c.check < 1:
		return c, fmt.Errorf("--check %d: must be positive", c.check)
	case c.resEvery < 1:
		return c, fmt.Errorf("--residual-every %d: must be positive", c.resEvery)
	case c.timeout <= 0:
		return c, fmt.Errorf("--timeout %v: must be positive", c.timeout)
	case c.trigger != triggerApp && c.trigger != triggerExternal:
		return c, fmt.Errorf("--trigger %q: want app or external", c.trigger)
	case c.ckEvery < 0:
		return c, fmt.Errorf("--checkpoint-every %d: must not be negative", c.ckEvery)
	case c.failureWait <= 0:
		return c, fmt.Errorf("--failure-wait %v: must be positive", c.failureWait)
	case !c.buddy && c.ckEvery > 0:
		return c, errors.New("--checkpoint-every needs --buddy")
	case c.wait < 0:
		return c, fmt.Errorf("--wait-changes %d: must not be negative", c.wait)
	case c.wait > 0 && c.trigger != triggerExternal:
		return c, errors.New("--wait-changes needs --trigger external")
	case c.trigger == triggerExternal && sched != "":
		return c, errors.New("--schedule needs --trigger app: with external the changes come from dynrc")
	}
	s, err := parseSchedule(sched, c.steps)
	if err != nil {
		return c, fmt.Errorf("--schedule: %w", err)
	}
	c.schedule = s
	if c.ckEvery == 0 {
		c.ckEvery = c.check
	}
	return c, nil
}

// Main runs heat with args (args[0] is the program name) and returns the
// exit code: 0 done, 1 failed, 2 bad command line.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args[1:], stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "heat:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	if cfg.stacksOnTerm {
		defer stacksOnTerm(stderr)()
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := run(ctx, cfg, stdout, log); err != nil {
		fmt.Fprintln(stderr, "heat:", err)
		return 1
	}
	return 0
}

// stacksOnTerm prints every goroutine's stack to w when SIGTERM comes and
// exits 143, as the signal would have. A process the runtime terminates
// (a failure change that its peers waited for in vain) then shows where it
// waited. It returns the function that stops the watch.
func stacksOnTerm(w io.Writer) func() {
	sig := make(chan os.Signal, 1)
	done := make(chan struct{})
	signal.Notify(sig, syscall.SIGTERM)
	go func() {
		select {
		case <-sig:
			fmt.Fprintln(w, "heat: SIGTERM; the goroutines:")
			_ = pprof.Lookup("goroutine").WriteTo(w, 1)
			os.Exit(143)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sig)
		close(done)
	}
}
