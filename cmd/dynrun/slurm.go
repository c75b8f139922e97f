package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/lib/launcher"
)

// scontrolWait bounds `scontrol show hostnames`.
const scontrolWait = 10 * time.Second

// slurmDVM is what a DVM inside a Slurm allocation starts with.
type slurmDVM struct {
	nodes []alloc.Node // the allocation's nodes, the master's own first
	info  string       // for `dvm status` and the log
}

// slurmSetup reads the allocation of the environment: its nodes (this
// host's node first: the master's daemon runs in-process) and a
// description; why says how the launcher was chosen.
func slurmSetup(ctx context.Context, e *env, why string) (slurmDVM, error) {
	a, err := launcher.ReadSlurmAllocation(e.get, scontrolHostnames(ctx))
	if err != nil {
		return slurmDVM{}, err
	}
	host, _ := os.Hostname()
	self := launcher.SlurmSelf(a, e.get(launcher.EnvSlurmdNodeName), host)
	d := slurmDVM{nodes: launcher.SlurmNodes(a, self, host)}
	if self < 0 {
		why += "; this host is outside the allocation: its node has no slots"
	}
	d.info = fmt.Sprintf("slurm: job %s, %d nodes, slots from %s (%s)", a.JobID, len(a.Nodes), a.SlotsFrom, why)
	return d, nil
}

// scontrolHostnames asks Slurm itself to expand a host list our parser
// refuses (a syntax of a newer Slurm); nil when scontrol is missing.
func scontrolHostnames(ctx context.Context) func(string) ([]string, error) {
	path, err := exec.LookPath("scontrol")
	if err != nil {
		return nil
	}
	return func(expr string) ([]string, error) {
		ctx, cancel := context.WithTimeout(ctx, scontrolWait)
		defer cancel()
		out, err := exec.CommandContext(ctx, path, "show", "hostnames", expr).Output()
		if err != nil {
			return nil, err
		}
		return strings.Fields(string(out)), nil
	}
}
