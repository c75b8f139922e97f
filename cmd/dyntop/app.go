package main

import (
	"context"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/lib/cliutil"
)

// Main is dyntop: a live terminal monitor of a DVM.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := &cli.App{
		Name:      "dyntop",
		Usage:     "watch a dynrt DVM live: nodes, slots, jobs, process sets, resource changes",
		UsageText: "dyntop [--dvm X] [--readonly] [--once]",
		Action: func(c *cli.Context) error {
			return cliutil.Exitf(cliutil.ExitFail, "dyntop: not implemented yet (arrives with %q)", "dynpset and dyntop")
		},
	}
	return cliutil.Run(ctx, app, args, stdout, stderr)
}
