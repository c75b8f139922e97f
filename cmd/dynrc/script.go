package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/lib/cliutil"
	"github.com/dynrt/dynrt/wire"
)

// A script is one command per line, for scripted grow/shrink scenarios
// (the thesis prototype's tool worked this way):
//
//	add N [pset P]        request an ADD of N processes (bound to P)
//	sub N [pset P]        request a SUB of N processes (highest slots, of P)
//	sub ranks LIST        request a SUB of the ranks in LIST, e.g. 3,5-7
//	wait [finalized|aborted]
//	                      wait until the last change of the script has ended
//	                      (a SUB: finalized and its processes exited); it is
//	                      a failure if it ends other than asked (default
//	                      finalized)
//	cancel                abort the last change of the script and wait until
//	                      it is rolled back
//	sleep D               pause for D (a Go duration like 500ms, 2s, or a
//	                      number of seconds)
//
// '#' starts a comment; blank lines are skipped; keywords are
// case-insensitive. The whole script is parsed before anything is sent, so a
// bad line changes nothing.

type scriptOp uint8

const (
	opAdd scriptOp = iota
	opSub
	opWait
	opCancel
	opSleep
)

// scriptLine is one parsed command.
type scriptLine struct {
	No     int             // line number, from 1
	Text   string          // the command as written, comment and outer blanks removed
	Op     scriptOp        //
	N      uint32          // add, sub
	Ranks  wire.RankRanges // sub ranks
	Pset   string          // add/sub N pset P
	Status string          // wait: wire.RCFinalized or wire.RCAborted
	Dur    time.Duration   // sleep
}

// maxScriptErrors bounds how many bad lines one parse reports.
const maxScriptErrors = 10

// parseScript reads a whole script. Every bad line is reported (up to
// maxScriptErrors) with its line number.
func parseScript(r io.Reader) ([]scriptLine, error) {
	var out []scriptLine
	var errs []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	changes := 0
	for no := 1; sc.Scan(); no++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		l, err := parseLine(text)
		if err == nil && (l.Op == opWait || l.Op == opCancel) && changes == 0 {
			err = fmt.Errorf("%s: no add or sub before it", strings.Fields(text)[0])
		}
		if err != nil {
			if len(errs) < maxScriptErrors {
				errs = append(errs, fmt.Sprintf("line %d: %v", no, err))
			}
			continue
		}
		if l.Op == opAdd || l.Op == opSub {
			changes++
		}
		l.No, l.Text = no, text
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the script: %w", err)
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "\n"))
	}
	return out, nil
}

func parseLine(text string) (scriptLine, error) {
	f := strings.Fields(text)
	cmd := strings.ToLower(f[0])
	args := f[1:]
	var l scriptLine
	count := func(s string) (uint32, error) {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil || n == 0 {
			return 0, fmt.Errorf("%s: %q is not a positive number of processes", cmd, s)
		}
		return uint32(n), nil
	}
	var err error
	switch cmd {
	case "add":
		l.Op = opAdd
		switch {
		case len(args) == 1:
		case len(args) == 3 && strings.EqualFold(args[1], "pset"):
			l.Pset = args[2]
		default:
			return l, fmt.Errorf("add: want 'add N' or 'add N pset P'")
		}
		l.N, err = count(args[0])
	case "sub":
		l.Op = opSub
		switch {
		case len(args) == 1 && strings.EqualFold(args[0], "ranks"):
			return l, fmt.Errorf("sub ranks: missing the rank LIST (e.g. 3,5-7)")
		case len(args) >= 2 && strings.EqualFold(args[0], "ranks"):
			if l.Ranks, err = parseRanks(strings.Join(args[1:], "")); err != nil {
				return l, fmt.Errorf("sub: %v", err)
			}
			l.N = uint32(l.Ranks.Count())
		case len(args) == 1:
			l.N, err = count(args[0])
		case len(args) == 3 && strings.EqualFold(args[1], "pset"):
			l.N, err = count(args[0])
			l.Pset = args[2]
		default:
			return l, fmt.Errorf("sub: want 'sub N', 'sub N pset P' or 'sub ranks LIST'")
		}
	case "wait":
		l.Op, l.Status = opWait, wire.RCFinalized
		switch {
		case len(args) == 0:
		case len(args) == 1 && (strings.EqualFold(args[0], wire.RCFinalized) || strings.EqualFold(args[0], wire.RCAborted)):
			l.Status = strings.ToUpper(args[0])
		default:
			return l, fmt.Errorf("wait: want 'wait', 'wait finalized' or 'wait aborted'")
		}
	case "cancel":
		l.Op = opCancel
		if len(args) != 0 {
			return l, fmt.Errorf("cancel takes no argument (it cancels the last change)")
		}
	case "sleep":
		l.Op = opSleep
		if len(args) != 1 {
			return l, fmt.Errorf("sleep: want 'sleep D' (e.g. 'sleep 2s')")
		}
		l.Dur, err = parseSleep(args[0])
	default:
		return l, fmt.Errorf("unknown command %q (want add, sub, wait, cancel or sleep)", f[0])
	}
	return l, err
}

// maxSleep keeps a typo ("sleep 2h") from hanging a test harness for long.
const maxSleep = time.Hour

func parseSleep(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		sec, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil {
			return 0, fmt.Errorf("sleep: %q is not a duration", s)
		}
		d = time.Duration(sec * float64(time.Second))
	}
	if d < 0 || d > maxSleep {
		return 0, fmt.Errorf("sleep: %s is out of range (0 to %s)", s, maxSleep)
	}
	return d, nil
}

func scriptCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "script",
		Usage:     "run a scripted scenario of changes, one command per line (from FILE, or stdin for - or none)",
		ArgsUsage: "[FILE|-]",
		Description: "Commands:\n" +
			"   add N [pset P]            request an ADD of N processes\n" +
			"   sub N [pset P]            request a SUB of N processes (of P)\n" +
			"   sub ranks LIST            request a SUB of these ranks (LIST like 3,5-7)\n" +
			"   wait [finalized|aborted]  wait until the last change has ended (default: finalized)\n" +
			"   cancel                    abort the last change (returns once it is rolled back)\n" +
			"   sleep D                   pause (2s, 500ms, or seconds)\n" +
			"'#' starts a comment. Each line is printed with its outcome and how long it took; the\n" +
			"script stops at the first failure, with that failure's exit status and line number.\n" +
			"The whole script is checked before anything is sent (exit status 2 for bad lines).",
		Flags: []cli.Flag{dvmFlag(), jobFlag(), queueFlag(),
			&cli.DurationFlag{Name: "timeout", Usage: "limit `D` for each line but sleep (e.g. 30s); when it passes the script stops with exit status 3", DefaultText: "none"}},
		Action: func(c *cli.Context) error { return runScript(c, e) },
	}
}

func runScript(c *cli.Context, e *env) error {
	if c.Args().Len() > 1 {
		return cliutil.Usagef("script: unexpected argument %q", c.Args().Get(1))
	}
	limit := c.Duration("timeout")
	if c.IsSet("timeout") && limit <= 0 {
		return cliutil.Usagef("--timeout must be positive, got %s", limit)
	}
	var in io.Reader = e.stdin
	name := "stdin"
	if f := c.Args().First(); f != "" && f != "-" {
		file, err := os.Open(f)
		if err != nil {
			return cliutil.Exitf(cliutil.ExitFail, "script: %v", err)
		}
		defer file.Close()
		in, name = file, f
	}
	lines, err := parseScript(in)
	if err != nil {
		return cliutil.Usagef("script %s:\n%v", name, err)
	}
	if len(lines) == 0 {
		fmt.Fprintln(e.stdout, "script: nothing to do")
		return nil
	}
	api, err := e.connect(c.Context, dvmSel(c))
	if err != nil {
		return failed(c.Context, err, "")
	}
	defer api.Close()
	s := &scriptRun{e: e, api: api, root: c.Context, limit: limit, queue: c.Bool("queue")}
	for _, l := range lines {
		if l.Op == opAdd || l.Op == opSub {
			ctx, cancel := s.lineCtx()
			s.job, err = resolveJob(ctx, api, c.String("job"))
			cancel()
			if err != nil {
				return failed(c.Context, err, "")
			}
			break
		}
	}
	start := e.now()
	for _, l := range lines {
		if err := s.step(l); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.stdout, "script done: %d commands, %d changes in %s\n", len(lines), s.changes, fmtMS(e.now().Sub(start)))
	return nil
}

// scriptRun is the state of a running script.
type scriptRun struct {
	e       *env
	api     rcAPI
	root    context.Context
	limit   time.Duration
	queue   bool
	job     string
	last    wire.RC // latest change the script requested
	changes int
}

func (s *scriptRun) lineCtx() (context.Context, context.CancelFunc) {
	if s.limit > 0 {
		return context.WithTimeout(s.root, s.limit)
	}
	return context.WithCancel(s.root)
}

// step runs one line, printing it first and its outcome and duration once
// it is over.
func (s *scriptRun) step(l scriptLine) error {
	out := s.e.stdout
	fmt.Fprintf(out, "%4d  %-22s ", l.No, l.Text)
	ctx, cancel := s.lineCtx()
	if l.Op == opSleep { // --timeout bounds waiting for the runtime, not pauses
		cancel()
		ctx, cancel = context.WithCancel(s.root)
	}
	defer cancel()
	start := s.e.now()
	res, err := s.do(ctx, l)
	took := fmtMS(s.e.now().Sub(start))
	if err != nil {
		if res != "" {
			res += "; "
		}
		fmt.Fprintf(out, "-> FAILED: %s(%s)\n", res, took)
		return failed(s.root, err, "script line %d (%s)", l.No, l.Text)
	}
	fmt.Fprintf(out, "-> %s (%s)\n", res, took)
	return nil
}

// do runs one line and describes its outcome.
func (s *scriptRun) do(ctx context.Context, l scriptLine) (string, error) {
	switch l.Op {
	case opAdd, opSub:
		req := wire.RCRequest{
			Job: s.job, Type: wire.RCAdd, N: l.N, Requester: wire.ByTool,
			RequesterID: "dynrc script pid " + strconv.Itoa(s.e.pid),
		}
		if l.Op == opSub {
			req.Type, req.Ranks = wire.RCSub, l.Ranks
		}
		if l.Pset != "" {
			req.Bound = []string{l.Pset}
		}
		rc, err := request(ctx, s.api, req, s.queue)
		if err != nil {
			return "", err
		}
		s.last = rc
		s.changes++
		return summary(&rc), outcome(&rc, wire.RCFinalized, false)
	case opWait:
		rc, err := waitDone(ctx, s.api, s.last)
		s.last = rc
		if err != nil {
			return summary(&rc), err
		}
		return summary(&rc), outcome(&rc, l.Status, true)
	case opCancel:
		last, err := s.api.WaitQueued(ctx, s.last)
		if err != nil {
			return "", err
		}
		rc, err := cancelDone(ctx, s.api, last.Delta, "canceled by dynrc script line "+strconv.Itoa(l.No))
		if rc.Delta != "" {
			s.last = rc
		}
		if err != nil {
			return "", err
		}
		return summary(&rc), nil
	case opSleep:
		return "slept", s.e.sleep(ctx, l.Dur)
	}
	return "", fmt.Errorf("script: unknown operation %d", l.Op)
}
