package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/lib/cliutil"
	"github.com/dynrt/dynrt/lib/dvmdir"
	"github.com/dynrt/dynrt/lib/launcher"
	"github.com/dynrt/dynrt/lib/master"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// stopWait bounds how long `dvm stop` waits for the master to be gone
// after it acknowledged the stop (its jobs get their grace period first).
const stopWait = 15 * time.Second

// startWait bounds how long `dvm start --daemonize` waits for the DVM.
const startWait = 60 * time.Second

func dvmFlag() cli.Flag {
	return &cli.StringFlag{Name: "dvm", Usage: "DVM `X`: id, name, file:PATH or uri:ADDR (default $DYNRT_DVM, else the only running DVM)"}
}

func dvmCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:            "dvm",
		Usage:           "start, stop and inspect distributed virtual machines",
		HideHelpCommand: true,
		Subcommands: []*cli.Command{
			{
				Name:      "start",
				Usage:     "start a DVM (in the foreground unless --daemonize)",
				UsageText: "dynrun dvm start [--nodes K --slots S | --host h1:s1,h2:s2 | --hostfile F] [--launcher local|ssh|join|slurm] [--launch-agent CMD] [--prefix DIR] [--daemonize] [--report-uri FILE|-] [--name NAME] [--bind ADDR]",
				Flags: append([]cli.Flag{
					&cli.IntFlag{Name: "nodes", Usage: "`K` virtual nodes on this host (default 1)"},
					&cli.IntFlag{Name: "slots", Usage: "`S` slots per node (default: CPUs; with --host/--hostfile: for hosts without a count, default 1)"},
					&cli.BoolFlag{Name: "daemonize", Usage: "run the DVM in the background; print its id once it is ready"},
					&cli.StringFlag{Name: "report-uri", Usage: "write the DVM id and addresses to `FILE` (- for stdout) once ready"},
					&cli.StringFlag{Name: "name", Usage: "human `NAME` of the DVM (usable with --dvm)"},
					&cli.StringFlag{Name: "id", Hidden: true, Usage: "DVM id (set by --daemonize for its child)"},
					heartbeatFlag(""), heartbeatMissesFlag(""), treeRadixFlag(""),
				}, clusterFlags("")...),
				Action: func(c *cli.Context) error { return runDVMStart(c, e) },
			},
			{
				Name:   "stop",
				Usage:  "stop a DVM and every job on it",
				Flags:  []cli.Flag{dvmFlag()},
				Action: func(c *cli.Context) error { return runDVMStop(c, e) },
			},
			{
				Name:  "status",
				Usage: "show a DVM's nodes, slots and jobs",
				Flags: []cli.Flag{
					dvmFlag(),
					&cli.BoolFlag{Name: "json", Usage: "print JSON (fields in docs/dynrun.md)"},
				},
				Action: func(c *cli.Context) error { return runDVMStatus(c, e) },
			},
			dvmGrowCommand(e),
			dvmShrinkCommand(e),
			{
				Name:   "list",
				Usage:  "list the live DVMs of this user (and remove stale rendezvous files)",
				Action: func(c *cli.Context) error { return runDVMList(c, e) },
			},
		},
	}
}

// dvmNodes turns the node flags of `dvm start` into a node list of at
// most lim.Nodes nodes: the host list of cl (node 0 this host) or virtual
// nodes. hosts[i] is the host of node i's daemon (nil: all here).
func dvmNodes(c *cli.Context, e *env, cl *clusterOpts, lim wire.Limits) (nodes []alloc.Node, hosts []string, err error) {
	nodes, hosts, err = cl.nodes(c.Context, e)
	if err == nil && nodes == nil {
		nodes, err = virtualNodes(c, lim)
	}
	if err == nil && len(nodes) > lim.Nodes {
		err = cliutil.Usagef("%v", wire.Exceeded("dvm start: nodes", len(nodes), "nodes", lim.Nodes))
	}
	return nodes, hosts, err
}

func virtualNodes(c *cli.Context, lim wire.Limits) ([]alloc.Node, error) {
	k, s := 1, runtime.NumCPU()
	if c.IsSet("nodes") {
		k = c.Int("nodes")
	}
	if k > lim.Nodes { // before a list of k nodes is made
		return nil, cliutil.Usagef("%v", wire.Exceeded("--nodes", k, "nodes", lim.Nodes))
	}
	if c.IsSet("slots") {
		s = c.Int("slots")
	}
	nodes, err := launcher.VirtualNodes(k, s)
	if err != nil {
		return nil, cliutil.Usagef("%v", err)
	}
	return nodes, nil
}

func runDVMStart(c *cli.Context, e *env) error {
	if c.Args().Present() {
		return cliutil.Usagef("dvm start: unexpected argument %q", c.Args().First())
	}
	lim, err := wire.LimitsFromEnv(e.get)
	if err != nil {
		return cliutil.Usagef("%v", err)
	}
	cl, err := parseCluster(c, e)
	if err != nil {
		return err
	}
	nodes, hosts, err := dvmNodes(c, e, &cl, lim)
	if err != nil {
		return err
	}
	kind := cl.kind
	dir, err := dvmdir.Open(e.get)
	if err != nil {
		return cliutil.Exitf(cliutil.ExitFail, "%v", err)
	}
	if c.IsSet("name") {
		// Checked here too (master.Start does) so that --daemonize fails
		// before it forks, with the usage exit status for a bad name.
		if err := dvmdir.CheckName(c.String("name")); err != nil {
			return cliutil.Usagef("--name: %s", trimPrefix(err))
		}
		if err := dvmdir.CheckNameFree(dir, c.String("name")); err != nil {
			return cliutil.Exitf(cliutil.ExitFail, "dvm start: --name: %s", trimPrefix(err))
		}
	}
	if c.Bool("daemonize") {
		return daemonize(c, e, dir, &cl)
	}
	exe, err := os.Executable()
	if err != nil {
		return cliutil.Exitf(cliutil.ExitFail, "cannot find my own binary for the daemons: %v", err)
	}
	hb, misses, err := heartbeatOpts(c)
	if err != nil {
		return err
	}
	radix, err := treeRadixOpt(c)
	if err != nil {
		return err
	}
	log := newLogger(e, "master")
	cfg := master.Config{
		Dir: dir, ID: c.String("id"), Name: c.String("name"), Nodes: nodes,
		DaemonCommand: []string{exe, "daemon"}, Logger: log, Env: e.get,
		HeartbeatInterval: hb, HeartbeatMisses: misses, TreeRadix: radix,
	}
	cl.config(&cfg, hosts)
	if kind == launcher.Join && len(nodes) > 1 {
		cfg.RegisterTimeout = joinWait
		cfg.Listening = func(info dvmdir.Info) { printJoin(e.stderr, info, nodes) }
	}
	if cl.info != "" {
		log.Info("dvm start: launcher " + cl.info)
	}
	m, err := master.Start(c.Context, cfg)
	if err != nil {
		return cliutil.Exitf(cliutil.ExitFail, "dvm start: %s", trimPrefix(err))
	}
	info := m.Info()
	if err := reportURI(c.String("report-uri"), info, e.stdout); err != nil {
		stopMaster(m)
		return cliutil.Exitf(cliutil.ExitFail, "--report-uri: %v", err)
	}
	fmt.Fprintln(e.stderr, readyLine(info.ID, nodes))
	select {
	case <-m.Done():
	case <-c.Context.Done():
		fmt.Fprintf(e.stderr, "dynrun: stopping DVM %s\n", info.ID)
	}
	if err := stopMaster(m); err != nil {
		return cliutil.Exitf(cliutil.ExitFail, "dvm stop: %v", err)
	}
	return nil
}

// heartbeatFlag and heartbeatMissesFlag tune failure detection
// (docs/reliability.md); prefix says where they apply.
func heartbeatFlag(prefix string) cli.Flag {
	return &cli.DurationFlag{Name: "heartbeat", Usage: prefix + "the master pings each daemon every `D` (default " + master.DefaultHeartbeatInterval.String() + ")"}
}

func heartbeatMissesFlag(prefix string) cli.Flag {
	return &cli.IntFlag{Name: "heartbeat-misses", Usage: prefix + "declare a node down after `N` unanswered heartbeats in a row (default " + strconv.Itoa(master.DefaultHeartbeatMisses) + "; the first makes it suspect)"}
}

// heartbeatOpts reads --heartbeat and --heartbeat-misses (0: the defaults).
func heartbeatOpts(c *cli.Context) (time.Duration, int, error) {
	hb, misses := c.Duration("heartbeat"), c.Int("heartbeat-misses")
	if c.IsSet("heartbeat") && hb < time.Millisecond {
		return 0, 0, cliutil.Usagef("--heartbeat %s: want at least 1ms", hb)
	}
	if c.IsSet("heartbeat-misses") && misses < 1 {
		return 0, 0, cliutil.Usagef("--heartbeat-misses %d: want at least 1", misses)
	}
	return hb, misses, nil
}

// treeRadixFlag chooses the tree of daemons pushes go down (docs/scale.md).
func treeRadixFlag(prefix string) cli.Flag {
	return &cli.IntFlag{Name: "tree-radix", Usage: prefix + "send a push that goes to more than `R` daemons down a tree of daemons of radix R (each passes it on to up to R others), as PRRTE's routed radix and Slurm's TreeWidth; 0 = from the master to each (default)"}
}

// treeRadixOpt reads --tree-radix.
func treeRadixOpt(c *cli.Context) (int, error) {
	r := c.Int("tree-radix")
	if r < 0 || r > maxTreeRadix {
		return 0, cliutil.Usagef("--tree-radix %d: want 0 (no tree) to %d", r, maxTreeRadix)
	}
	return r, nil
}

// maxTreeRadix bounds --tree-radix: a wider tree is a star.
const maxTreeRadix = 4096

// daemonizeForwards are the flags of dvm start that --daemonize passes on
// to its child as given (TestDaemonizeForwardsEveryFlag); it decides
// --id, --prefix and --launcher itself and keeps --daemonize and
// --report-uri.
var daemonizeForwards = []string{"nodes", "slots", "host", "hostfile", "name", "bind", "heartbeat", "heartbeat-misses", "tree-radix", "launch-agent", "net"}

// joinWait is how long `dvm start --launcher join` waits for the daemons
// started by hand.
const joinWait = 10 * time.Minute

// printJoin tells the user how to start the daemons of a join DVM.
func printJoin(w io.Writer, info dvmdir.Info, nodes []alloc.Node) {
	fmt.Fprintf(w, "dynrun: DVM %s waits (up to %s) for the daemons of %d nodes; run on each node's host:\n", info.ID, joinWait, len(nodes)-1)
	for _, n := range nodes[1:] {
		spec := launcher.NodeSpec{Name: n.Name, Slots: n.Slots, DVM: info.ID, Master: info.TCP, Token: info.Token}
		fmt.Fprintf(w, "  %s\n", launcher.JoinCommand(spec))
	}
	fmt.Fprintf(w, "dynrun: (on this host, --master %s works without the token)\n", info.Socket)
}

func stopMaster(m *master.Master) error {
	ctx, cancel := context.WithTimeout(context.Background(), stopWait)
	defer cancel()
	return m.Stop(ctx)
}

// readyLine is what a foreground `dvm start` prints once the DVM is up.
func readyLine(id string, nodes []alloc.Node) string {
	return fmt.Sprintf("dynrun: DVM %s ready: %s, %s (stop it with 'dynrun dvm stop --dvm %s')",
		id, counted(len(nodes), "node"), counted(totalSlots(nodes), "slot"), id)
}

// counted is "1 node", "2 nodes", "0 slots".
func counted(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func totalSlots(nodes []alloc.Node) int {
	n := 0
	for _, x := range nodes {
		n += x.Slots
	}
	return n
}

// reportText is what --report-uri writes: the DVM id on the first line,
// then one line per master address in the form --dvm accepts
// (uri:unix:///path, uri:tcp://host:port; TCP also needs $DYNRT_TOKEN).
func reportText(info dvmdir.Info) string {
	var b strings.Builder
	b.WriteString(info.ID + "\n")
	if info.Socket != "" {
		b.WriteString("uri:unix://" + info.Socket + "\n")
	}
	if info.TCP != "" {
		b.WriteString("uri:tcp://" + info.TCP + "\n")
	}
	return b.String()
}

func reportURI(dest string, info dvmdir.Info, stdout io.Writer) error {
	switch dest {
	case "":
		return nil
	case "-":
		_, err := io.WriteString(stdout, reportText(info))
		return err
	}
	// Atomically: a script may be polling for the file.
	tmp := dest + ".tmp"
	if err := os.WriteFile(tmp, []byte(reportText(info)), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, dest)
}

// daemonize re-executes `dvm start` detached from the terminal (new
// session, stdio on a log file in the DVM's socket directory, which goes
// away with the DVM when it stops, and is kept as dvmdir.CrashLog when its
// master dies without cleaning up) and waits until the child has written the rendezvous
// file, or has died.
func daemonize(c *cli.Context, e *env, dir string, cl *clusterOpts) error {
	id := c.String("id")
	if id == "" {
		var err error
		if id, err = dvmdir.NewID(); err != nil {
			return cliutil.Exitf(cliutil.ExitFail, "%v", err)
		}
	}
	sockDir, err := dvmdir.SocketDir(dir, id)
	if err != nil {
		return cliutil.Exitf(cliutil.ExitFail, "%v", err)
	}
	logPath := filepath.Join(sockDir, dvmdir.LogName)
	// Read back through this descriptor: a DVM that fails removes its
	// directory, log included.
	logf, err := os.OpenFile(logPath, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return cliutil.Exitf(cliutil.ExitFail, "%v", err)
	}
	defer logf.Close()
	exe, err := os.Executable()
	if err != nil {
		return cliutil.Exitf(cliutil.ExitFail, "cannot find my own binary: %v", err)
	}
	// The child runs as an absolute path: it gets the prefix decided here
	// (possibly none) rather than one implied by that path.
	args := []string{exe, "dvm", "start", "--id", id, "--prefix=" + cl.prefix}
	if !cl.auto {
		args = append(args, "--launcher", cl.kind) // else the child chooses the same, and says why
	}
	for _, f := range daemonizeForwards {
		if c.IsSet(f) {
			v := c.Value(f)
			if f == "hostfile" {
				v, _ = filepath.Abs(c.String(f)) // the child runs in /
			}
			args = append(args, "--"+f+"="+fmt.Sprint(v))
		}
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(e.list(), dvmdir.EnvDir+"="+dir)
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		_ = dvmdir.Remove(dir, id)
		return cliutil.Exitf(cliutil.ExitFail, "dvm start --daemonize: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	file := dvmdir.File(dir, id)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	wait := startWait
	if cl.kind == launcher.Join {
		wait = joinWait + 5*time.Second
	}
	deadline := time.After(wait)
	// What the DVM logs while starting (warnings, join instructions) is
	// relayed to our stderr; the log file itself goes away with the DVM.
	relayed := int64(0)
	relay := func() {
		n, _ := io.Copy(e.stderr, io.NewSectionReader(logf, relayed, 1<<30))
		relayed += n
	}
	fail := func(why string) error {
		relay()
		_ = dvmdir.Remove(dir, id)
		return cliutil.Exitf(cliutil.ExitFail, "dvm start --daemonize: %s", why)
	}
	for n := 0; ; {
		select {
		case err := <-exited:
			return fail(fmt.Sprintf("the DVM exited before it was ready (%v)", err))
		case <-deadline:
			_ = cmd.Process.Kill()
			<-exited
			return fail(fmt.Sprintf("the DVM was not ready after %s", wait))
		case <-c.Context.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
			<-exited
			_ = dvmdir.Remove(dir, id)
			return cliutil.Exitf(signalExit(c.Context), "dvm start --daemonize: interrupted")
		case <-tick.C:
		}
		info, err := dvmdir.Read(file)
		if err != nil {
			if n++; n%50 == 0 {
				relay()
			}
			continue
		}
		awaitReadyLine(logf, info.ID, exited)
		relay()
		// stdout gets the id (for DVM=$(dynrun dvm start --daemonize)),
		// or the whole report with --report-uri -.
		dest := c.String("report-uri")
		if dest != "-" {
			if _, err := fmt.Fprintln(e.stdout, info.ID); err != nil {
				return cliutil.Exitf(cliutil.ExitFail, "%v", err)
			}
		}
		if err := reportURI(dest, info, e.stdout); err != nil {
			_ = cmd.Process.Signal(syscall.SIGTERM) // nobody would know how to reach it
			<-exited
			return cliutil.Exitf(cliutil.ExitFail, "--report-uri: %v (DVM stopped)", err)
		}
		return nil
	}
}

// awaitReadyLine waits, at most readyLineWait, until the daemonized DVM
// has logged its ready line: the child publishes its rendezvous file
// first and prints the line just after, so without the wait the line was
// now and then not relayed, and a master killed at once left an empty log,
// which is not kept as its crash log. A child that exits meanwhile ends
// the wait (its status is put back for the caller).
func awaitReadyLine(logf *os.File, id string, exited chan error) {
	mark := []byte("DVM " + id + " ready")
	deadline := time.Now().Add(readyLineWait)
	for {
		if b, _ := io.ReadAll(io.NewSectionReader(logf, 0, 1<<20)); bytes.Contains(b, mark) || time.Now().After(deadline) {
			return
		}
		select {
		case err := <-exited:
			exited <- err
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// readyLineWait bounds awaitReadyLine.
const readyLineWait = 2 * time.Second

// attach connects to the DVM selected by --dvm (or $DYNRT_DVM, or the only
// live one), after reporting stale rendezvous files.
func attach(ctx context.Context, e *env, sel string) (*tool.Client, error) {
	dir, err := dvmdir.Path(e.get)
	if err != nil {
		return nil, cliutil.Exitf(cliutil.ExitFail, "%v", err)
	}
	if _, stale, err := dvmdir.List(dir); err == nil { // else Attach reports it
		reportStale(e, stale)
	}
	cl, err := tool.Attach(ctx, tool.Options{Sel: sel, Dir: dir, Env: e.get, Name: "dynrun", Logger: newLogger(e, "dynrun")})
	if err != nil {
		return nil, cliutil.Exitf(cliutil.ExitFail, "%v", trimPrefix(err))
	}
	return cl, nil
}

// trimPrefix drops the "package:" prefix of library errors for the user.
func trimPrefix(err error) string {
	s := err.Error()
	for _, p := range []string{"dvmdir: ", "tool: ", "master: ", "launcher: "} {
		s = strings.TrimPrefix(s, p)
	}
	return s
}

// reportStale lists the rendezvous files of dead DVMs on stderr (List
// removed them).
func reportStale(e *env, stale []dvmdir.Stale) {
	for _, s := range stale {
		what := "removed stale"
		if !s.Removed {
			what = "ignoring"
		}
		fmt.Fprintf(e.stderr, "dynrun: %s DVM file %s: %s\n", what, s.Path, s.Reason)
		if s.Log != "" {
			fmt.Fprintf(e.stderr, "dynrun: the log of DVM %s is kept in %s\n", s.Info.ID, s.Log)
		}
	}
}

func runDVMStop(c *cli.Context, e *env) error {
	cl, err := attach(c.Context, e, c.String("dvm"))
	if err != nil {
		return err
	}
	defer cl.Close()
	info := cl.Info()
	ctx, cancel := context.WithTimeout(c.Context, stopWait)
	defer cancel()
	if err := cl.StopDVM(ctx, 0); err != nil {
		return cliutil.Exitf(cliutil.ExitFail, "dvm stop %s: %v", info.ID, err)
	}
	// The master closes the connection before it has finished exiting:
	// wait for it to be gone, so that a script can rely on the stop.
	for info.PID > 0 && info.Path != "" {
		if _, err := os.Stat(info.Path); errors.Is(err, os.ErrNotExist) {
			break
		}
		select {
		case <-ctx.Done():
			return cliutil.Exitf(cliutil.ExitFail, "dvm stop %s: the master (pid %d) is still running", info.ID, info.PID)
		case <-time.After(5 * time.Millisecond):
		}
	}
	fmt.Fprintf(e.stdout, "DVM %s stopped\n", info.ID)
	return nil
}

func runDVMStatus(c *cli.Context, e *env) error {
	cl, err := attach(c.Context, e, c.String("dvm"))
	if err != nil {
		return err
	}
	defer cl.Close()
	st, err := cl.State(c.Context)
	if err != nil {
		return cliutil.Exitf(cliutil.ExitFail, "dvm status: %v", err)
	}
	s := toStatusJSON(st, cl.Info().Name)
	if c.Bool("json") {
		return writeStatusJSON(e.stdout, s)
	}
	return writeStatus(e.stdout, s)
}

func runDVMList(c *cli.Context, e *env) error {
	dir, err := dvmdir.Path(e.get)
	if err != nil {
		return cliutil.Exitf(cliutil.ExitFail, "%v", err)
	}
	live, stale, err := dvmdir.List(dir)
	if err != nil {
		return cliutil.Exitf(cliutil.ExitFail, "%v", trimPrefix(err))
	}
	reportStale(e, stale)
	if len(live) == 0 {
		fmt.Fprintf(e.stderr, "dynrun: no running DVM in %s\n", dir)
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tPID\tNODES\tUP\tSOCKET")
	now := time.Now()
	for _, i := range live {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", i.ID, dash(i.Name), i.PID, i.Nodes, i.Uptime(now), dash(i.Socket))
	}
	return tw.Flush()
}

// signalExit is the exit status for a context canceled by a signal:
// 130 for SIGINT, 143 for SIGTERM. main.go cancels with
// signal.NotifyContext, whose cause names the signal; any other cause is
// taken as SIGINT.
func signalExit(ctx context.Context) int {
	if cause := context.Cause(ctx); cause != nil && strings.HasPrefix(cause.Error(), syscall.SIGTERM.String()) {
		return exitTerm
	}
	return exitInterrupt
}
