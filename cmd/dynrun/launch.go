package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/lib/cliutil"
	"github.com/dynrt/dynrt/lib/dvmdir"
	"github.com/dynrt/dynrt/lib/launcher"
	"github.com/dynrt/dynrt/lib/master"
	"github.com/dynrt/dynrt/lib/mpidetect"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// killGrace is the SIGTERM→SIGKILL grace when dynrun itself is
// interrupted.
const killGrace = 2 * time.Second

// publishDelay is how long a private DVM's job runs before the DVM's
// rendezvous file is written (for tools that watch it); writing it costs
// about as much CPU as starting a process, which a short run should not
// pay while its job starts.
const publishDelay = 50 * time.Millisecond

// privatePrefix starts the name of private DVMs. They have a rendezvous
// file like any DVM (so tools can attach to their jobs), but a plain dynrun
// never picks one of them as "the only running DVM": it would die with the
// dynrun that owns it.
const privatePrefix = "private-"

// runLaunch is the launch form: dynrun [--dvm X] -n N [options] prog [args].
func runLaunch(c *cli.Context, e *env) error {
	cwd, err := os.Getwd()
	if err != nil {
		return cliutil.Exitf(cliutil.ExitFail, "%v", err)
	}
	lim, err := wire.LimitsFromEnv(e.get)
	if err != nil {
		return cliutil.Usagef("%v", err)
	}
	o, err := parseLaunch(c, cwd, lim, e)
	if err != nil {
		return err
	}
	env := jobEnv(e.list(), o.xs)
	if o.programPath, err = resolveProgram(o.argv[0], o.wdir, env); err != nil {
		return programExit(err)
	}
	resolve := func(name string) (string, bool) {
		p, err := resolveProgram(name, o.wdir, env)
		if err != nil {
			return "", false
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(o.wdir, p) // where the daemon starts it, not dynrun's directory
		}
		return p, true
	}
	switch o.pmi {
	case wire.PMIAuto:
		// An unreadable program is Unknown here; its start reports why.
		o.pmiNeed, _ = mpidetect.DetectCommand(o.argv, resolve)
	case wire.PMIFD, wire.PMIPort, wire.PMINone, wire.PMIPMIx:
		if v, err := mpidetect.DetectCommand(o.argv, resolve); err == nil {
			if w := pmiMismatch(o.pmi, o.argv[0], v); w != "" {
				fmt.Fprintln(e.stderr, w)
			}
		}
	}
	req := o.launchReq(env, cwd)

	dir, err := dvmdir.Path(e.get)
	if err != nil {
		return cliutil.Exitf(cliutil.ExitFail, "%v", err)
	}
	target, private, err := chooseDVM(e, dir, &o)
	if err != nil {
		return err
	}
	log := newLogger(e, "dynrun")
	var cl *tool.Client
	var m *master.Master
	if private {
		m, cl, err = startPrivate(c.Context, e, dir, &o, log)
	} else {
		cl, err = tool.Dial(c.Context, target, tool.Options{Name: "dynrun", Logger: log})
		if err != nil {
			err = cliutil.Exitf(cliutil.ExitFail, "%v", trimPrefix(err))
		}
	}
	if err != nil {
		return err
	}
	if m != nil {
		defer stopPrivate(m)
	}
	defer cl.Close()
	started := func() {}
	if m != nil {
		// A job that ends within publishDelay is over before anyone could
		// watch it: its DVM never writes the rendezvous file.
		started = func() { time.AfterFunc(publishDelay, m.PublishFile) }
	}
	return runJob(c.Context, e, cl, req, o, started)
}

// chooseDVM returns the DVM to run on, or private=true for a private DVM.
// Stale rendezvous files are reported (dvmdir.List removes them).
func chooseDVM(e *env, dir string, o *launchOpts) (target dvmdir.Info, private bool, err error) {
	if o.private {
		return target, true, nil
	}
	live, stale, err := dvmdir.List(dir)
	if err != nil {
		return target, false, cliutil.Exitf(cliutil.ExitFail, "%v", trimPrefix(err))
	}
	reportStale(e, stale)
	if sel := cmp.Or(o.sel, e.get(dvmdir.EnvDVM)); sel != "" {
		for _, i := range live {
			if i.ID == sel {
				return i, false, nil // the common case, without a second List
			}
		}
		target, err = dvmdir.Resolve(dir, o.sel, e.get)
		if err != nil {
			return target, false, cliutil.Exitf(cliutil.ExitFail, "%v", trimPrefix(err))
		}
		return target, false, nil
	}
	var shared []dvmdir.Info
	for _, i := range live {
		if !strings.HasPrefix(i.Name, privatePrefix) {
			shared = append(shared, i)
		}
	}
	switch len(shared) {
	case 0:
		return target, true, nil
	case 1:
		return shared[0], false, nil
	}
	var b strings.Builder
	for _, i := range shared {
		fmt.Fprintf(&b, "\n  %s  %s  pid %d  nodes %d", i.ID, dash(i.Name), i.PID, i.Nodes)
	}
	return target, false, cliutil.Exitf(cliutil.ExitFail, "%d DVMs are running; choose one with --dvm ID or $%s:%s", len(shared), dvmdir.EnvDVM, b.String())
}

// startPrivate starts a DVM inside this process for one job, like mpirun:
// one node with a slot per CPU unless --nodes/--slots say otherwise
// (further nodes are daemons forked by the local launcher).
func startPrivate(ctx context.Context, e *env, dir string, o *launchOpts, log *slog.Logger) (*master.Master, *tool.Client, error) {
	if err := dvmdir.Ensure(dir); err != nil {
		return nil, nil, cliutil.Exitf(cliutil.ExitFail, "%v", trimPrefix(err))
	}
	nodes, hosts, err := o.cluster.nodes(ctx, e)
	if err != nil {
		return nil, nil, err
	}
	if nodes == nil {
		k, s := max(o.nodes, 1), o.slots
		if s == 0 {
			s = runtime.NumCPU()
		}
		if nodes, err = launcher.VirtualNodes(k, s); err != nil {
			return nil, nil, cliutil.Usagef("%v", err)
		}
	}
	// dynrun connects as soon as the master listens, while the daemons
	// register (a connection only sends the hello until then).
	type dialed struct {
		cl  *tool.Client
		err error
	}
	dial := make(chan dialed, 1)
	listening := false
	// Further nodes are `<this binary> daemon` processes (the master's
	// default daemon command).
	cfg := master.Config{
		Dir: dir, Name: fmt.Sprintf("%s%d", privatePrefix, os.Getpid()), Nodes: nodes,
		Private: true, Logger: log, Env: e.get,
		HeartbeatInterval: o.heartbeat, HeartbeatMisses: o.misses, TreeRadix: o.treeRadix,
		Listening: func(info dvmdir.Info) {
			listening = true
			go func() {
				cl, err := tool.Dial(ctx, info, tool.Options{Name: "dynrun", Logger: log})
				dial <- dialed{cl, err}
			}()
		},
	}
	o.cluster.config(&cfg, hosts)
	m, err := master.Start(ctx, cfg)
	if err != nil {
		if listening {
			if d := <-dial; d.cl != nil {
				d.cl.Close()
			}
		}
		if ctx.Err() != nil {
			return nil, nil, cliutil.Exitf(signalExit(ctx), "interrupted while starting the DVM")
		}
		return nil, nil, cliutil.Exitf(cliutil.ExitFail, "private DVM: %v", trimPrefix(err))
	}
	d := <-dial
	if d.err != nil {
		stopMaster(m)
		return nil, nil, cliutil.Exitf(cliutil.ExitFail, "private DVM: %v", trimPrefix(d.err))
	}
	return m, d.cl, nil
}

// stopPrivate stops a private DVM as dynrun exits. Once its job has
// ended there is nothing left to stop in an orderly way unless other
// nodes' daemons run (master.StopForExit decides).
func stopPrivate(m *master.Master) {
	ctx, cancel := context.WithTimeout(context.Background(), stopWait)
	defer cancel()
	_ = m.StopForExit(ctx)
}

// runJob launches the job, streams its output and waits for its end. A
// signal to dynrun kills the job (SIGTERM, then SIGKILL after killGrace)
// and dynrun exits 130 or 143. started runs once the job has started
// (a private DVM then writes its rendezvous file).
func runJob(ctx context.Context, e *env, cl *tool.Client, req wire.JobLaunchReq, o launchOpts, started func()) error {
	out := newSink(o.out, e.stdout, e.stderr)
	cl.OnOutput(out.write)
	rep, err := cl.Launch(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return cliutil.Exitf(signalExit(ctx), "interrupted")
		}
		return launchError(err)
	}
	started()
	if req.Stdin {
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		go forwardStdin(sctx, cl, rep.Job, e.stdin, newLogger(e, "dynrun"))
	}
	end, err := cl.WaitJob(ctx, rep.Job)
	if err != nil && ctx.Err() != nil {
		// Interrupted: kill the job and wait (bounded) for its end, so that
		// nothing of it outlives dynrun.
		kctx, cancel := context.WithTimeout(context.Background(), killGrace+5*time.Second)
		defer cancel()
		if kerr := cl.KillJob(kctx, rep.Job, int(syscall.SIGTERM), killGrace); kerr == nil {
			_, _ = cl.WaitJob(kctx, rep.Job)
		}
		return cliutil.Exitf(signalExit(ctx), "job %s (%s) killed: dynrun was interrupted", rep.App, rep.Job)
	}
	if err != nil {
		return cliutil.Exitf(cliutil.ExitFail, "job %s (%s): %v", rep.App, rep.Job, trimPrefix(err))
	}
	if note := jobNote(end); note != "" {
		fmt.Fprintln(e.stderr, note)
	}
	err = jobExit(end, rep)
	var ee *cliutil.ExitError
	if o.hydraQuiet && end.Reason == wire.JobEndNone && end.Failure == wire.FailExit && errors.As(err, &ee) {
		// Hydra with -disable-auto-cleanup prints nothing when a process
		// exits with a non-zero status: its own exit status says it. A
		// first failure by a signal is reported (so does Hydra, its way).
		return &cliutil.ExitError{Code: ee.Code}
	}
	return err
}

// jobNote is the remark on a job that succeeded, if the master made one
// (processes a SUB removed that did not leave cleanly): said on stderr,
// while the exit status stays 0.
func jobNote(end wire.JobInfo) string {
	if end.State == wire.JobStateDone && end.Code == 0 && end.Msg != "" {
		return "dynrun: " + end.Msg
	}
	return ""
}

// jobExit maps the end of a job to dynrun's exit status and its one-line
// report (the master words it: job, rank, node and how it failed).
func jobExit(end wire.JobInfo, rep wire.JobLaunchReply) error {
	if end.State == wire.JobStateDone && end.Code == 0 && end.Reason == wire.JobEndNone {
		return nil
	}
	msg := end.Msg
	if msg == "" {
		msg = fmt.Sprintf("job %s (%s) %s", rep.App, rep.Job, end.State)
	}
	code := end.Code
	switch {
	case end.Reason == wire.JobEndTimeout:
		code = exitTimeout
	case code == 0:
		code = cliutil.ExitFail // a job that did not succeed never exits 0
	}
	return cliutil.Exitf(code, "%s", msg)
}

// launchError explains a refused launch.
func launchError(err error) error {
	msg := trimPrefix(err)
	switch {
	case errors.Is(err, wire.ErrNotFound):
		return cliutil.Exitf(exitNotFound, "%s", msg)
	case errors.Is(err, wire.ErrPermission):
		return cliutil.Exitf(exitNoExec, "%s", msg)
	}
	return cliutil.Exitf(cliutil.ExitFail, "launch: %s", msg)
}
