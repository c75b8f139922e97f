package main

import (
	"context"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/lib/cliutil"
)

// Exit codes of dynrun beyond cliutil's 0/1/2 (docs/dynrun.md). A job's own
// status (the first failing process's code, 128+n for signal n) is passed
// through as is.
const (
	exitTimeout   = 124 // --timeout expired, the job was killed
	exitNoExec    = 126 // the program exists but cannot be executed
	exitNotFound  = 127 // the program does not exist
	exitInterrupt = 130 // SIGINT: 128+2
	exitTerm      = 143 // SIGTERM: 128+15
)

// env is how dynrun reads its environment; tests replace nothing here but
// the process environment itself, so subprocesses see the same.
type env struct {
	get    func(string) string
	list   func() []string
	stdout io.Writer
	stderr io.Writer
	stdin  io.Reader // forwarded to rank 0 with --stdin 0
	argv0  string    // how dynrun was invoked (an absolute path may imply --prefix)
}

// Main is dynrun: it starts DVMs and launches jobs on them.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{get: os.Getenv, list: os.Environ, stdout: stdout, stderr: stderr, stdin: os.Stdin}
	if len(args) > 0 {
		e.argv0 = args[0]
	}
	if len(args) > 1 && args[1] == "-pmi_args" {
		// Exec'd as `mpiexec` by an MPICH singleton (docs/mpi.md).
		return runSingleton(ctx, args[2:], stderr)
	}
	app := &cli.App{
		Name:  "dynrun",
		Usage: "launch dynamic parallel jobs on a dynrt DVM",
		UsageText: "dynrun [--dvm X] -n N [options] prog [args...]\n" +
			"dynrun dvm start [--nodes K --slots S | --host h1:s1,h2:s2 | --hostfile F] [options]\n" +
			"dynrun dvm stop|status|list [--dvm X]",
		Description: "Everything after prog is passed to the program untouched. Without --dvm or $DYNRT_DVM\n" +
			"and with no running DVM, dynrun starts a private DVM for the job and stops it afterwards.\n" +
			"See docs/dynrun.md for exit codes and examples.",
		// `help` must stay usable as a program name: `dynrun -n 2 help`.
		HideHelpCommand:           true,
		DisableSliceFlagSeparator: true, // -x A=1,2 sets A to "1,2"
		Flags:                     launchFlags(),
		Action:                    func(c *cli.Context) error { return runLaunch(c, e) },
		Commands: []*cli.Command{
			dvmCommand(e),
			daemonCommand(e),
		},
	}
	return cliutil.Run(ctx, app, args, stdout, stderr)
}
