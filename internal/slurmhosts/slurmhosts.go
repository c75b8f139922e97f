// Package slurmhosts brings up a real Slurm (Debian's slurm-wlm) on the
// network-namespace hosts of internal/nshosts, for tests and benchmarks of
// the slurm launcher: slurmctld on the first host, one slurmd per host
// (`slurmd -N <host>` in the host's namespaces), and one munged for all of
// them. Nothing shared is touched: munged has its own key and socket,
// Slurm its own configuration, state, spool, pid and log files, all in the
// cluster's temporary directory, and every daemon runs in a namespace of
// the cluster, so tearing the cluster down (nshosts) ends them all.
//
// The configuration is the smallest that runs jobs without cgroups:
// SlurmUser=root, proctrack/linuxproc, task/none, no accounting, the hosts'
// CPU counts given (SlurmdParameters=config_overrides) and one partition
// of whole nodes (OverSubscribe=EXCLUSIVE, as MPI clusters often are), so
// that `salloc -N 3` gets every CPU of three hosts. Slurm 22.05's slurmd
// loads a cgroup plugin whatever the configuration; cgroup.conf points
// the v1 plugin at an empty directory, which it only checks exists.
//
// Commands for the cluster need SLURM_CONF (Cluster.Command sets it).
package slurmhosts

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/dynrt/dynrt/internal/nshosts"
)

// DefaultCPUs is the CPU count each host declares to Slurm.
const DefaultCPUs = 4

// readyWait bounds the wait for every node to be idle.
const readyWait = 30 * time.Second

// Programs the cluster needs (slurm-wlm and munge).
var programs = []string{"munged", "slurmctld", "slurmd", "salloc", "srun", "sbatch", "scancel", "scontrol", "sinfo", "squeue"}

// Unsupported says why a Slurm cluster cannot be built here ("" when it
// can): what nshosts needs, then the Slurm and munge programs.
func Unsupported() string {
	if why := nshosts.Unsupported(false); why != "" {
		return why
	}
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Sprintf("needs %s: install slurm-wlm and munge (make deps-slurm)", p)
		}
	}
	return ""
}

// Config describes a Slurm cluster.
type Config struct {
	Prefix string // names of the namespaces and files (nshosts.Config.Prefix)
	K      int    // hosts h0..h<K-1> (0: 3)
	CPUs   int    // CPUs of each host as Slurm sees them (0: DefaultCPUs)
	Logger *slog.Logger
}

// Cluster is a Slurm cluster on namespace hosts.
type Cluster struct {
	*nshosts.Cluster
	dir string // Slurm's files: <cluster dir>/slurm
}

// Dir returns the directory of Slurm's files (configuration, logs).
func (c *Cluster) SlurmDir() string { return c.dir }

// Conf returns the path of slurm.conf (SLURM_CONF).
func (c *Cluster) Conf() string { return filepath.Join(c.dir, "slurm.conf") }

// New builds the hosts and starts Slurm on them. On error everything is
// torn down again and the error says which daemon failed, with the end
// of its log.
func New(ctx context.Context, cfg Config) (*Cluster, error) {
	if why := Unsupported(); why != "" {
		return nil, errors.New(why)
	}
	nc, err := nshosts.New(ctx, nshosts.Config{Prefix: cfg.Prefix, K: cfg.K, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	c, err := Setup(ctx, nc, cfg.CPUs)
	if err != nil {
		if cerr := nc.Close(); cerr != nil {
			err = fmt.Errorf("%w (and tearing down: %v)", err, cerr)
		}
		return nil, err
	}
	return c, nil
}

// Open returns the Slurm cluster with this prefix made by another process
// (scripts/slurmhosts.sh up).
func Open(prefix string, log *slog.Logger) (*Cluster, error) {
	nc, err := nshosts.Open(prefix, log)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Cluster: nc, dir: filepath.Join(nc.Dir(), "slurm")}
	if _, err := os.Stat(c.Conf()); err != nil {
		return nil, fmt.Errorf("slurmhosts: cluster %s has no Slurm (%v); it was made by nshosts alone", prefix, err)
	}
	return c, nil
}

// Setup starts Slurm on the hosts of nc: munged and slurmctld on the first
// host, a slurmd on each, and waits until every node is idle.
func Setup(ctx context.Context, nc *nshosts.Cluster, cpus int) (*Cluster, error) {
	if cpus <= 0 {
		cpus = DefaultCPUs
	}
	c := &Cluster{Cluster: nc, dir: filepath.Join(nc.Dir(), "slurm")}
	for _, d := range []string{"state", "spool", "log", "cgroup"} {
		if err := os.MkdirAll(filepath.Join(c.dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("slurmhosts: %w", err)
		}
	}
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("slurmhosts: munge key: %w", err)
	}
	if err := os.WriteFile(filepath.Join(c.dir, "munge.key"), key, 0o400); err != nil {
		return nil, fmt.Errorf("slurmhosts: %w", err)
	}
	hosts := make([]NodeConf, len(nc.Hosts()))
	for i, h := range nc.Hosts() {
		hosts[i] = NodeConf{Name: h.Name, Addr: h.Addr.String(), CPUs: cpus}
	}
	files := map[string]string{
		"slurm.conf":  SlurmConf(c.dir, strings.ReplaceAll(nc.Prefix(), "-", ""), hosts),
		"cgroup.conf": CgroupConf(c.dir),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(c.dir, name), []byte(text), 0o644); err != nil {
			return nil, fmt.Errorf("slurmhosts: %w", err)
		}
	}
	first := hosts[0].Name
	// The daemons fork into the background; they live in the hosts'
	// namespaces, where the cluster's teardown finds them.
	if err := c.daemon(ctx, first, "munged", "munged.log", "munged",
		"--key-file="+filepath.Join(c.dir, "munge.key"), "--socket="+c.mungeSocket(),
		"--pid-file="+filepath.Join(c.dir, "munged.pid"), "--log-file="+filepath.Join(c.dir, "log", "munged.log"),
		"--seed-file="+filepath.Join(c.dir, "munge.seed"), "--force", "--num-threads=2"); err != nil {
		return nil, err
	}
	if err := c.daemon(ctx, first, "slurmctld", "slurmctld.log", "slurmctld", "-f", c.Conf()); err != nil {
		return nil, err
	}
	for _, h := range hosts {
		if err := c.daemon(ctx, h.Name, "slurmd on "+h.Name, "slurmd-"+h.Name+".log", "slurmd", "-f", c.Conf(), "-N", h.Name); err != nil {
			return nil, err
		}
	}
	if err := c.waitIdle(ctx, len(hosts)); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Cluster) mungeSocket() string { return filepath.Join(c.dir, "munge.sock") }

// daemon runs a daemonizing program on host and reports its log's end if
// it fails.
func (c *Cluster) daemon(ctx context.Context, host, what, log string, argv ...string) error {
	out, err := c.Command(ctx, host, argv...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("slurmhosts: %s did not start: %v: %s%s", what, err, strings.TrimSpace(string(out)), c.logTail(log))
	}
	return nil
}

// logTail is the end of a log file of the cluster, for errors.
func (c *Cluster) logTail(name string) string {
	b, err := os.ReadFile(filepath.Join(c.dir, "log", name))
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return "\n" + name + ":\n  " + strings.Join(lines, "\n  ")
}

// waitIdle waits until sinfo shows k idle nodes.
func (c *Cluster) waitIdle(ctx context.Context, k int) error {
	ctx, cancel := context.WithTimeout(ctx, readyWait)
	defer cancel()
	last := ""
	for {
		out, err := c.Command(ctx, c.Hosts()[0].Name, "sinfo", "-h", "-N", "-o", "%N %t").CombinedOutput()
		last = strings.TrimSpace(string(out))
		if err == nil && strings.Count(last, " idle") == k {
			return nil
		}
		select {
		case <-ctx.Done():
			tails := c.logTail("slurmctld.log")
			for _, h := range c.Hosts() {
				tails += c.logTail("slurmd-" + h.Name + ".log")
			}
			return fmt.Errorf("slurmhosts: the %d nodes were not idle within %v (sinfo: %q)%s", k, readyWait, last, tails)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Command is nshosts' Command with SLURM_CONF set: argv on host, as typed
// there by a user of this Slurm.
func (c *Cluster) Command(ctx context.Context, host string, argv ...string) *exec.Cmd {
	cmd := c.Cluster.Command(ctx, host, argv...)
	cmd.Env = append(cmd.Env, "SLURM_CONF="+c.Conf())
	return cmd
}

// NodeConf is one node line of slurm.conf.
type NodeConf struct {
	Name, Addr string
	CPUs       int
}

// SlurmConf is the slurm.conf of a cluster whose files are in dir.
func SlurmConf(dir, name string, nodes []NodeConf) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("# generated by dynrt internal/slurmhosts; everything in %s", dir)
	p("ClusterName=%s", name)
	p("SlurmctldHost=%s(%s)", nodes[0].Name, nodes[0].Addr)
	p("SlurmUser=root")
	p("SlurmdUser=root")
	p("AuthType=auth/munge")
	p("CredType=cred/munge")
	p("AuthInfo=socket=%s", filepath.Join(dir, "munge.sock"))
	p("StateSaveLocation=%s", filepath.Join(dir, "state"))
	p("SlurmdSpoolDir=%s", filepath.Join(dir, "spool", "%n"))
	p("SlurmctldPidFile=%s", filepath.Join(dir, "slurmctld.pid"))
	p("SlurmdPidFile=%s", filepath.Join(dir, "slurmd-%n.pid"))
	p("SlurmctldLogFile=%s", filepath.Join(dir, "log", "slurmctld.log"))
	p("SlurmdLogFile=%s", filepath.Join(dir, "log", "slurmd-%n.log"))
	p("ProctrackType=proctrack/linuxproc")
	p("TaskPlugin=task/none")
	p("MpiDefault=none")
	p("ReturnToService=2")
	p("SchedulerType=sched/builtin")
	p("SelectType=select/cons_tres")
	p("SelectTypeParameters=CR_CPU")
	p("SlurmdParameters=config_overrides")
	p("JobCompType=jobcomp/none")
	p("AccountingStorageType=accounting_storage/none")
	p("JobAcctGatherType=jobacct_gather/none")
	p("MailProg=/bin/true")
	p("InactiveLimit=0")
	p("KillWait=5")
	p("MinJobAge=10")
	p("SlurmctldTimeout=30")
	p("SlurmdTimeout=30")
	for _, n := range nodes {
		p("NodeName=%s NodeAddr=%s CPUs=%d State=UNKNOWN", n.Name, n.Addr, n.CPUs)
	}
	p("PartitionName=dyn Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=EXCLUSIVE")
	return b.String()
}

// CgroupConf is the cgroup.conf that lets slurmd start without a cgroup
// file system (see the package doc).
func CgroupConf(dir string) string {
	return "CgroupPlugin=cgroup/v1\nCgroupMountpoint=" + filepath.Join(dir, "cgroup") + "\nCgroupAutomount=no\n"
}
