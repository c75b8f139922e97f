// Command nshosts builds and removes namespace test hosts by hand
// (scripts/nshosts.sh wraps it): see Main and docs/clusters.md.
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
	"github.com/dynrt/dynrt/lib/cliutil"
	"github.com/dynrt/dynrt/lib/launcher"
)

func main() { cliutil.RunMain(Main) }

// DefaultPrefix names clusters made by hand unless --prefix says otherwise.
const DefaultPrefix = "dyn-hosts"

// Main is nshosts. Exit status: 0 ok, 1 error, 2 bad command line; exec and
// ssh exit with the command's status.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	prefix := func() cli.Flag {
		return &cli.StringFlag{Name: "prefix", Value: DefaultPrefix, Usage: "cluster `P`: namespaces P-h0, P-br, ..."}
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	app := &cli.App{
		Name:            "nshosts",
		Usage:           "network-namespace test hosts with their own hostname, address and sshd",
		HideHelpCommand: true,
		Commands: []*cli.Command{
			{
				Name:  "up",
				Usage: "build a cluster; prints NSHOSTS_* shell assignments on stdout (eval them)",
				UsageText: "nshosts up [--prefix P] [-k K | --hosts a,b,c] [--no-ssh] [--env KEY=VALUE]... [--owner PID]\n" +
					"   eval \"$(scripts/nshosts.sh up -k 3)\"",
				Flags: []cli.Flag{prefix(),
					&cli.IntFlag{Name: "k", Value: 3, Usage: "`K` hosts h0..h<K-1>"},
					&cli.StringFlag{Name: "hosts", Usage: "host names `a,b,c` (instead of -k)"},
					&cli.BoolFlag{Name: "no-ssh", Usage: "no sshd, no keys"},
					&cli.StringSliceFlag{Name: "env", Usage: "`KEY=VALUE` set in every ssh session (repeatable), e.g. PATH=/dir/with/dynrun:/usr/bin:/bin"},
					&cli.IntFlag{Name: "owner", Usage: "the cluster belongs to process `PID`: `reap` tears it down once that process is gone (default: none, only down removes it)"},
				},
				Action: func(c *cli.Context) error { return up(c, logger, stdout, stderr) },
			},
			{
				Name:      "down",
				Usage:     "tear a cluster down: processes, namespaces, files",
				UsageText: "nshosts down [--prefix P]",
				Flags:     []cli.Flag{prefix()},
				Action: func(c *cli.Context) error {
					return nshosts.Down(c.Context, c.String("prefix"), logger)
				},
			},
			{
				Name:      "exec",
				Usage:     "run a command on a host (in its namespaces, as if typed there)",
				UsageText: "nshosts exec [--prefix P] HOST CMD [ARG]...",
				Flags:     []cli.Flag{prefix()},
				Action: func(c *cli.Context) error {
					return onHost(c, logger, func(cl *nshosts.Cluster, host string, argv []string) *exec.Cmd {
						return cl.Command(c.Context, host, argv...)
					})
				},
			},
			{
				Name:      "ssh",
				Usage:     "ssh from the first host to HOST with the cluster's ssh config",
				UsageText: "nshosts ssh [--prefix P] HOST [CMD]...",
				Flags:     []cli.Flag{prefix()},
				Action: func(c *cli.Context) error {
					return onHost(c, logger, func(cl *nshosts.Cluster, host string, argv []string) *exec.Cmd {
						return cl.SSH(c.Context, cl.Hosts()[0].Name, host, argv...)
					})
				},
			},
			{
				Name:      "list",
				Usage:     "list the clusters (of prefix P, or all)",
				UsageText: "nshosts list [P]",
				Action: func(c *cli.Context) error {
					infos, err := nshosts.List(c.Args().First())
					if err != nil {
						return err
					}
					for _, in := range infos {
						owner := "by hand"
						if in.Owner != 0 {
							owner = fmt.Sprintf("owner pid %d", in.Owner)
						}
						if in.Stale {
							owner += ", stale"
						}
						fmt.Fprintf(stdout, "%s\thosts %s\t%s\t%s\n", in.Prefix, strings.Join(in.Hosts, ","), in.Dir, owner)
					}
					return nil
				},
			},
			{
				Name:      "reap",
				Usage:     "tear down the clusters of prefix P whose owning test process is gone",
				UsageText: "nshosts reap P",
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return cliutil.Usagef("reap: want one prefix")
					}
					return nshosts.Reap(c.Context, c.Args().First(), logger)
				},
			},
		},
	}
	for _, cmd := range app.Commands {
		cmd.Action = failure(cmd.Action)
	}
	return cliutil.Run(ctx, app, args, stdout, stderr)
}

// failure makes the errors of action exit 1 (not urfave/cli's 2, which
// means a bad command line), without the package's "nshosts: " prefix
// (cliutil.Run prints the program's name).
func failure(action cli.ActionFunc) cli.ActionFunc {
	return func(c *cli.Context) error {
		err := action(c)
		var ee *cliutil.ExitError
		if err == nil || errors.As(err, &ee) {
			return err
		}
		return &cliutil.ExitError{Code: cliutil.ExitFail, Err: errors.New(strings.TrimPrefix(err.Error(), "nshosts: "))}
	}
}

func up(c *cli.Context, log *slog.Logger, stdout, stderr io.Writer) error {
	if why := nshosts.Unsupported(!c.Bool("no-ssh")); why != "" {
		return cliutil.Exitf(cliutil.ExitFail, "%s", why)
	}
	cfg := nshosts.Config{Prefix: c.String("prefix"), K: c.Int("k"), SSH: !c.Bool("no-ssh"), Env: c.StringSlice("env"),
		Owner: c.Int("owner"), Logger: log}
	if cfg.Owner < 0 || c.IsSet("owner") && syscall.Kill(cfg.Owner, 0) != nil {
		return cliutil.Usagef("--owner %d: no such process", cfg.Owner)
	}
	if h := c.String("hosts"); h != "" {
		cfg.Hosts = strings.Split(h, ",")
	}
	if cfg.K < 1 {
		return cliutil.Usagef("-k %d: want at least 1", cfg.K)
	}
	cl, err := nshosts.New(c.Context, cfg)
	if err != nil {
		return err
	}
	var names []string
	for _, h := range cl.Hosts() {
		names = append(names, h.Name)
		fmt.Fprintf(stderr, "%s\t%s\tnetns %s\tDYNRT_DIR=%s\n", h.Name, h.Addr, h.NetNS, h.Dir)
	}
	fmt.Fprintf(stderr, "ssh: scripts/nshosts.sh ssh --prefix %s h1 hostname   (or, on a host: ssh -F %s h1 hostname)\n", cl.Prefix(), cl.SSHConfig())
	fmt.Fprintf(stderr, "down: scripts/nshosts.sh down --prefix %s\n", cl.Prefix())
	vars := [][2]string{
		{"NSHOSTS_PREFIX", cl.Prefix()},
		{"NSHOSTS_DIR", cl.Dir()},
		{"NSHOSTS_HOSTS", strings.Join(names, " ")},
		{"NSHOSTS_NETWORK", cl.Network().String()},
	}
	if cfg.SSH {
		vars = append(vars, [2]string{"NSHOSTS_SSH_CONFIG", cl.SSHConfig()})
	}
	for _, v := range vars {
		fmt.Fprintf(stdout, "%s=%s\n", v[0], launcher.ShellJoin([]string{v[1]}))
	}
	return nil
}

// onHost runs the command mk builds for HOST CMD... with this process's
// standard streams and exits with its status.
func onHost(c *cli.Context, log *slog.Logger, mk func(*nshosts.Cluster, string, []string) *exec.Cmd) error {
	if c.NArg() < 1 {
		return cliutil.Usagef("%s: want HOST [CMD]...", c.Command.Name)
	}
	cl, err := nshosts.Open(c.String("prefix"), log)
	if err != nil {
		return err
	}
	host, argv := c.Args().First(), c.Args().Tail()
	if cl.Host(host) == nil {
		var names []string
		for _, h := range cl.Hosts() {
			names = append(names, h.Name)
		}
		return cliutil.Usagef("no host %q in cluster %s (hosts: %s)", host, cl.Prefix(), strings.Join(names, " "))
	}
	if len(argv) == 0 && c.Command.Name == "exec" {
		argv = []string{os.Getenv("SHELL")}
		if argv[0] == "" {
			argv[0] = "/bin/sh"
		}
	}
	cmd := mk(cl, host, argv)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, c.App.Writer, c.App.ErrWriter
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code := ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal()) // as a shell reports it
		}
		return &cliutil.ExitError{Code: code}
	}
	return err
}
