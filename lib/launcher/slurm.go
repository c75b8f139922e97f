package launcher

import (
	"context"
	"net"
	"strconv"
	"strings"

	"github.com/dynrt/dynrt/wire"
)

// FlagNodeEnv makes a daemon take its node name from an environment
// variable: one srun command starts the daemons of many nodes, and each
// task learns its node from SLURMD_NODENAME.
const FlagNodeEnv = "--node-env"

// GroupStarter is a Starter that starts the daemons of many nodes with one
// command: the slurm launcher runs one srun step for all of them. The
// master calls StartGroup once for all the nodes it starts when its
// starter has it, and Start per node otherwise.
type GroupStarter interface {
	Starter
	// StartGroup starts the daemons of specs (same master, DVM and token)
	// and returns the one local process that runs them all (Daemon.Node
	// lists their names, comma-separated); it does not wait for them to
	// register.
	StartGroup(ctx context.Context, specs []NodeSpec) (*Daemon, error)
}

type slurmStarter struct{ opts Options }

func (slurmStarter) Kind() string { return Slurm }

func (s *slurmStarter) Start(ctx context.Context, spec NodeSpec) (*Daemon, error) {
	return s.StartGroup(ctx, []NodeSpec{spec})
}

func (s *slurmStarter) StartGroup(ctx context.Context, specs []NodeSpec) (*Daemon, error) {
	argv, err := SrunCommand(s.opts.Srun, s.opts.Remote, s.opts.SlurmJob, specs)
	if err != nil {
		return nil, err
	}
	// srun exports its environment to the tasks (--export=ALL, Slurm's
	// default), over munge-authenticated channels: the token reaches every
	// daemon without appearing in any argv.
	env := append(withoutSlurmJob(s.opts.Env, s.opts.SlurmJob), EnvToken+"="+specs[0].Token)
	names := make([]string, len(specs))
	for i, sp := range specs {
		names[i] = sp.Name
	}
	return start(ctx, s.opts, strings.Join(names, ","), argv, env, "")
}

// withoutSlurmJob drops the variables of the surrounding allocation when
// the step goes to another job (a `dvm grow` allocation): srun would take
// their node counts and lists for its own options.
func withoutSlurmJob(env []string, job string) []string {
	if job == "" {
		return env
	}
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if k == EnvSlurmJobID && v == job {
			out = append(out, kv)
			continue
		}
		if strings.HasPrefix(k, "SLURM_") && k != "SLURM_CONF" {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// SrunCommand builds the argv of the one srun step that runs the daemons
// of specs, one task per node:
//
//	srun [--jobid=J] --overlap --nodes=K --ntasks=K --ntasks-per-node=1
//	     --nodelist=h1,h2 --kill-on-bad-exit=0 --cpu-bind=none --mpi=none
//	     --job-name=dynrt-<dvm> <remote> --master ADDR --dvm ID --join
//	     --node-env SLURMD_NODENAME
//
// --overlap lets the step share the CPUs that the jobs' processes use (they
// are forked by the daemons, inside the step); --kill-on-bad-exit=0 keeps a
// daemon that dies (a node lost) from taking the others with it: the master
// handles the loss by the jobs' policies. The slot counts stay with the
// master. job empty means the allocation of the environment.
func SrunCommand(srun, remote []string, job string, specs []NodeSpec) ([]string, error) {
	if len(specs) == 0 {
		return nil, wire.Errorf(wire.ErrInvalid, "launcher: slurm: no nodes to start")
	}
	first := specs[0]
	names := make([]string, len(specs))
	for i, sp := range specs {
		if err := sp.check(); err != nil {
			return nil, err
		}
		if sp.Master != first.Master || sp.DVM != first.DVM || sp.Token != first.Token {
			return nil, wire.Errorf(wire.ErrInvalid, "launcher: slurm: the nodes of one srun step must share master, DVM and token")
		}
		host := sp.Host
		if host == "" {
			host = sp.Name
		}
		if host != sp.Name {
			// Each task takes its node name from SLURMD_NODENAME, which is
			// the Slurm node name: the DVM's node must be named alike.
			return nil, wire.Errorf(wire.ErrInvalid, "launcher: slurm: node %s: host %s differs from the node name; Slurm nodes are named as in the allocation", sp.Name, host)
		}
		if err := CheckHost(host); err != nil {
			return nil, wire.Errorf(wire.ErrInvalid, "launcher: slurm: node %s: %w", sp.Name, err)
		}
		names[i] = host
	}
	if dup := firstDuplicate(names); dup != "" {
		return nil, wire.Errorf(wire.ErrInvalid, "launcher: slurm: node %s given twice", dup)
	}
	if job != "" && strings.TrimLeft(job, "0123456789") != "" {
		return nil, wire.Errorf(wire.ErrInvalid, "launcher: slurm: %q is not a Slurm job id", job)
	}
	if err := checkRemoteMaster(first.Master); err != nil {
		return nil, err
	}
	k := strconv.Itoa(len(specs))
	argv := append([]string(nil), srun...)
	if job != "" {
		argv = append(argv, "--jobid="+job)
	}
	argv = append(argv, "--overlap", "--nodes="+k, "--ntasks="+k, "--ntasks-per-node=1",
		"--nodelist="+strings.Join(names, ","), "--kill-on-bad-exit=0", "--cpu-bind=none", "--mpi=none")
	if first.DVM != "" {
		argv = append(argv, "--job-name=dynrt-"+first.DVM)
	}
	argv = append(argv, remote...)
	argv = append(argv, FlagMaster, first.Master)
	if first.DVM != "" {
		argv = append(argv, FlagDVM, first.DVM)
	}
	return append(argv, FlagJoin, FlagNodeEnv, EnvSlurmdNodeName), nil
}

// checkRemoteMaster checks that daemons on other nodes can reach the
// master at addr: a TCP address, and not a loopback one (srun has no
// tunnel to offer, unlike ssh -R).
func checkRemoteMaster(addr string) error {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return wire.Errorf(wire.ErrInvalid, "launcher: slurm: master address %q is not host:port; the daemons on the other nodes need the master's TCP address", addr)
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() || h == "localhost" {
		return wire.Errorf(wire.ErrInvalid, "launcher: slurm: the master listens on %s, which the other nodes cannot reach; start the DVM with --bind <address reachable from the nodes>", addr)
	}
	return nil
}
