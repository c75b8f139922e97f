package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/lib/cliutil"
	"github.com/dynrt/dynrt/lib/pset"
	"github.com/dynrt/dynrt/lib/tool"
	"github.com/dynrt/dynrt/wire"
)

// callTimeout bounds every request a command makes (watch excepted).
const callTimeout = 15 * time.Second

// failf is a runtime failure (exit 1).
func failf(format string, args ...any) error { return cliutil.Exitf(cliutil.ExitFail, format, args...) }

// fail wraps an error from the runtime as exit 1, keeping its message.
func fail(err error) error {
	var ee *cliutil.ExitError
	if errors.As(err, &ee) {
		return err
	}
	return &cliutil.ExitError{Code: cliutil.ExitFail, Err: err}
}

// attach connects to the DVM selected by --dvm / $DYNRT_DVM.
func (e *env) attach(c *cli.Context) (*tool.Client, error) {
	ctx, cancel := context.WithTimeout(e.ctx, callTimeout)
	defer cancel()
	cl, err := tool.Attach(ctx, tool.Options{Sel: cliutil.Lookup(c, "dvm"), Env: e.getenv, Name: "dynpset"})
	if err != nil {
		return nil, fail(err)
	}
	return cl, nil
}

func (e *env) call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(e.ctx, callTimeout)
}

// jobs lists the live jobs of the DVM.
func (e *env) jobs(cl *tool.Client) ([]wire.JobInfo, error) {
	ctx, cancel := e.call()
	defer cancel()
	js, err := cl.Jobs(ctx, false)
	if err != nil {
		return nil, fail(err)
	}
	return js, nil
}

// describeJobs names the jobs for error messages: "dvm.1 (lu), dvm.2 (x)".
func describeJobs(js []wire.JobInfo) string {
	if len(js) == 0 {
		return "none is running"
	}
	parts := make([]string, len(js))
	for i, j := range js {
		parts[i] = j.Job + " (" + j.App + ")"
	}
	return "running: " + strings.Join(parts, ", ")
}

// findJob resolves a --job value: a namespace, an application name or a
// job number.
func findJob(js []wire.JobInfo, sel, dvm string) (wire.JobInfo, error) {
	for _, j := range js {
		if j.Job == sel || j.App == sel || strconv.FormatUint(uint64(j.ID), 10) == sel {
			return j, nil
		}
	}
	return wire.JobInfo{}, failf("DVM %s has no job %q (%s)", dvm, sel, describeJobs(js))
}

// selectJobs returns the jobs a command looks at: the one named by --job,
// or all of them.
func (e *env) selectJobs(c *cli.Context, cl *tool.Client) ([]wire.JobInfo, error) {
	js, err := e.jobs(cl)
	if err != nil {
		return nil, err
	}
	if sel := c.String("job"); sel != "" {
		j, err := findJob(js, sel, cl.Info().ID)
		if err != nil {
			return nil, err
		}
		return []wire.JobInfo{j}, nil
	}
	return js, nil
}

// jobForName picks the job a set name belongs to: --job if given, else
// the job whose application the name carries (mpi://app/<app>/...,
// mpi://rte/<app>/...), else the only live job.
func (e *env) jobForName(c *cli.Context, cl *tool.Client, names ...string) (wire.JobInfo, error) {
	js, err := e.jobs(cl)
	if err != nil {
		return wire.JobInfo{}, err
	}
	if sel := c.String("job"); sel != "" {
		return findJob(js, sel, cl.Info().ID)
	}
	app := ""
	for _, name := range names {
		n, _, err := pset.ParseRef(name)
		if err != nil || n.App == "" {
			continue
		}
		if app != "" && n.App != app {
			return wire.JobInfo{}, cliutil.Usagef("%s and %s belong to different applications (%s, %s); sets of one job only", names[0], names[1], app, n.App)
		}
		app = n.App
	}
	if app != "" {
		for _, j := range js {
			if j.App == app {
				return j, nil
			}
		}
		return wire.JobInfo{}, failf("no live job runs application %q in DVM %s (%s)", app, cl.Info().ID, describeJobs(js))
	}
	switch len(js) {
	case 1:
		return js[0], nil
	case 0:
		return wire.JobInfo{}, failf("DVM %s has no live job", cl.Info().ID)
	}
	return wire.JobInfo{}, cliutil.Usagef("several jobs are running (%s): say which with --job", describeJobs(js))
}

// psets fetches the latest version of every set of job, with members.
func (e *env) psets(cl *tool.Client, job string) ([]wire.PsetInfo, error) {
	ctx, cancel := e.call()
	defer cancel()
	sets, err := cl.Psets(ctx, wire.PsetListReq{Job: job, Members: true})
	if err != nil {
		return nil, fail(err)
	}
	return sets, nil
}

// marked fetches job j's sets and the delta set its reference-counted
// marks refer to (markDelta): what list and tree show per job.
func (e *env) marked(c *cli.Context, cl *tool.Client, j wire.JobInfo) ([]wire.PsetInfo, string, error) {
	sets, err := e.psets(cl, j.Job)
	if err != nil {
		return nil, "", err
	}
	delta, err := markDelta(c, j, sets)
	if err != nil {
		return nil, "", err
	}
	return sets, delta, nil
}

// markDelta chooses the delta set U for the reference-counted marks: the
// --delta flag, else the job's change in flight, else its newest delta set.
func markDelta(c *cli.Context, j wire.JobInfo, sets []wire.PsetInfo) (string, error) {
	if d := c.String("delta"); d != "" {
		n, err := pset.Parse(d)
		if err != nil || n.Kind != pset.KindDelta {
			return "", cliutil.Usagef("--delta %q is not a delta set name (mpi://rte/<app>/rc/<n>)", d)
		}
		if !slices.ContainsFunc(sets, func(s wire.PsetInfo) bool { return s.Name == n.String() }) {
			return "", failf("job %s has no delta set %s (%s)", j.Job, d, deltaNames(sets))
		}
		return n.String(), nil
	}
	if j.Delta != "" {
		return j.Delta, nil
	}
	best, bestN := "", uint64(0)
	for _, s := range sets {
		if n, err := pset.Parse(s.Name); err == nil && n.Kind == pset.KindDelta && n.RC >= bestN {
			best, bestN = s.Name, n.RC
		}
	}
	return best, nil
}

func deltaNames(sets []wire.PsetInfo) string {
	var out []string
	for _, s := range sets {
		if n, err := pset.Parse(s.Name); err == nil && n.Kind == pset.KindDelta {
			out = append(out, s.Name)
		}
	}
	if len(out) == 0 {
		return "it has none"
	}
	return "it has " + strings.Join(out, ", ")
}

func setNames(sets []wire.PsetInfo) string {
	out := make([]string, len(sets))
	for i, s := range sets {
		out[i] = s.Name
	}
	return strings.Join(out, ", ")
}

// writeJSON prints v indented, with a final newline.
func (e *env) writeJSON(v any) error {
	enc := json.NewEncoder(e.out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func args(c *cli.Context, n int, what string) ([]string, error) {
	if c.NArg() != n {
		return nil, cliutil.Usagef("%s: want %s, got %d argument(s) (see '%s --help')", c.Command.Name, what, c.NArg(), c.Command.HelpName)
	}
	return c.Args().Slice(), nil
}

func noArgs(c *cli.Context) error {
	if c.NArg() > 0 {
		return cliutil.Usagef("%s: unexpected argument %q (see '%s --help')", c.Command.Name, c.Args().First(), c.Command.HelpName)
	}
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func tsString(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return time.Unix(0, ns).Format("15:04:05.000")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
