package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/lib/cliutil"
	"github.com/dynrt/dynrt/lib/launcher"
	"github.com/dynrt/dynrt/wire"
)

// `dynrun dvm grow` and `dynrun dvm shrink`: a DVM that gains and loses
// nodes while it runs (docs/clusters.md, "Growing and shrinking the DVM").

// growSlack is what a grow or shrink waits beyond its own bound for the
// master's answer.
const growSlack = 30 * time.Second

func dvmGrowCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "grow",
		Usage:     "add nodes to a running DVM",
		UsageText: "dynrun dvm grow [--dvm X] (--host h3:8,h4:8 | --hostfile F | --nodes K [--slots S]) [--timeout D]",
		Flags: []cli.Flag{
			dvmFlag(),
			&cli.StringFlag{Name: "host", Usage: "new nodes as `h3:s3,h4:s4` (ssh and join DVMs; a host without :s gets --slots or 1)"},
			&cli.StringFlag{Name: "hostfile", Usage: "new nodes from `FILE` (the format of dvm start --hostfile)"},
			&cli.IntFlag{Name: "nodes", Usage: "`K` more virtual nodes on the master's host (local DVMs), or K nodes of a new Slurm job (slurm DVMs)"},
			&cli.IntFlag{Name: "slots", Usage: "`S` slots per new node (--nodes: default those of node 0; --host: for hosts without a count, default 1)"},
			&cli.DurationFlag{Name: "timeout", Usage: "give up when the new daemons have not registered within `D` (default 30s; join: 10m)"},
		},
		Action: func(c *cli.Context) error { return runDVMGrow(c, e) },
	}
}

func dvmShrinkCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "shrink",
		Usage:     "take a node out of a running DVM",
		UsageText: "dynrun dvm shrink [--dvm X] --node NAME [--drain] [--timeout D]",
		Flags: []cli.Flag{
			dvmFlag(),
			&cli.StringFlag{Name: "node", Usage: "the node `NAME` that leaves (as dvm status lists it)"},
			&cli.BoolFlag{Name: "drain", Usage: "move the node's processes out first: a SUB resource change of each job that runs there"},
			&cli.DurationFlag{Name: "timeout", Usage: "--drain: each job must accept its SUB within `D` (default 30s), else the shrink fails and the node stays"},
		},
		Action: func(c *cli.Context) error { return runDVMShrink(c, e) },
	}
}

// growRequest turns the flags of `dvm grow` into a request.
func growRequest(c *cli.Context, lim wire.Limits) (wire.DVMGrowReq, error) {
	var req wire.DVMGrowReq
	host, file := c.String("host"), c.String("hostfile")
	given := 0
	for _, set := range []bool{host != "", file != "", c.IsSet("nodes")} {
		if set {
			given++
		}
	}
	if given != 1 {
		return req, cliutil.Usagef("dvm grow: give exactly one of --host, --hostfile and --nodes")
	}
	if c.IsSet("timeout") && c.Duration("timeout") <= 0 {
		return req, cliutil.Usagef("--timeout %s: want a positive duration", c.Duration("timeout"))
	}
	req.TimeoutMS = c.Duration("timeout").Milliseconds()
	if c.IsSet("nodes") {
		k, s := c.Int("nodes"), c.Int("slots")
		switch {
		case k < 1:
			return req, cliutil.Usagef("--nodes must be at least 1, got %d", k)
		case k > lim.Nodes:
			return req, cliutil.Usagef("%v", wire.Exceeded("--nodes", k, "nodes", lim.Nodes))
		case c.IsSet("slots") && (s < 1 || s > launcher.MaxSlots):
			return req, cliutil.Usagef("--slots must be between 1 and %d, got %d", launcher.MaxSlots, s)
		}
		req.Nodes, req.Slots = uint32(k), uint32(s)
		return req, nil
	}
	var nodes []alloc.Node
	var err error
	if host != "" {
		nodes, err = launcher.ParseHosts(host, c.Int("slots"))
	} else {
		nodes, err = launcher.ReadHostfile(file, c.Int("slots"))
	}
	if err != nil {
		return req, cliutil.Usagef("%s", trimPrefix(err))
	}
	if len(nodes) > lim.Nodes {
		return req, cliutil.Usagef("%v", wire.Exceeded("dvm grow: nodes", len(nodes), "nodes", lim.Nodes))
	}
	for _, n := range nodes {
		req.Hosts = append(req.Hosts, wire.GrowHost{Name: n.Name, Slots: uint32(n.Slots)})
	}
	return req, nil
}

func runDVMGrow(c *cli.Context, e *env) error {
	if c.Args().Present() {
		return cliutil.Usagef("dvm grow: unexpected argument %q", c.Args().First())
	}
	lim, err := wire.LimitsFromEnv(e.get)
	if err != nil {
		return cliutil.Usagef("%v", err)
	}
	req, err := growRequest(c, lim)
	if err != nil {
		return err
	}
	cl, err := attach(c.Context, e, c.String("dvm"))
	if err != nil {
		return err
	}
	defer cl.Close()
	info := cl.Info()
	st, err := cl.State(c.Context)
	if err != nil {
		return cliutil.Exitf(cliutil.ExitFail, "dvm grow: %v", err)
	}
	wait := time.Duration(req.TimeoutMS) * time.Millisecond
	join := st.Launcher == launcher.Join
	if join {
		if len(req.Hosts) == 0 {
			return cliutil.Usagef("dvm grow: DVM %s joins daemons started by hand: name the new nodes with --host or --hostfile", info.ID)
		}
		if wait == 0 {
			wait = joinWait
			req.TimeoutMS = wait.Milliseconds()
		}
	}
	if wait == 0 {
		wait = 30 * time.Second // the master's default register timeout
	}
	ctx, cancel := context.WithTimeout(c.Context, wait+growSlack)
	defer cancel()
	if join {
		// Nobody starts these daemons but the user: tell them how once the
		// master expects them (a daemon that registers earlier is refused).
		slots := map[string]int{}
		for _, h := range req.Hosts {
			slots[h.Name] = int(h.Slots)
		}
		var mu sync.Mutex
		first := true
		if _, err := cl.Subscribe(ctx, wire.EventSubReq{Kinds: []string{wire.EvNodeJoining}}, func(ev wire.Event) {
			mu.Lock()
			defer mu.Unlock()
			s, ok := slots[ev.Node]
			if !ok {
				return // another grow's node
			}
			delete(slots, ev.Node)
			if first {
				fmt.Fprintf(e.stderr, "dynrun: DVM %s waits (up to %s) for the daemons of %d new nodes; run on each node's host:\n", info.ID, wait, len(req.Hosts))
				first = false
			}
			spec := launcher.NodeSpec{Name: ev.Node, Slots: s, DVM: info.ID, Master: info.TCP, Token: info.Token}
			fmt.Fprintf(e.stderr, "  %s\n", launcher.JoinCommand(spec))
		}); err != nil {
			return cliutil.Exitf(cliutil.ExitFail, "dvm grow: %v", err)
		}
	}
	nodes, err := cl.Grow(ctx, req)
	if err != nil {
		return cliutil.Exitf(cliutil.ExitFail, "dvm grow: %s", trimPrefix(err))
	}
	for _, n := range nodes {
		fmt.Fprintf(e.stdout, "node %s joined DVM %s: %d slots on host %s (index %d, daemon pid %d)\n", n.Name, info.ID, n.Slots, dash(n.Host), n.Index, n.PID)
	}
	return nil
}

func runDVMShrink(c *cli.Context, e *env) error {
	if c.Args().Present() {
		return cliutil.Usagef("dvm shrink: unexpected argument %q", c.Args().First())
	}
	name := c.String("node")
	if name == "" {
		return cliutil.Usagef("dvm shrink: which node? give --node NAME (dynrun dvm status lists them)")
	}
	if c.IsSet("timeout") && !c.Bool("drain") {
		return cliutil.Usagef("dvm shrink: --timeout bounds a drain; give --drain too")
	}
	if c.IsSet("timeout") && c.Duration("timeout") <= 0 {
		return cliutil.Usagef("--timeout %s: want a positive duration", c.Duration("timeout"))
	}
	cl, err := attach(c.Context, e, c.String("dvm"))
	if err != nil {
		return err
	}
	defer cl.Close()
	info := cl.Info()
	confirm := c.Duration("timeout")
	// A drain's SUBs may wait for a change in flight first, then for their
	// own confirm timeout and the removed processes' grace.
	ctx, cancel := context.WithTimeout(c.Context, 2*max(confirm, 30*time.Second)+growSlack)
	defer cancel()
	rep, err := cl.Shrink(ctx, wire.DVMShrinkReq{Node: name, Drain: c.Bool("drain"), TimeoutMS: confirm.Milliseconds()})
	if err != nil {
		return cliutil.Exitf(cliutil.ExitFail, "dvm shrink: %s", trimPrefix(err))
	}
	for _, rc := range rep.Drained {
		fmt.Fprintf(e.stdout, "job %s: %s removed ranks %s from node %s\n", rc.Job, rc.Delta, rc.Ranks, name)
	}
	fmt.Fprintf(e.stdout, "node %s left DVM %s\n", name, info.ID)
	return nil
}
