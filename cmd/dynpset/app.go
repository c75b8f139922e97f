package main

import (
	"context"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/lib/cliutil"
)

// Main is dynpset: it inspects the process sets of running jobs. Exit
// status: 0 ok, 1 error (no DVM, unknown job or set, refused), 2 bad
// command line (unknown flag, missing argument, malformed set name).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{ctx: ctx, out: stdout, errw: stderr, getenv: os.Getenv}
	dvm := func() cli.Flag {
		return &cli.StringFlag{Name: "dvm", Usage: "DVM `X`: id, name, file:PATH or uri:ADDR (default $DYNRT_DVM, else the only running DVM)"}
	}
	jsonFlag := func() cli.Flag { return &cli.BoolFlag{Name: "json", Usage: "print JSON (fields in docs/dynpset.md)"} }
	jobFlag := func() cli.Flag {
		return &cli.StringFlag{Name: "job", Aliases: []string{"j"}, Usage: "job `J`: namespace, application name or job number (default: every live job)"}
	}
	deltaFlag := func() cli.Flag {
		return &cli.StringFlag{Name: "delta", Usage: "mark the sets reference counted with respect to delta set `U` (default: the job's change in flight, else its newest delta set)"}
	}
	app := &cli.App{
		Name:            "dynpset",
		Usage:           "inspect the process sets of dynrt jobs",
		HideHelpCommand: true,
		// --ranks 0-3,8 is one part, --name a,b one (bad) name.
		DisableSliceFlagSeparator: true,
		// --dvm is accepted before the command too, as in dynrc.
		Flags: []cli.Flag{dvm()},
		Commands: []*cli.Command{
			{
				Name:      "list",
				Usage:     "list the process sets of every job (or one)",
				UsageText: "dynpset list [--job J] [--domain all|mpi|app|rte] [--json]",
				Flags: []cli.Flag{dvm(), jobFlag(), jsonFlag(), deltaFlag(),
					&cli.StringFlag{Name: "domain", Value: "all", Usage: "only sets of `D`: all, mpi (mpi://WORLD), app (mpi://app/...) or rte (delta sets)"}},
				Action: e.action(runList),
			},
			{
				Name:      "show",
				Usage:     "show one process set: members, nodes, attributes, versions",
				UsageText: "dynpset show NAME[@VERSION] [--job J] [--json]",
				Flags:     []cli.Flag{dvm(), jobFlag(), jsonFlag(), deltaFlag()},
				Action:    e.action(runShow),
			},
			{
				Name:      "tree",
				Usage:     "show the hierarchy of process sets by the subset relation",
				UsageText: "dynpset tree [--job J] [--json]",
				Flags:     []cli.Flag{dvm(), jobFlag(), jsonFlag(), deltaFlag()},
				Action:    e.action(runTree),
			},
			{
				Name:  "op",
				Usage: "compute a set operation or split a set (and, with --define, store the result)",
				UsageText: "dynpset op union|difference|intersection A[@V] B[@V] [--job J] [--define --name N [--active] [--force]] [--json]\n" +
					"dynpset op split SET[@V] (--parts K | --ranks LIST --ranks LIST ... | --by-node) [--job J] [--define [--name N ... | --prefix P] [--active] [--force]] [--json]",
				Flags: []cli.Flag{dvm(), jobFlag(), jsonFlag(),
					&cli.BoolFlag{Name: "define", Usage: "define the result in the application domain"},
					&cli.StringSliceFlag{Name: "name", Usage: "name `N` of the defined set: mpi://app/<app>/N or a full name (split: once per part)"},
					&cli.BoolFlag{Name: "active", Usage: "define it active (mpi_ps_active); tool-defined sets are inactive by default"},
					&cli.BoolFlag{Name: "force", Usage: "allow defining over an active set, or an active set, of a running application"},
					&cli.IntFlag{Name: "parts", Usage: "split: into `K` parts in rank order, sizes differing by at most one"},
					&cli.StringSliceFlag{Name: "ranks", Usage: "split: the ranks of one part, e.g. 0-3,8 (once per part; together exactly the set)"},
					&cli.BoolFlag{Name: "by-node", Usage: "split: one part per node holding members, in node order"},
					&cli.StringFlag{Name: "prefix", Usage: "split: name the parts `P`/0, P/1, ... (default with --define: mpi://app/<app>/split-<n>/<i>)"}},
				Action: e.action(runOp),
			},
			{
				Name:      "watch",
				Usage:     "print process-set events as they happen",
				UsageText: "dynpset watch [--job J] [--count N] [--json]",
				Flags: []cli.Flag{dvm(), jobFlag(), jsonFlag(),
					&cli.IntFlag{Name: "count", Usage: "stop after `N` events (0 = until interrupted or the DVM stops)"}},
				Action: e.action(runWatch),
			},
			{
				Name:      "sets",
				Usage:     "list every job of every live DVM of this user",
				UsageText: "dynpset sets [--json]",
				Flags:     []cli.Flag{jsonFlag()},
				Action:    e.action(runSets),
			},
		},
	}
	return cliutil.Run(ctx, app, interspersed(args), stdout, stderr)
}

// valueFlags are the flags of dynpset's commands that take a value.
var valueFlags = map[string]bool{"dvm": true, "job": true, "j": true, "delta": true, "domain": true, "name": true, "count": true,
	"parts": true, "ranks": true, "prefix": true}

// interspersed moves the flags of a command before its arguments, so that
// `dynpset show NAME --json` works: urfave/cli stops reading flags at the
// first argument. "--" ends the flags as usual.
func interspersed(args []string) []string {
	if len(args) < 3 || strings.HasPrefix(args[1], "-") {
		return args
	}
	flags := []string{}
	var pos []string
	rest := args[2:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--":
			pos = append(pos, rest[i:]...)
			i = len(rest)
		case len(a) > 1 && a[0] == '-' && !isNumber(a):
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if valueFlags[name] && i+1 < len(rest) {
				i++
				flags = append(flags, rest[i])
			}
		default:
			pos = append(pos, a)
		}
	}
	return append(append(append([]string{}, args[:2]...), flags...), pos...)
}

func isNumber(s string) bool {
	_, err := strconv.ParseInt(s, 10, 64)
	return err == nil
}

// env is what the commands share: where to write, how to read the
// environment, and the context of the run.
type env struct {
	ctx    context.Context
	out    io.Writer
	errw   io.Writer
	getenv func(string) string
}

func (e *env) action(f func(*env, *cli.Context) error) cli.ActionFunc {
	return func(c *cli.Context) error { return f(e, c) }
}
