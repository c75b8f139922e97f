package main

import (
	"context"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/lib/cliutil"
)

const rcIssue = "Dynamic resource changes end to end"

// Main is dynrc: it triggers and inspects resource changes of running jobs.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	notYet := func(c *cli.Context) error { return cliutil.NotYet(c, rcIssue) }
	app := &cli.App{
		Name:  "dynrc",
		Usage: "grow, shrink and inspect resource changes of running dynrt jobs",
		Commands: []*cli.Command{
			{Name: "add", Usage: "add processes to a running job", Action: notYet},
			{Name: "sub", Usage: "remove processes from a running job", Action: notYet},
			{Name: "list", Usage: "list resource changes", Action: notYet},
			{Name: "show", Usage: "show one resource change with its step timings", ArgsUsage: "DELTA", Action: notYet},
			{Name: "wait", Usage: "wait until a resource change is finalized or aborted", ArgsUsage: "DELTA", Action: notYet},
			{Name: "cancel", Usage: "abort a resource change in flight", ArgsUsage: "DELTA", Action: notYet},
			{Name: "script", Usage: "run a scripted scenario of changes (add N, sub N, wait, sleep D)", ArgsUsage: "[FILE|-]", Action: notYet},
		},
	}
	return cliutil.Run(ctx, app, args, stdout, stderr)
}
