// Command slurmhosts brings a Slurm cluster on namespace hosts up and
// down by hand (scripts/slurmhosts.sh wraps it), for benchmarks and
// experiments: see internal/slurmhosts and docs/clusters.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/internal/nshosts"
	"github.com/dynrt/dynrt/internal/slurmhosts"
	"github.com/dynrt/dynrt/lib/cliutil"
	"github.com/dynrt/dynrt/lib/launcher"
)

func main() { cliutil.RunMain(Main) }

// DefaultPrefix names clusters made by hand unless --prefix says otherwise.
const DefaultPrefix = "dyn-slurm"

// Main is slurmhosts. Exit status: 0 ok, 1 error, 2 bad command line; exec
// exits with the command's status.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	prefix := func() cli.Flag {
		return &cli.StringFlag{Name: "prefix", Value: DefaultPrefix, Usage: "cluster `P`: namespaces P-h0, P-br, ..."}
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	app := &cli.App{
		Name:            "slurmhosts",
		Usage:           "a Slurm cluster (slurmctld, a slurmd per host, munge) on network-namespace test hosts",
		HideHelpCommand: true,
		Commands: []*cli.Command{
			{
				Name:      "up",
				Usage:     "build the hosts and start Slurm; prints SLURMHOSTS_* and SLURM_CONF shell assignments on stdout (eval them)",
				UsageText: "slurmhosts up [--prefix P] [-k K] [--cpus C]\n   eval \"$(scripts/slurmhosts.sh up -k 3)\"",
				Flags: []cli.Flag{prefix(),
					&cli.IntFlag{Name: "k", Value: 3, Usage: "`K` hosts h0..h<K-1>"},
					&cli.IntFlag{Name: "cpus", Value: slurmhosts.DefaultCPUs, Usage: "`C` CPUs per host as Slurm sees them"},
				},
				Action: func(c *cli.Context) error { return up(c, logger, stdout, stderr) },
			},
			{
				Name:      "down",
				Usage:     "tear the cluster down: Slurm, munge, processes, namespaces, files",
				UsageText: "slurmhosts down [--prefix P]",
				Flags:     []cli.Flag{prefix()},
				Action:    func(c *cli.Context) error { return nshosts.Down(c.Context, c.String("prefix"), logger) },
			},
			{
				Name:      "exec",
				Usage:     "run a command on a host, with SLURM_CONF set (salloc, srun, sinfo, dynrun ...)",
				UsageText: "slurmhosts exec [--prefix P] HOST CMD [ARG]...",
				Flags:     []cli.Flag{prefix()},
				Action:    func(c *cli.Context) error { return onHost(c, logger) },
			},
		},
	}
	for _, cmd := range app.Commands {
		action := cmd.Action
		cmd.Action = func(c *cli.Context) error {
			err := action(c)
			var ee *cliutil.ExitError
			if err == nil || errors.As(err, &ee) {
				return err
			}
			return &cliutil.ExitError{Code: cliutil.ExitFail, Err: err}
		}
	}
	return cliutil.Run(ctx, app, args, stdout, stderr)
}

func up(c *cli.Context, log *slog.Logger, stdout, stderr io.Writer) error {
	if c.Int("k") < 1 || c.Int("cpus") < 1 {
		return cliutil.Usagef("-k %d --cpus %d: want at least 1 each", c.Int("k"), c.Int("cpus"))
	}
	cl, err := slurmhosts.New(c.Context, slurmhosts.Config{Prefix: c.String("prefix"), K: c.Int("k"), CPUs: c.Int("cpus"), Logger: log})
	if err != nil {
		return err
	}
	var names []string
	for _, h := range cl.Hosts() {
		names = append(names, h.Name)
	}
	fmt.Fprintf(stderr, "Slurm up on %s (%d CPUs each); files in %s\n", strings.Join(names, " "), c.Int("cpus"), cl.SlurmDir())
	fmt.Fprintf(stderr, "try: scripts/slurmhosts.sh exec --prefix %s h0 salloc -N %d dynrun -n %d hostname\n", cl.Prefix(), len(names), len(names)*c.Int("cpus"))
	fmt.Fprintf(stderr, "down: scripts/slurmhosts.sh down --prefix %s\n", cl.Prefix())
	for _, v := range [][2]string{
		{"SLURMHOSTS_PREFIX", cl.Prefix()},
		{"SLURMHOSTS_HOSTS", strings.Join(names, " ")},
		{"SLURM_CONF", cl.Conf()},
	} {
		fmt.Fprintf(stdout, "%s=%s\n", v[0], launcher.ShellJoin([]string{v[1]}))
	}
	return nil
}

// onHost runs HOST CMD... with this process's standard streams and exits
// with its status.
func onHost(c *cli.Context, log *slog.Logger) error {
	if c.NArg() < 2 {
		return cliutil.Usagef("exec: want HOST CMD [ARG]...")
	}
	cl, err := slurmhosts.Open(c.String("prefix"), log)
	if err != nil {
		return err
	}
	host := c.Args().First()
	if cl.Host(host) == nil {
		return cliutil.Usagef("no host %q in cluster %s", host, cl.Prefix())
	}
	cmd := cl.Command(c.Context, host, c.Args().Tail()...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, c.App.Writer, c.App.ErrWriter
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code := ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
		return &cliutil.ExitError{Code: code}
	}
	return err
}
