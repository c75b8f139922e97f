package main

import (
	"context"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/lib/cliutil"
)

const dvmIssue = "The DVM"

// Main is dynrun: it starts DVMs and launches jobs on them.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	notYet := func(c *cli.Context) error { return cliutil.NotYet(c, dvmIssue) }
	app := &cli.App{
		Name:      "dynrun",
		Usage:     "launch dynamic parallel jobs on a dynrt DVM",
		UsageText: "dynrun [--dvm X] -n N [options] prog [args...]\ndynrun dvm start|stop|status|list",
		Action:    notYet,
		Commands: []*cli.Command{
			{
				Name:  "dvm",
				Usage: "start, stop and inspect distributed virtual machines",
				Subcommands: []*cli.Command{
					{Name: "start", Usage: "start a DVM", Action: notYet},
					{Name: "stop", Usage: "stop a DVM and every job on it", Action: notYet},
					{Name: "status", Usage: "show a DVM's nodes, slots and jobs", Action: notYet},
					{Name: "list", Usage: "list the live DVMs of this user", Action: notYet},
				},
			},
		},
	}
	return cliutil.Run(ctx, app, args, stdout, stderr)
}
