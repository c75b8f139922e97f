// Package cliutil holds what the dynrt binaries share: their func main
// (RunMain), and around urfave/cli, running an app without os.Exit,
// turning errors into stable exit codes, and the version printer.
package cliutil

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/lib/buildinfo"
)

// Exit codes shared by the tools. Individual tools document extra codes
// (dynrc: 3 timeout, 4 busy; dynrun: the job's own status).
const (
	ExitOK    = 0
	ExitFail  = 1
	ExitUsage = 2
)

// ExitError carries the exit code a command wants. Its message is printed to
// stderr prefixed by the program name, unless empty.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return ""
	}
	return e.Err.Error()
}
func (e *ExitError) Unwrap() error { return e.Err }

// Exitf returns an ExitError with a formatted message.
func Exitf(code int, format string, args ...any) error {
	return &ExitError{Code: code, Err: fmt.Errorf(format, args...)}
}

// Usagef reports bad command-line input (exit 2).
func Usagef(format string, args ...any) error { return Exitf(ExitUsage, format, args...) }

// NotYet is what a command that is planned but not built yet returns: a
// clear message and exit 1, never fake output.
func NotYet(c *cli.Context, arrivesWith string) error {
	return Exitf(ExitFail, "%s: not implemented yet (arrives with %q)", c.Command.HelpName, arrivesWith)
}

// Run runs app with args (args[0] is the program name) and returns the exit
// code. It never calls os.Exit, so binaries' Main functions are testable.
func Run(ctx context.Context, app *cli.App, args []string, stdout, stderr io.Writer) int {
	app.Writer = stdout
	app.ErrWriter = stderr
	app.ExitErrHandler = func(*cli.Context, error) {} // we map errors ourselves
	app.OnUsageError = func(c *cli.Context, err error, isSub bool) error {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%w (see '%s --help')", err, c.Command.HelpName)}
	}
	if app.Version == "" {
		app.Version = buildinfo.Read().String()
	}
	refuseUnknownCommands(app.Name, &app.Action, app.Commands, cli.ShowAppHelp)
	err := app.RunContext(ctx, args)
	if err == nil {
		return ExitOK
	}
	code := ExitUsage // errors urfave/cli returns itself are about the command line
	var ee *ExitError
	var ce cli.ExitCoder
	switch {
	case errors.As(err, &ee):
		code = ee.Code
	case errors.As(err, &ce):
		code = ce.ExitCode()
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintf(stderr, "%s: %s\n", app.Name, msg)
	}
	return code
}

// refuseUnknownCommands gives the app, and every command with subcommands,
// an action that answers an unknown command name with a usage error (exit
// 2) where it has none: urfave/cli's fallback is its help command, which
// exits 3 ("No help topic for ...").
func refuseUnknownCommands(name string, action *cli.ActionFunc, cmds []*cli.Command, help cli.ActionFunc) {
	if len(cmds) == 0 {
		return
	}
	if *action == nil {
		*action = func(c *cli.Context) error {
			if c.Args().Present() {
				return Usagef("unknown command %q (see '%s --help')", c.Args().First(), name)
			}
			return help(c)
		}
	}
	for _, cmd := range cmds {
		refuseUnknownCommands(name+" "+cmd.Name, &cmd.Action, cmd.Subcommands, cli.ShowSubcommandHelp)
	}
}

// Lookup returns the value of the string flag name from the nearest of
// c's contexts that set it, so that a flag defined on the app and on its
// commands may come before or after the command name.
func Lookup(c *cli.Context, name string) string {
	for _, cc := range c.Lineage() {
		if cc.IsSet(name) {
			return cc.String(name)
		}
	}
	return ""
}
