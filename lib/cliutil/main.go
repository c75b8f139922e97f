package cliutil

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// MainFunc is the testable body of a binary: it runs with the arguments
// (program name first) and the output streams it is given and returns the
// exit code.
type MainFunc func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// RunMain is a binary's whole func main: it runs main with the process's
// arguments and standard streams, under a context that SIGINT or SIGTERM
// cancels, and exits with main's code.
func RunMain(main MainFunc) {
	os.Exit(runMain(main, os.Args, os.Stdout, os.Stderr))
}

func runMain(main MainFunc, args []string, stdout, stderr io.Writer) int {
	// After main returns, the signals take their default action again.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return main(ctx, args, stdout, stderr)
}
