package main

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/lib/cliutil"
	"github.com/dynrt/dynrt/lib/daemon"
	"github.com/dynrt/dynrt/lib/launcher"
)

// daemonCommand is `dynrun daemon`, the node daemon that launchers start
// (lib/launcher builds its command lines); hidden from help. By hand:
//
//	DYNRT_TOKEN=<token> dynrun daemon --master host:port --join [--node N --slots S]
func daemonCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "daemon",
		Usage:     "run a node daemon (started by the DVM's launcher, or by hand with --join)",
		UsageText: "dynrun daemon --master ADDR [--node NAME | --node-env VAR] [--slots S] [--dvm ID] [--dir DIR] [--join] [--token-stdin] [--prefix DIR]",
		Hidden:    true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: trimDash(launcher.FlagMaster), Usage: "master address: unix socket `PATH` or HOST:PORT"},
			&cli.StringFlag{Name: trimDash(launcher.FlagNode), Usage: "node `NAME` (default with --join: the host name)"},
			&cli.IntFlag{Name: trimDash(launcher.FlagSlots), Usage: "`S` slots (default with --join: CPUs)"},
			&cli.StringFlag{Name: trimDash(launcher.FlagDVM), Usage: "DVM `ID` the master must have"},
			&cli.StringFlag{Name: trimDash(launcher.FlagDir), Usage: "rendezvous `DIR` for the daemon's socket (default: $DYNRT_DIR etc.)"},
			&cli.BoolFlag{Name: trimDash(launcher.FlagJoin), Usage: "join a running DVM (started by ssh or by hand)"},
			&cli.BoolFlag{Name: trimDash(launcher.FlagTokenStdin), Usage: "read the DVM token from the first line of stdin (else $DYNRT_TOKEN)"},
			&cli.StringFlag{Name: trimDash(launcher.FlagPrefix), Usage: "dynrt's install `DIR`: DIR/bin and DIR/lib go first in the processes' PATH and LD_LIBRARY_PATH"},
			&cli.StringFlag{Name: trimDash(launcher.FlagNodeEnv), Usage: "take the node name from environment variable `VAR` (the slurm launcher: SLURMD_NODENAME); the slots are then the master's"},
		},
		Action: func(c *cli.Context) error { return runDaemon(c, e) },
	}
}

func trimDash(flag string) string { return strings.TrimPrefix(flag, "--") }

func runDaemon(c *cli.Context, e *env) error {
	if c.Args().Present() {
		return cliutil.Usagef("daemon: unexpected argument %q", c.Args().First())
	}
	cfg := daemon.Config{
		Master: c.String("master"), Node: c.String("node"), Slots: c.Int("slots"),
		DVM: c.String("dvm"), Dir: c.String("dir"), Token: e.get(launcher.EnvToken), Prefix: c.String("prefix"),
		Env: e.get, Logger: newLogger(e, "daemon"),
	}
	if cfg.Master == "" {
		return cliutil.Usagef("daemon: --master is required")
	}
	if v := c.String("node-env"); v != "" {
		if c.IsSet("node") {
			return cliutil.Usagef("daemon: --node and --node-env exclude each other")
		}
		if cfg.Node = e.get(v); cfg.Node == "" {
			return cliutil.Exitf(cliutil.ExitFail, "daemon: --node-env %s: the variable is not set in the daemon's environment", v)
		}
		if !c.IsSet("slots") {
			cfg.Slots = 0 // the master knows the node's slots; 0 reports none
		}
	} else if c.Bool("join") {
		if cfg.Node == "" {
			cfg.Node, _ = os.Hostname()
		}
		if !c.IsSet("slots") {
			cfg.Slots = runtime.NumCPU()
		}
	}
	if cfg.Node == "" || cfg.Slots < 1 && c.String("node-env") == "" {
		return cliutil.Usagef("daemon: --node and --slots (at least 1) are required without --join")
	}
	if c.Bool("token-stdin") {
		tok, err := readToken(os.Stdin)
		if err != nil {
			return cliutil.Exitf(cliutil.ExitFail, "daemon: --token-stdin: %v", err)
		}
		cfg.Token = tok
	}
	if err := daemon.Run(c.Context, cfg); err != nil {
		return cliutil.Exitf(cliutil.ExitFail, "%v", err)
	}
	return nil
}

func readToken(r io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
	if err != nil && line == "" {
		return "", fmt.Errorf("no token on stdin: %w", err)
	}
	return strings.TrimSpace(line), nil
}

// newLogger logs to stderr at the level of $DYNRT_LOG (debug, info, warn,
// error); unset or unknown means warnings and errors only.
func newLogger(e *env, who string) *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(e.get("DYNRT_LOG"))); err != nil || e.get("DYNRT_LOG") == "" {
		lvl = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: lvl})).With("who", who)
}
