package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/lib/cliutil"
	"github.com/dynrt/dynrt/lib/launcher"
	"github.com/dynrt/dynrt/lib/mpidetect"
	"github.com/dynrt/dynrt/wire"
)

func launchFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "dvm", Usage: "run on DVM `X` (id, name, file:PATH or uri:ADDR; default $DYNRT_DVM, else the only running DVM, else a private one)"},
		&cli.IntFlag{Name: "n", Aliases: []string{"np"}, Usage: "start `N` processes (required, at least 1)"},
		&cli.StringFlag{Name: "map-by", Value: "slot", Usage: "place processes by `slot` (fill nodes in order) or node (round robin)"},
		&cli.BoolFlag{Name: "oversubscribe", Usage: "allow more processes than free slots"},
		&cli.StringFlag{Name: "name", Usage: "application name `APP` (default: the program's base name)"},
		&cli.BoolFlag{Name: "tag-output", Usage: "prefix each output line with [job,rank]<stdout>: or <stderr>:"},
		&cli.BoolFlag{Name: "timestamp-output", Usage: "prefix each output line with the time it was read (UTC)"},
		&cli.StringFlag{Name: "output-dir", Usage: "write output to `D`/<job>/rank.<r>/stdout|stderr instead of the terminal"},
		&cli.StringSliceFlag{Name: "x", Usage: "set `VAR=VAL` in the processes' environment (repeatable; VAR alone is accepted and already forwarded)"},
		&cli.StringFlag{Name: "wdir", Usage: "working directory `D` of the processes (default: the current one)"},
		&cli.StringFlag{Name: "stdin", Value: "none", Usage: "where stdin goes: none (processes read /dev/null) or 0 (rank 0)"},
		&cli.DurationFlag{Name: "timeout", Usage: "kill the job after `D` (e.g. 30s) and exit 124"},
		&cli.StringFlag{Name: "on-failure", Value: wire.OnFailureAbort, Usage: "what a lost process (non-zero exit, signal, node lost) does to the job: `P` = abort (tear it down), continue (run on without it), shrink (a SUB of the lost ranks that the application accepts like any change; docs/rc.md) or replace (a REPLACE of the lost ranks by as many new processes)"},
		&cli.BoolFlag{Name: "keep-going", Usage: "the same as --on-failure continue (MPI: the peers of a failed process are told, see docs/mpi.md)"},
		&cli.BoolFlag{Name: "disable-auto-cleanup", Usage: "mpiexec.hydra's name for --keep-going (--on-failure continue); dynrun then also prints no report of failed processes, as Hydra"},
		&cli.StringFlag{Name: "usize", Usage: "MPI_UNIVERSE_SIZE as Hydra's -usize: `U` = INFINITE (unset, the default), SYSTEM (the DVM's slot count) or a number"},
		&cli.StringFlag{Name: "pmi", Value: wire.PMIAuto, Usage: "PMI service for MPI programs (docs/mpi.md): auto (pmix for a program linking Open MPI, fd+pmix for a script or an interpreter, else fd), pmix (the daemons' PMIx server, Open MPI), fd (PMI_FD socketpair, like Hydra), fd+pmix (both: the one the program speaks is used), port (TCP PMI_PORT + PMI_ID) or none"},
		&cli.IntFlag{Name: "nodes", Usage: "private DVM only: `K` virtual nodes (default 1)"},
		&cli.IntFlag{Name: "slots", Usage: "private DVM only: `S` slots per node (default: CPUs)"},
		heartbeatFlag("private DVM only: "), heartbeatMissesFlag("private DVM only: "), treeRadixFlag("private DVM only: "),
	}, clusterFlags("private DVM only: ")...)
}

// launchOpts is the launch form's command line, checked.
type launchOpts struct {
	sel         string // --dvm
	n           int
	mapBy       string
	over        bool
	name        string
	out         outputOpts
	xs          []string // -x values
	wdir        string   // absolute
	stdin       string
	timeout     time.Duration
	keepGoing   bool              // --keep-going, --disable-auto-cleanup: --on-failure continue
	onFailure   string            // --on-failure, a wire.OnFailure* value
	hydraQuiet  bool              // --disable-auto-cleanup: no report line for processes that failed by themselves
	pmi         string            // --pmi
	pmiNeed     mpidetect.Verdict // --pmi auto: what the program's file says it needs
	universe    int32             // --usize (wire.JobLaunchReq.Universe)
	private     bool              // --nodes or --slots: always a private DVM
	nodes       int
	slots       int
	cluster     clusterOpts   // --host, --launcher etc.: a private DVM
	heartbeat   time.Duration // --heartbeat, private DVM (0: default)
	misses      int           // --heartbeat-misses, private DVM (0: default)
	treeRadix   int           // --tree-radix, private DVM (0: a star)
	argv        []string
	programPath string // argv[0] resolved
}

// parseLaunch checks the launch form's flags (usage errors exit 2), sizes
// against lim.
func parseLaunch(c *cli.Context, cwd string, lim wire.Limits, e *env) (launchOpts, error) {
	o := launchOpts{
		sel: c.String("dvm"), n: c.Int("n"), mapBy: c.String("map-by"), over: c.Bool("oversubscribe"),
		name: c.String("name"), xs: c.StringSlice("x"), stdin: c.String("stdin"), timeout: c.Duration("timeout"),
		keepGoing: c.Bool("keep-going") || c.Bool("disable-auto-cleanup"), hydraQuiet: c.Bool("disable-auto-cleanup"), pmi: c.String("pmi"), nodes: c.Int("nodes"), slots: c.Int("slots"), argv: c.Args().Slice(),
		out: outputOpts{Tag: c.Bool("tag-output"), Timestamp: c.Bool("timestamp-output"), Dir: c.String("output-dir")},
	}
	switch {
	case len(o.argv) == 0 && !c.IsSet("n"):
		return o, cliutil.Usagef("missing -n N and program (see 'dynrun --help')")
	case len(o.argv) == 0:
		return o, cliutil.Usagef("missing program to run")
	case !c.IsSet("n"):
		return o, cliutil.Usagef("missing -n N: how many processes of %s to start", o.argv[0])
	case o.n < 1:
		return o, cliutil.Usagef("-n %d: need at least 1 process", o.n)
	case lim.Procs("-n", o.n, true) != nil:
		return o, cliutil.Usagef("%v", lim.Procs("-n", o.n, true))
	case o.argv[0] == "":
		return o, cliutil.Usagef("empty program name")
	}
	var err error
	if o.heartbeat, o.misses, err = heartbeatOpts(c); err != nil {
		return o, err
	}
	if o.treeRadix, err = treeRadixOpt(c); err != nil {
		return o, err
	}
	if _, err := alloc.ParseMapBy(o.mapBy); err != nil {
		return o, cliutil.Usagef("--map-by %q: want slot or node", o.mapBy)
	}
	o.mapBy = strings.ToLower(o.mapBy)
	switch o.pmi {
	case wire.PMIAuto, wire.PMIPMIx, wire.PMIFD, wire.PMIBoth, wire.PMIPort, wire.PMINone:
	default:
		return o, cliutil.Usagef("--pmi %q: want auto, pmix, fd, fd+pmix, port or none", o.pmi)
	}
	if o.universe, err = parseUsize(c.String("usize")); err != nil {
		return o, err
	}
	if o.onFailure, err = onFailureOpt(c, o.keepGoing); err != nil {
		return o, err
	}
	if o.stdin != "none" && o.stdin != "0" {
		return o, cliutil.Usagef("--stdin %q: want none or 0", o.stdin)
	}
	if o.timeout < 0 {
		return o, cliutil.Usagef("--timeout %s: must not be negative", o.timeout)
	}
	if !c.IsSet("timeout") {
		if o.timeout, err = mpiexecTimeout(e.get(envMPIExecTimeout)); err != nil {
			return o, cliutil.Usagef("%v", err)
		}
	}
	if o.cluster, err = parseCluster(c, e); err != nil {
		return o, err
	}
	if o.cluster.kind == launcher.Join {
		return o, cliutil.Usagef("--launcher join: start the DVM with 'dynrun dvm start --launcher join' (it prints the command for each host), then run the job with --dvm")
	}
	if c.IsSet("nodes") || c.IsSet("slots") || o.cluster.listed != nil {
		o.private = true
		if o.sel != "" {
			return o, cliutil.Usagef("--nodes/--slots/--host/--hostfile size a private DVM and cannot be combined with --dvm")
		}
		if c.IsSet("nodes") && o.nodes < 1 {
			return o, cliutil.Usagef("--nodes %d: need at least 1", o.nodes)
		}
		if o.nodes > lim.Nodes {
			return o, cliutil.Usagef("%v", wire.Exceeded("--nodes", o.nodes, "nodes", lim.Nodes))
		}
		if c.IsSet("slots") && o.slots < 1 {
			return o, cliutil.Usagef("--slots %d: need at least 1", o.slots)
		}
	}
	for _, x := range o.xs {
		if k, _, _ := strings.Cut(x, "="); k == "" {
			return o, cliutil.Usagef("-x %q: want VAR or VAR=VALUE", x)
		}
	}
	o.wdir = cwd
	if w := c.String("wdir"); w != "" {
		if !filepath.IsAbs(w) {
			w = filepath.Join(cwd, w)
		}
		fi, err := os.Stat(w)
		if err != nil || !fi.IsDir() {
			return o, cliutil.Usagef("--wdir %s: not a directory", c.String("wdir"))
		}
		o.wdir = w
	}
	return o, nil
}

// envMPIExecTimeout is Hydra's time limit variable; MPICH's test harness
// sets it for every test, so dynrun in mpiexec's place must honour it.
const envMPIExecTimeout = "MPIEXEC_TIMEOUT"

// mpiexecTimeout reads MPIEXEC_TIMEOUT as Hydra does: whole seconds, and
// zero, negative or unset means no limit. --timeout, when given, wins.
func mpiexecTimeout(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, nil
	}
	s, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: want a whole number of seconds (or use --timeout)", envMPIExecTimeout, v)
	}
	if s <= 0 {
		return 0, nil
	}
	return time.Duration(s) * time.Second, nil
}

// daemonVars are the variables the daemon sets for every process
// (docs/environment.md). dynrun does not forward its own values of them: a
// dynrun started inside a job must not hand that job's identity on.
var daemonVars = []string{
	"DYNRT_DAEMON", "DYNRT_DVM", "DYNRT_JOB", "DYNRT_APP", "DYNRT_RANK", "DYNRT_UID",
	"DYNRT_NODE", "DYNRT_NODE_INDEX", "DYNRT_TOKEN", "DYNRT_SIZE", "DYNRT_NODE_ADDR",
}

// jobEnv is the environment sent with the job: dynrun's own (like mpirun,
// the whole of it) without the daemon-set variables, then -x VAR=VAL
// settings, each key once. `-x VAR` names a variable that is forwarded
// anyway; it is accepted for mpirun compatibility.
func jobEnv(base, xs []string) []string {
	idx := make(map[string]int, len(base)+len(xs))
	out := make([]string, 0, len(base)+len(xs))
	set := func(kv string) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			return
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	for _, kv := range base {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || isDaemonVar(k) {
			continue
		}
		set(kv)
	}
	for _, x := range xs {
		if strings.Contains(x, "=") {
			set(x)
		}
	}
	return out
}

func isDaemonVar(k string) bool {
	for _, v := range daemonVars {
		if k == v {
			return true
		}
	}
	return false
}

func envLookup(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, _ := strings.Cut(env[i], "="); k == key {
			return v, true
		}
	}
	return "", false
}

// defaultPath is searched when the job's environment has no PATH (what the
// daemon's process starter does too).
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// errNoExec marks a program that exists but cannot be run (exit 126).
var errNoExec = errors.New("cannot execute")

// resolveProgram finds the program the way the daemon will: a name with a
// slash relative to wdir, any other name in the PATH of the job's
// environment. It returns the path to launch: absolute for a PATH hit (the
// daemon then skips its own search), unchanged for a name with a slash.
// Errors wrap fs.ErrNotExist (exit 127) or errNoExec (exit 126).
func resolveProgram(name, wdir string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(wdir, p)
		}
		if err := checkExec(p); err != nil {
			return "", fmt.Errorf("program %q: %w", name, err)
		}
		return name, nil
	}
	path, ok := envLookup(env, "PATH")
	if !ok {
		path = defaultPath
	}
	var denied error
	for _, d := range filepath.SplitList(path) {
		if d == "" || !filepath.IsAbs(d) {
			continue // like exec.LookPath: never run something from "."
		}
		p := filepath.Join(d, name)
		err := checkExec(p)
		if err == nil {
			return p, nil
		}
		if denied == nil && !errors.Is(err, fs.ErrNotExist) {
			denied = fmt.Errorf("program %q (%s): %w", name, p, err)
		}
	}
	if denied != nil {
		return "", denied
	}
	return "", fmt.Errorf("program %q not found in the job's PATH: %w", name, fs.ErrNotExist)
}

func checkExec(p string) error {
	fi, err := os.Stat(p)
	switch {
	case err != nil && errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("no such file (%w)", fs.ErrNotExist)
	case err != nil:
		return fmt.Errorf("%w: %v", errNoExec, err)
	case fi.IsDir():
		return fmt.Errorf("%w: is a directory", errNoExec)
	case fi.Mode()&0o111 == 0:
		return fmt.Errorf("%w: permission denied", errNoExec)
	}
	return nil
}

// programExit maps a resolveProgram error to dynrun's exit status.
func programExit(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return cliutil.Exitf(exitNotFound, "%v", err)
	}
	return cliutil.Exitf(exitNoExec, "%v", err)
}

// parseUsize reads --usize the way Hydra reads -usize (its words in any
// case).
func parseUsize(v string) (int32, error) {
	switch strings.ToUpper(v) {
	case "", "INFINITE":
		return 0, nil
	case "SYSTEM":
		return wire.UniverseSlots, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n <= 0 {
		return 0, cliutil.Usagef("--usize %q: want INFINITE (unset), SYSTEM (the DVM's slots) or a positive number", v)
	}
	return int32(n), nil
}

// launchReq builds the job.launch request. Output is forwarded to dynrun,
// or with --output-dir written to files by the daemons (a relative
// directory is taken from dynrun's working directory cwd).
func (o *launchOpts) launchReq(env []string, cwd string) wire.JobLaunchReq {
	argv := append([]string{o.programPath}, o.argv[1:]...)
	req := wire.JobLaunchReq{
		Argv: argv, N: uint32(o.n), MapBy: o.mapBy, Oversubscribe: o.over, Name: o.appName(),
		Env: env, Wdir: o.wdir, OnFailure: o.onFailure, Output: wire.OutputFlags{Forward: true}, PMI: o.pmi,
		Stdin: o.stdin == "0", Universe: o.universe,
	}
	if o.pmi == wire.PMIAuto {
		req.PMINeed, req.PMIWhy = string(o.pmiNeed.Need), o.pmiNeed.Why
	}
	if o.timeout > 0 {
		req.TimeoutMS = max(o.timeout.Milliseconds(), 1) // never 0, which means no limit
	}
	if d := o.out.Dir; d != "" {
		if !filepath.IsAbs(d) {
			d = filepath.Join(cwd, d)
		}
		req.Output = wire.OutputFlags{Dir: d}
	}
	return req
}

// appName is --name, else the base name of the program as typed (the
// master sanitises and uniquifies it).
func (o *launchOpts) appName() string {
	if o.name != "" {
		return o.name
	}
	return filepath.Base(o.argv[0])
}

// onFailureOpt checks --on-failure; --keep-going and --disable-auto-cleanup
// are --on-failure continue under older names.
func onFailureOpt(c *cli.Context, keepGoing bool) (string, error) {
	p := strings.ToLower(c.String("on-failure"))
	switch p {
	case wire.OnFailureAbort, wire.OnFailureContinue, wire.OnFailureShrink, wire.OnFailureReplace:
	default:
		return "", cliutil.Usagef("--on-failure %q: want abort, continue, shrink or replace", c.String("on-failure"))
	}
	if !keepGoing {
		return p, nil
	}
	if c.IsSet("on-failure") && p != wire.OnFailureContinue {
		return "", cliutil.Usagef("--keep-going (or --disable-auto-cleanup) is --on-failure continue; it cannot be combined with --on-failure %s", p)
	}
	return wire.OnFailureContinue, nil
}
