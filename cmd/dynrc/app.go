package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/lib/cliutil"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// Exit statuses of dynrc (docs/rc.md). 0, 1 and 2 are cliutil's.
const (
	exitTimeout   = 3   // --timeout passed before the change ended
	exitBusy      = 4   // another change of the job is in flight
	exitInterrupt = 130 // SIGINT: 128+2
	exitTerm      = 143 // SIGTERM: 128+15
)

const exitHelp = `Exit status:
   0  done: the change is FINALIZED and settled (with --wait, and for wait: every new process
      started, or every removed process gone), accepted by the runtime (add and sub without
      --wait), or canceled and rolled back (cancel)
   1  the change was ABORTED, or the request failed (unknown job or delta, n too large,
      ranks not in the job, pset not malleable, ...)
   2  usage error (bad flag, argument or script line); nothing was sent
   3  --timeout passed first; the change itself goes on (see 'dynrc cancel')
   4  busy: another change of the job is in flight (the message names it; see --queue)
 130  interrupted (143: terminated); the change itself goes on`

// env is everything dynrc touches outside its arguments, so that tests can
// run it against a fake master with a fake clock.
type env struct {
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
	getenv  func(string) string
	connect func(ctx context.Context, sel string) (rcAPI, error)
	now     func() time.Time
	sleep   func(ctx context.Context, d time.Duration) error
	loc     *time.Location // for times of day in `show`
	pid     int
}

// Main is dynrc: it triggers and inspects resource changes of running jobs.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{
		stdin: os.Stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv,
		now: time.Now, sleep: sleepCtx, loc: time.Local, pid: os.Getpid(),
	}
	e.connect = func(ctx context.Context, sel string) (rcAPI, error) { return attach(ctx, e, sel) }
	return run(ctx, e, args)
}

func run(ctx context.Context, e *env, args []string) int {
	app := &cli.App{
		Name:  "dynrc",
		Usage: "grow, shrink and inspect resource changes of running dynrt jobs",
		UsageText: "dynrc [--dvm X] add -n N [--job J] [--pset P] [--wait] [--timeout D] [--json] [--queue]\n" +
			"dynrc [--dvm X] sub (-n N | --ranks LIST) [--job J] [--pset P] [--wait] [--timeout D] [--json] [--queue]\n" +
			"dynrc [--dvm X] list [--job J] [--json]\n" +
			"dynrc [--dvm X] show DELTA [--json]\n" +
			"dynrc [--dvm X] wait DELTA [--status finalized|aborted] [--timeout D] [--json]\n" +
			"dynrc [--dvm X] cancel DELTA [--json]\n" +
			"dynrc [--dvm X] script [--job J] [--timeout D] [--queue] [FILE|-]",
		Description: "A change is named by its delta set, mpi://rte/<app>/rc/<n>; where a DELTA is expected, the\n" +
			"number <n> alone also works (for the job given by --job, or the DVM's only job).\n" +
			"--job may be left out when the DVM runs exactly one job. See docs/rc.md.\n\n" + exitHelp,
		HideHelpCommand: true,
		Flags:           []cli.Flag{dvmFlag()},
		Commands: []*cli.Command{
			changeCommand(e, wire.RCAdd),
			changeCommand(e, wire.RCSub),
			changeCommand(e, wire.RCReplace),
			{
				Name:   "list",
				Usage:  "list the resource changes of the DVM's jobs, oldest first",
				Flags:  []cli.Flag{dvmFlag(), jobFlag(), jsonFlag()},
				Action: func(c *cli.Context) error { return runList(c, e) },
			},
			{
				Name:      "show",
				Usage:     "show one resource change with the time of every step",
				ArgsUsage: "DELTA",
				Flags:     []cli.Flag{dvmFlag(), jobFlag(), jsonFlag()},
				Action:    func(c *cli.Context) error { return runShow(c, e) },
			},
			{
				Name:      "wait",
				Usage:     "wait until a resource change is settled (finalized or aborted, processes started or gone)",
				ArgsUsage: "DELTA",
				Description: "Exit status 0 when the change ended with --status (default finalized), 1 when it ended\n" +
					"the other way, 3 on --timeout. It returns once the change is settled: its new processes\n" +
					"all started (add) or its removed processes all gone (sub), or, when aborted, rolled back.",
				Flags: []cli.Flag{dvmFlag(), jobFlag(), jsonFlag(), timeoutFlag(),
					&cli.StringFlag{Name: "status", Value: "finalized", Usage: "the status that counts as success: `S` is finalized or aborted"}},
				Action: func(c *cli.Context) error { return runWait(c, e) },
			},
			{
				Name:      "cancel",
				Usage:     "abort a resource change that is not finalized yet; returns once it is rolled back",
				ArgsUsage: "DELTA",
				Flags:     []cli.Flag{dvmFlag(), jobFlag(), jsonFlag()},
				Action:    func(c *cli.Context) error { return runCancel(c, e) },
			},
			scriptCommand(e),
		},
	}
	app.Action = func(c *cli.Context) error {
		if c.Args().Present() {
			return cliutil.Usagef("unknown command %q (see 'dynrc --help')", c.Args().First())
		}
		return cli.ShowAppHelp(c)
	}
	return cliutil.Run(ctx, app, flagsFirst(app, args), e.stdout, e.stderr)
}

// flagsFirst lets flags follow a command's arguments ("dynrc show 3
// --json"): urfave/cli v2 stops reading flags at the first argument, so
// the command's flags are moved in front of its arguments. "--" ends the
// flags as usual; "-" is an argument (stdin).
func flagsFirst(app *cli.App, args []string) []string {
	isFlag := func(a string) bool { return len(a) > 1 && a[0] == '-' }
	takesValue := func(flags []cli.Flag, a string) bool {
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if hasValue {
			return false
		}
		for _, f := range flags {
			for _, n := range f.Names() {
				if n == name {
					_, isBool := f.(*cli.BoolFlag)
					return !isBool
				}
			}
		}
		return false
	}
	i := 1
	for i < len(args) && isFlag(args[i]) && args[i] != "--" {
		if takesValue(app.Flags, args[i]) {
			i++
		}
		i++
	}
	if i >= len(args) {
		return args
	}
	cmd := app.Command(args[i])
	if cmd == nil {
		return args
	}
	var flags, pos []string
	rest := args[i+1:]
	for j := 0; j < len(rest); j++ {
		a := rest[j]
		switch {
		case a == "--":
			pos = append(pos, rest[j:]...)
			j = len(rest)
		case isFlag(a):
			flags = append(flags, a)
			if takesValue(cmd.Flags, a) && j+1 < len(rest) {
				flags = append(flags, rest[j+1])
				j++
			}
		default:
			pos = append(pos, a)
		}
	}
	out := append(append([]string(nil), args[:i+1]...), flags...)
	return append(out, pos...)
}

func dvmFlag() cli.Flag {
	return &cli.StringFlag{Name: "dvm", Usage: "DVM `X`: id, name, file:PATH or uri:ADDR (default $DYNRT_DVM, else the only running DVM)"}
}

func jobFlag() cli.Flag {
	return &cli.StringFlag{Name: "job", Aliases: []string{"j"}, Usage: "job `J`: namespace, name or number (default: the DVM's only job)"}
}

func jsonFlag() cli.Flag {
	return &cli.BoolFlag{Name: "json", Usage: "print JSON (fields in docs/rc.md)", DisableDefaultText: true}
}

func timeoutFlag() cli.Flag {
	return &cli.DurationFlag{Name: "timeout", Usage: "give up after `D` (e.g. 30s) with exit status 3; the change goes on", DefaultText: "none"}
}

func queueFlag() cli.Flag {
	return &cli.BoolFlag{Name: "queue", Usage: "wait in line behind a change in flight instead of failing with status 4", DisableDefaultText: true}
}

func changeCommand(e *env, typ string) *cli.Command {
	flags := []cli.Flag{
		dvmFlag(), jobFlag(),
		&cli.IntFlag{Name: "n", Usage: "number of processes `N` to " + map[string]string{wire.RCAdd: "start", wire.RCSub: "remove", wire.RCReplace: "replace"}[typ], DefaultText: "none"},
	}
	cmd := &cli.Command{Name: strings.ToLower(typ), HideHelpCommand: true}
	switch typ {
	case wire.RCAdd:
		cmd.Usage = "add processes to a running job"
		cmd.UsageText = "dynrc add -n N [--job J] [--pset P] [--wait] [--timeout D] [--json] [--queue] [--confirm-timeout D]"
		cmd.Description = "The new processes are placed on the next free slots. The change is bound to the job's\n" +
			"app set mpi://app/<app>, or to --pset, which must be a malleable set of the job."
		flags = append(flags, &cli.StringFlag{Name: "pset", Usage: "bind the change to the malleable set `P` (default: the app set)"})
	case wire.RCSub:
		cmd.Usage = "remove processes from a running job"
		cmd.UsageText = "dynrc sub (-n N | --ranks LIST) [--job J] [--pset P] [--wait] [--timeout D] [--json] [--queue] [--grace D] [--confirm-timeout D]"
		cmd.Description = "Without --ranks the runtime removes the processes on the highest slots (of --pset, if\n" +
			"given). The change is bound to the reference-counted sets of the removed processes; each of\n" +
			"them must accept."
		flags = append(flags, leavingFlags("remove", "removed", "remove members of the set `P` only")...)
	case wire.RCReplace:
		cmd.Usage = "replace processes of a running job by as many new ones"
		cmd.UsageText = "dynrc replace (-n N | --ranks LIST) [--job J] [--pset P] [--wait] [--timeout D] [--json] [--queue] [--grace D] [--confirm-timeout D]"
		cmd.Description = "New processes start on free slots (not those of the replaced ones, which are still held),\n" +
			"the set that holds every replaced process accepts, the new processes confirm, and only then\n" +
			"are the replaced processes told to leave; e.g. evacuate a node: dynrc replace --ranks <its ranks>.\n" +
			"Without --ranks the runtime replaces the processes on the highest slots (of --pset, if given)."
		flags = append(flags, leavingFlags("replace", "replaced", "replace members of the malleable set `P` (it accepts the change)")...)
	}
	flags = append(flags, &cli.DurationFlag{Name: "confirm-timeout", Usage: "abort the change unless it is FINALIZED (sub: accepted) within `D` of its announcement", DefaultText: "the master's"})
	cmd.Flags = append(flags,
		&cli.BoolFlag{Name: "wait", Aliases: []string{"w"}, Usage: "return once the change is settled: FINALIZED with its new processes started (add, replace) and its leaving ones gone (sub, replace), or ABORTED", DisableDefaultText: true},
		timeoutFlag(), jsonFlag(), queueFlag())
	cmd.Action = func(c *cli.Context) error { return runChange(c, e, typ) }
	return cmd
}

// leavingFlags are the flags of a change that takes processes away (sub,
// replace): which ones (verb), the set they come from, and their grace.
func leavingFlags(verb, done, pset string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "ranks", Usage: verb + " exactly these ranks: `LIST` like 3,5-7 (instead of -n)"},
		&cli.StringFlag{Name: "pset", Usage: pset},
		&cli.DurationFlag{Name: "grace", Usage: "time `D` the " + done + " processes get to exit after FINALIZED before SIGTERM, then SIGKILL", DefaultText: "the master's"},
	}
}

// dvmSel returns --dvm from the command or any parent (the flag exists at
// both levels so that it may come before or after the command name).
func dvmSel(c *cli.Context) string { return cliutil.Lookup(c, "dvm") }

func attach(ctx context.Context, e *env, sel string) (rcAPI, error) {
	cl, err := tool.Attach(ctx, tool.Options{Sel: sel, Env: e.getenv, Name: "dynrc"})
	if err != nil {
		return nil, cliutil.Exitf(cliutil.ExitFail, "%s", clean(err))
	}
	return toolAPI{cl}, nil
}

// connect attaches with the command's --dvm and --timeout.
func connect(c *cli.Context, e *env) (context.Context, context.CancelFunc, rcAPI, error) {
	ctx, cancel := c.Context, context.CancelFunc(func() {})
	if d := c.Duration("timeout"); c.IsSet("timeout") {
		if d <= 0 {
			return nil, nil, nil, cliutil.Usagef("--timeout must be positive, got %s", d)
		}
		ctx, cancel = context.WithTimeout(ctx, d)
	}
	api, err := e.connect(ctx, dvmSel(c))
	if err != nil {
		cancel()
		return nil, nil, nil, failed(c.Context, err, "")
	}
	return ctx, cancel, api, nil
}

func noArgs(c *cli.Context) error {
	if c.Args().Present() {
		return cliutil.Usagef("%s: unexpected argument %q", c.Command.HelpName, c.Args().First())
	}
	return nil
}

// changeReq builds the request of add/sub from the flags (usage errors
// only: nothing is sent yet).
func changeReq(c *cli.Context, e *env, typ string) (wire.RCRequest, error) {
	req := wire.RCRequest{Type: typ, Requester: wire.ByTool, RequesterID: "dynrc pid " + strconv.Itoa(e.pid)}
	if err := noArgs(c); err != nil {
		return req, err
	}
	if p := c.String("pset"); p != "" {
		req.Bound = []string{p}
	}
	n, hasN := c.Int("n"), c.IsSet("n")
	if hasN && n <= 0 {
		return req, cliutil.Usagef("-n must be a positive number of processes, got %d", n)
	}
	if typ != wire.RCAdd && c.IsSet("ranks") {
		if hasN {
			return req, cliutil.Usagef("give either -n or --ranks, not both")
		}
		ranks, err := parseRanks(c.String("ranks"))
		if err != nil {
			return req, cliutil.Usagef("--ranks: %v", err)
		}
		req.Ranks, req.N = ranks, uint32(ranks.Count())
		return req, nil
	}
	if !hasN {
		if typ != wire.RCAdd {
			return req, cliutil.Usagef("%s needs -n N or --ranks LIST", strings.ToLower(typ))
		}
		return req, cliutil.Usagef("add needs -n N")
	}
	lim, err := wire.LimitsFromEnv(e.getenv)
	if err != nil {
		return req, cliutil.Usagef("%v", err)
	}
	if err := lim.Procs("-n", n, false); err != nil {
		return req, cliutil.Usagef("%v", err)
	}
	req.N = uint32(n)
	return req, nil
}

// changeTimes sets the optional time limits of a change from the flags.
func changeTimes(c *cli.Context, req *wire.RCRequest) error {
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"grace", &req.GraceMS}, {"confirm-timeout", &req.ConfirmMS}} {
		if !c.IsSet(f.name) {
			continue
		}
		d := c.Duration(f.name)
		if d < time.Millisecond {
			return cliutil.Usagef("--%s must be at least 1ms, got %s", f.name, d)
		}
		*f.dst = d.Milliseconds()
	}
	return nil
}

func runChange(c *cli.Context, e *env, typ string) error {
	req, err := changeReq(c, e, typ)
	if err == nil {
		err = changeTimes(c, &req)
	}
	if err != nil {
		return err
	}
	ctx, cancel, api, err := connect(c, e)
	if err != nil {
		return err
	}
	defer cancel()
	defer api.Close()
	job, err := resolveJob(ctx, api, c.String("job"))
	if err != nil {
		return failed(c.Context, err, "")
	}
	req.Job = job
	rc, err := request(ctx, api, req, c.Bool("queue"))
	if err != nil {
		return failed(c.Context, err, "%s %d", strings.ToLower(typ), req.N)
	}
	if c.Bool("wait") {
		rc, err = waitDone(ctx, api, rc)
	}
	if perr := printRC(e, c.Bool("json"), &rc); perr != nil {
		return cliutil.Exitf(cliutil.ExitFail, "%v", perr)
	}
	if err != nil {
		return failed(c.Context, err, "waiting for %s", rc.Delta)
	}
	return outcome(&rc, wire.RCFinalized, c.Bool("wait"))
}

// request sends one add/sub request.
func request(ctx context.Context, api rcAPI, req wire.RCRequest, queue bool) (wire.RC, error) {
	req.Queue = queue
	return api.RequestRC(ctx, req)
}

// outcome is the exit status for a change after add/sub/wait: an ABORTED
// change is a failure, and so is a change that ended other than want when
// the caller waited for the end.
func outcome(rc *wire.RC, want string, waited bool) error {
	switch {
	case rc.Status == wire.RCAborted && want != wire.RCAborted:
		return cliutil.Exitf(cliutil.ExitFail, "%s was aborted: %s", rc.Delta, dash(rc.Reason))
	case waited && rc.Status != want:
		return cliutil.Exitf(cliutil.ExitFail, "%s ended %s, not %s", rc.Delta, rc.Status, want)
	}
	return nil
}

func printRC(e *env, asJSON bool, rc *wire.RC) error {
	if asJSON {
		return writeJSON(e.stdout, toJSON(rc))
	}
	_, err := fmt.Fprintln(e.stdout, summary(rc))
	return err
}

// waitDone waits until rc is settled: FINALIZED with every new process
// started or every removed process gone, or ABORTED with its processes
// killed and slots freed. Only then may the job's next change start, so
// that is when a wait is over, whatever status the caller hopes for. A
// change that ended the other way is no error here: the record says so and
// outcome decides. On failure the record returned is the latest one seen.
func waitDone(ctx context.Context, api rcAPI, rc wire.RC) (wire.RC, error) {
	rc, err := api.WaitQueued(ctx, rc)
	if err != nil {
		return rc, err
	}
	got, err := api.WaitRC(ctx, rc.Delta, "")
	if got.Delta != "" {
		rc = got
	}
	if err != nil && final(rc.Status) && (errors.Is(err, wire.ErrAborted) || errors.Is(err, wire.ErrState)) {
		err = nil
	}
	return rc, err
}

// resolveJob turns --job (namespace, app name or job number) into the job
// namespace; without --job the DVM must run exactly one job.
func resolveJob(ctx context.Context, api rcAPI, want string) (string, error) {
	j, err := findJob(ctx, api, want)
	return j.Job, err
}

func findJob(ctx context.Context, api rcAPI, want string) (wire.JobInfo, error) {
	jobs, err := api.Jobs(ctx)
	if err != nil {
		return wire.JobInfo{}, err
	}
	if want == "" {
		switch len(jobs) {
		case 0:
			return wire.JobInfo{}, cliutil.Exitf(cliutil.ExitFail, "no job runs on this DVM")
		case 1:
			return jobs[0], nil
		}
		return wire.JobInfo{}, cliutil.Usagef("the DVM runs %d jobs, pick one with --job: %s", len(jobs), jobNames(jobs))
	}
	for _, match := range []func(j *wire.JobInfo) bool{
		func(j *wire.JobInfo) bool { return j.Job == want },
		func(j *wire.JobInfo) bool { return j.App == want },
		func(j *wire.JobInfo) bool { return strconv.FormatUint(uint64(j.ID), 10) == want },
	} {
		for i := range jobs {
			if match(&jobs[i]) {
				return jobs[i], nil
			}
		}
	}
	if len(jobs) == 0 {
		return wire.JobInfo{}, cliutil.Exitf(cliutil.ExitFail, "unknown job %q: no job runs on this DVM", want)
	}
	return wire.JobInfo{}, cliutil.Exitf(cliutil.ExitFail, "unknown job %q; running: %s", want, jobNames(jobs))
}

func jobNames(jobs []wire.JobInfo) string {
	names := make([]string, len(jobs))
	for i, j := range jobs {
		names[i] = fmt.Sprintf("%s (job %d, app %s, %d procs)", j.Job, j.ID, j.App, j.Size)
	}
	return strings.Join(names, ", ")
}

// deltaArg returns the one DELTA argument, expanding a bare number n into
// the delta name of the n-th change of the job.
func deltaArg(c *cli.Context, ctx context.Context, api rcAPI) (string, error) {
	d := c.Args().First()
	if _, err := strconv.ParseUint(d, 10, 31); err != nil {
		return d, nil
	}
	j, err := findJob(ctx, api, c.String("job"))
	if err != nil {
		return "", err
	}
	return "mpi://rte/" + j.App + "/rc/" + d, nil
}

func oneArg(c *cli.Context, what string) error {
	switch c.Args().Len() {
	case 0:
		return cliutil.Usagef("%s: missing %s", c.Command.HelpName, what)
	case 1:
		return nil
	}
	return cliutil.Usagef("%s: unexpected argument %q", c.Command.HelpName, c.Args().Get(1))
}

func runList(c *cli.Context, e *env) error {
	if err := noArgs(c); err != nil {
		return err
	}
	ctx, cancel, api, err := connect(c, e)
	if err != nil {
		return err
	}
	defer cancel()
	defer api.Close()
	job := ""
	if c.IsSet("job") {
		if job, err = resolveJob(ctx, api, c.String("job")); err != nil {
			return failed(c.Context, err, "")
		}
	}
	rcs, err := api.RCs(ctx, job)
	if err != nil {
		return failed(c.Context, err, "list")
	}
	if c.Bool("json") {
		out := make([]rcJSON, len(rcs))
		for i := range rcs {
			out[i] = toJSON(&rcs[i])
		}
		err = writeJSON(e.stdout, out)
	} else {
		err = writeList(e.stdout, rcs)
	}
	if err != nil {
		return cliutil.Exitf(cliutil.ExitFail, "%v", err)
	}
	return nil
}

// oneRC is the common start of show, wait and cancel.
func oneRC(c *cli.Context, e *env) (context.Context, context.CancelFunc, rcAPI, string, error) {
	if err := oneArg(c, "DELTA"); err != nil {
		return nil, nil, nil, "", err
	}
	ctx, cancel, api, err := connect(c, e)
	if err != nil {
		return nil, nil, nil, "", err
	}
	delta, err := deltaArg(c, ctx, api)
	if err != nil {
		api.Close()
		cancel()
		return nil, nil, nil, "", failed(c.Context, err, "")
	}
	return ctx, cancel, api, delta, nil
}

func runShow(c *cli.Context, e *env) error {
	ctx, cancel, api, delta, err := oneRC(c, e)
	if err != nil {
		return err
	}
	defer cancel()
	defer api.Close()
	rc, err := api.RC(ctx, delta)
	if err != nil {
		return failed(c.Context, err, "show %s", delta)
	}
	if c.Bool("json") {
		err = writeJSON(e.stdout, toJSON(&rc))
	} else {
		err = writeShow(e.stdout, &rc, e.loc)
	}
	if err != nil {
		return cliutil.Exitf(cliutil.ExitFail, "%v", err)
	}
	return nil
}

func runWait(c *cli.Context, e *env) error {
	want := strings.ToUpper(c.String("status"))
	if want != wire.RCFinalized && want != wire.RCAborted {
		return cliutil.Usagef("--status %q: want finalized or aborted", c.String("status"))
	}
	ctx, cancel, api, delta, err := oneRC(c, e)
	if err != nil {
		return err
	}
	defer cancel()
	defer api.Close()
	rc, err := waitDone(ctx, api, wire.RC{Delta: delta})
	if err != nil {
		if rc.Status == "" { // nothing was read: report the error alone
			return failed(c.Context, err, "wait %s", delta)
		}
		_ = printRC(e, c.Bool("json"), &rc)
		return failed(c.Context, err, "waiting for %s", delta)
	}
	if err := printRC(e, c.Bool("json"), &rc); err != nil {
		return cliutil.Exitf(cliutil.ExitFail, "%v", err)
	}
	return outcome(&rc, want, true)
}

func runCancel(c *cli.Context, e *env) error {
	ctx, cancel, api, delta, err := oneRC(c, e)
	if err != nil {
		return err
	}
	defer cancel()
	defer api.Close()
	rc, err := cancelDone(ctx, api, delta, "canceled by dynrc pid "+strconv.Itoa(e.pid))
	if rc.Delta != "" {
		if perr := printRC(e, c.Bool("json"), &rc); perr != nil {
			return cliutil.Exitf(cliutil.ExitFail, "%v", perr)
		}
	}
	if err != nil {
		return failed(c.Context, err, "cancel %s", delta)
	}
	return nil
}

// cancelDone aborts a change and waits until it is rolled back (its new
// processes gone, its slots free), so that the job takes a new change as
// soon as the cancel returns.
func cancelDone(ctx context.Context, api rcAPI, delta, reason string) (wire.RC, error) {
	rc, err := api.CancelRC(ctx, delta, reason)
	if err != nil {
		return wire.RC{}, err
	}
	return waitDone(ctx, api, rc)
}

// failed turns an error into dynrc's exit status: busy 4, timeouts 3, an
// interrupt 130/143, usage errors 2, the rest 1. root is the command's
// context before --timeout, to tell a signal from the deadline.
func failed(root context.Context, err error, format string, args ...any) error {
	var ee *cliutil.ExitError
	if errors.As(err, &ee) {
		if format == "" {
			return err
		}
		return &cliutil.ExitError{Code: ee.Code, Err: fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ee.Err)}
	}
	code := cliutil.ExitFail
	msg := clean(err)
	switch {
	case root.Err() != nil:
		code, msg = signalExit(root), "interrupted; the change goes on (stop it with 'dynrc cancel')"
	case errors.Is(err, wire.ErrBusy):
		code = exitBusy
	case errors.Is(err, context.DeadlineExceeded):
		code, msg = exitTimeout, "timed out (--timeout); the change goes on"
	case errors.Is(err, wire.ErrTimeout):
		code = exitTimeout
	}
	if format != "" {
		msg = fmt.Sprintf(format, args...) + ": " + msg
	}
	return &cliutil.ExitError{Code: code, Err: errors.New(msg)}
}

// clean drops the "package:" prefixes of library errors for the user.
func clean(err error) string {
	s := err.Error()
	for changed := true; changed; {
		changed = false
		for _, p := range []string{"dvmdir: ", "tool: ", "master: ", "wire: "} {
			if strings.HasPrefix(s, p) {
				s, changed = s[len(p):], true
			}
		}
	}
	return s
}

// signalExit is the exit status for a context canceled by a signal.
// main.go cancels with signal.NotifyContext, whose cause names the signal.
func signalExit(ctx context.Context) int {
	if cause := context.Cause(ctx); cause != nil && strings.HasPrefix(cause.Error(), syscall.SIGTERM.String()) {
		return exitTerm
	}
	return exitInterrupt
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
