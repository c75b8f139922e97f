package main

import (
	"context"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/lib/cliutil"
)

const psetIssue = "dynpset and dyntop"

// Main is dynpset: it inspects the process sets of running jobs.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	notYet := func(c *cli.Context) error { return cliutil.NotYet(c, psetIssue) }
	app := &cli.App{
		Name:  "dynpset",
		Usage: "inspect the process sets of dynrt jobs",
		Commands: []*cli.Command{
			{Name: "list", Usage: "list process sets", Action: notYet},
			{Name: "show", Usage: "show one process set", ArgsUsage: "NAME[@VERSION]", Action: notYet},
			{Name: "tree", Usage: "show the hierarchy of process sets of a job", Action: notYet},
			{Name: "op", Usage: "compute a set operation", ArgsUsage: "union|difference|intersection A B", Action: notYet},
			{Name: "watch", Usage: "print process-set events as they happen", Action: notYet},
			{Name: "sets", Usage: "list every job of every live DVM of this user", Action: notYet},
		},
	}
	return cliutil.Run(ctx, app, args, stdout, stderr)
}
