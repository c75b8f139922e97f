package main

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/lib/cliutil"
	"github.com/dynrt/dynrt/lib/launcher"
	"github.com/dynrt/dynrt/lib/master"
)

// Environment variables of the ssh launcher (docs/environment.md); the
// flags win.
const (
	envSSH    = "DYNRT_SSH"    // --launch-agent
	envPrefix = "DYNRT_PREFIX" // --prefix
)

// clusterFlags are the flags that say where a DVM's daemons run and how
// they are started, shared by `dvm start` and the launch form (where they
// size a private DVM; prefix says so in the help).
func clusterFlags(prefix string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "host", Aliases: []string{"H"}, Usage: prefix + "nodes as `h1:s1,h2:s2` (a host without :s gets --slots or 1; repeats add up; this host takes processes only if listed)"},
		&cli.StringFlag{Name: "hostfile", Usage: prefix + "nodes from `FILE`: lines 'host slots=N', 'host:N' or 'host', # comments"},
		&cli.StringFlag{Name: "launcher", Usage: prefix + "how daemons are started: `local` (this host), ssh, join or slurm (default: ssh with --host/--hostfile, else slurm inside a Slurm allocation unless --nodes/--slots, else local)"},
		&cli.StringFlag{Name: "launch-agent", Usage: prefix + "ssh `CMD` and its options, split as shell words (default $" + envSSH + ", else 'ssh -o BatchMode=yes')"},
		&cli.StringFlag{Name: "prefix", Usage: prefix + "dynrt is installed in `DIR` on the remote hosts: the daemon is DIR/bin/dynrun, DIR/bin and DIR/lib go first in PATH and LD_LIBRARY_PATH (default $" + envPrefix + ", else implied by running dynrun as /abs/DIR/bin/dynrun)"},
		&cli.StringFlag{Name: "bind", Usage: prefix + "TCP listen `ADDR` of the master (default 127.0.0.1:0; with ssh, join or slurm 0.0.0.0:0, published as a concrete address)"},
		&cli.StringFlag{Name: "net", Usage: prefix + "addresses the DVM publishes come from `NETS`: networks (198.18.0.0/24) or interface names, comma-separated (default: any; see docs/clusters.md)"},
	}
}

// clusterOpts is what clusterFlags said, checked.
type clusterOpts struct {
	listed []alloc.Node // --host/--hostfile entries; nil: none given
	kind   string       // launcher
	agent  []string     // ssh command; nil: the launcher's default
	prefix string
	bind   string
	net    launcher.Net
	auto   bool   // kind was chosen without --launcher (slurm inside an allocation)
	why    string // how kind was chosen, for slurm
	info   string // slurm: the allocation and why, for dvm status (set by nodes)
}

// parseCluster reads clusterFlags. argv0 is how dynrun was invoked (an
// absolute /DIR/bin/dynrun implies --prefix DIR, as with mpirun).
func parseCluster(c *cli.Context, e *env) (clusterOpts, error) {
	var o clusterOpts
	host, file := c.String("host"), c.String("hostfile")
	var err error
	switch {
	case host != "" && file != "":
		return o, cliutil.Usagef("--host and --hostfile exclude each other")
	case (host != "" || file != "") && c.IsSet("nodes"):
		return o, cliutil.Usagef("--nodes sizes virtual nodes; with --host/--hostfile the hosts are the nodes")
	case host != "":
		o.listed, err = launcher.ParseHosts(host, c.Int("slots"))
	case file != "":
		o.listed, err = launcher.ReadHostfile(file, c.Int("slots"))
	}
	if err != nil {
		return o, cliutil.Usagef("%v", err)
	}
	o.kind = c.String("launcher")
	switch {
	case o.kind == "" && o.listed != nil:
		o.kind = launcher.SSH
	case o.kind == "" && !c.IsSet("nodes") && !c.IsSet("slots") && e.get(launcher.EnvSlurmJobID) != "":
		// Inside a Slurm allocation the nodes are the allocation's, as
		// with mpirun; --nodes/--slots ask for virtual nodes here instead.
		o.kind, o.auto = launcher.Slurm, true
		o.why = "chosen because " + launcher.EnvSlurmJobID + " is set; --launcher local or --nodes/--slots keep the DVM on this host"
	case o.kind == "":
		o.kind = launcher.Local
	case o.kind == launcher.Slurm:
		for _, f := range []string{"host", "hostfile", "nodes", "slots"} {
			if c.IsSet(f) {
				return o, cliutil.Usagef("--launcher slurm takes the nodes and slots from the Slurm allocation; drop --%s", f)
			}
		}
		o.why = "--launcher slurm"
	case o.kind != launcher.Local && o.kind != launcher.SSH && o.kind != launcher.Join:
		return o, cliutil.Usagef("--launcher %q: want %s", o.kind, strings.Join(launcher.Kinds(), ", "))
	}
	agent, origin := c.String("launch-agent"), "--launch-agent"
	if !c.IsSet("launch-agent") {
		agent, origin = e.get(envSSH), "$"+envSSH
	}
	if agent != "" {
		if o.agent, err = launcher.ParseAgent(origin, agent); err != nil {
			return o, cliutil.Usagef("%v", err)
		}
	}
	switch {
	case c.IsSet("prefix"):
		o.prefix = c.String("prefix") // "" turns an implied prefix off
	case e.get(envPrefix) != "":
		o.prefix = e.get(envPrefix)
	default:
		o.prefix = impliedPrefix(e.argv0)
	}
	if o.prefix != "" && !filepath.IsAbs(o.prefix) {
		return o, cliutil.Usagef("--prefix %q: want an absolute directory (the same on every host)", o.prefix)
	}
	o.bind = c.String("bind")
	if o.net, err = launcher.ParseNet(c.String("net")); err != nil {
		return o, cliutil.Usagef("%v", err)
	}
	return o, nil
}

// impliedPrefix is the prefix that running dynrun by an absolute path
// implies, as Open MPI's mpirun does: /DIR/bin/dynrun gives DIR. Only
// when the binary sits in a directory named bin, so that DIR/bin/dynrun is
// this very program; any other path (a build directory) implies nothing.
func impliedPrefix(argv0 string) string {
	if !filepath.IsAbs(argv0) {
		return ""
	}
	dir := filepath.Dir(filepath.Clean(argv0))
	if filepath.Base(dir) != "bin" {
		return ""
	}
	return filepath.Dir(dir)
}

// nodes turns the host list into the DVM's nodes and their hosts (node 0
// is this host, launcher.HostNodes). Without a host list it returns nil.
func (o *clusterOpts) nodes(ctx context.Context, e *env) ([]alloc.Node, []string, error) {
	if o.kind == launcher.Slurm {
		sd, err := slurmSetup(ctx, e, o.why)
		if err != nil {
			return nil, nil, cliutil.Exitf(cliutil.ExitFail, "%s", trimPrefix(err))
		}
		o.info = sd.info
		hosts := make([]string, len(sd.nodes))
		for i, n := range sd.nodes {
			hosts[i] = n.Name
		}
		return sd.nodes, hosts, nil
	}
	if o.listed == nil {
		return nil, nil, nil
	}
	self := launcher.LocalSelf(ctx)
	nodes, hosts := launcher.HostNodes(o.listed, self, launcher.ResolveHosts(ctx, self, o.listed))
	if o.kind == launcher.Local && len(nodes) > 1 {
		return nil, nil, cliutil.Usagef("--launcher local starts daemons on this host only, but the host list names other hosts (%s...); use --launcher ssh or join, or --nodes/--slots for virtual nodes here", nodes[1].Name)
	}
	return nodes, hosts, nil
}

// config fills the launcher fields of a master configuration.
func (o *clusterOpts) config(cfg *master.Config, hosts []string) {
	cfg.Launcher, cfg.Hosts, cfg.SSH, cfg.Prefix, cfg.Bind, cfg.Net = o.kind, hosts, o.agent, o.prefix, o.bind, o.net
	cfg.LauncherInfo = o.info
}
