package launcher

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dynrt/dynrt/lib/alloc"
	"github.com/dynrt/dynrt/wire"
)

// Growing a DVM under Slurm (`dvm grow --nodes K`): like PRRTE's Slurm
// "extend" (openpmix/prrte#2699), the nodes come from a NEW Slurm job, a
// batch job that only holds its nodes. The master submits it, waits until
// it runs, adds its nodes and starts their daemons with srun --jobid. The
// job ends by itself once none of its daemons' steps is left (the daemons
// stopped, or lost their master), or when it never got one within
// holdFirstStep; the master also cancels it when the last of its nodes
// leaves the DVM (dvm shrink, dvm stop), or when the grow fails.
//
// The script polls, so a daemon step may start and end between two polls
// (a master killed right after the grow: its daemons exit at once). Once
// the daemons have registered, the master therefore sets the job's comment
// to StartedComment (MarkStarted); the script takes that as "the daemons
// ran" and ends as soon as no step is left, instead of waiting out
// holdFirstStep for a step it will never see.

// holdFirstStep bounds how long a grow job waits for its first daemon step.
const holdFirstStep = 5 * time.Minute

// pollEvery is how often the master asks Slurm whether a grow job runs.
const pollEvery = 200 * time.Millisecond

// StartedComment is the grow job's comment once its daemons registered.
const StartedComment = "dynrt-daemons-up"

// HoldScript is the batch script of a grow job: it waits for a step of its
// own job (the daemons') or the StartedComment, then for the steps to end,
// and exits, which releases the allocation.
func HoldScript() string {
	limit := int(holdFirstStep / (2 * time.Second))
	return `steps() { squeue -h -s -j "$SLURM_JOB_ID" -o %i | grep -c -v -e '\.batch$' -e '\.extern$'; }; ` +
		`up() { [ "$(squeue -h -j "$SLURM_JOB_ID" -o %k)" = ` + StartedComment + ` ]; }; ` +
		`i=0; while [ "$(steps)" = 0 ] && ! up; do i=$((i+1)); [ "$i" -gt ` + strconv.Itoa(limit) + ` ] && exit 0; sleep 2; done; ` +
		`while [ "$(steps)" != 0 ]; do sleep 2; done`
}

// SbatchCommand is the argv that submits a grow job of k nodes named
// name. sbatch's own variables (SBATCH_PARTITION, SBATCH_TIMELIMIT, ...)
// choose partition, time and the rest.
func SbatchCommand(sbatch []string, k int, name string) []string {
	return append(append([]string(nil), sbatch...), "--parsable", "--nodes="+strconv.Itoa(k),
		"--job-name="+name, "--output=/dev/null", "--wrap="+HoldScript())
}

// SqueueFormat is the squeue -o format ParseSqueueJob reads.
const SqueueFormat = "%T|%r|%N|%C|%D"

// ParseSqueueJob reads one line of `squeue -h -j J -o SqueueFormat`:
// the job's state, the reason it waits, and once it runs its nodes, each
// with the job's CPUs divided evenly (whole nodes of a uniform partition
// give each node its CPU count).
func ParseSqueueJob(line string) (state, reason string, nodes []alloc.Node, err error) {
	f := strings.Split(strings.TrimSpace(line), "|")
	if len(f) != 5 {
		return "", "", nil, fmt.Errorf("squeue line %q: want state|reason|nodes|cpus|count", line)
	}
	state, reason = f[0], f[1]
	if state != "RUNNING" {
		return state, reason, nil, nil
	}
	hosts, err := ExpandHostlist(f[2])
	if err != nil {
		return state, reason, nil, fmt.Errorf("squeue line %q: %w", line, err)
	}
	cpus, err1 := strconv.Atoi(f[3])
	count, err2 := strconv.Atoi(f[4])
	if err1 != nil || err2 != nil || count != len(hosts) || cpus < count {
		return state, reason, nil, fmt.Errorf("squeue line %q: %q CPUs on %q nodes do not fit the %d hosts", line, f[3], f[4], len(hosts))
	}
	for _, h := range hosts {
		nodes = append(nodes, alloc.Node{Name: h, Slots: min(cpus/count, MaxSlots)})
	}
	return state, reason, nodes, nil
}

// SlurmGrow is the Starter of the nodes of one grow job: srun --jobid into
// it, and a launcher.Releaser that cancels the job when its last node has
// left.
type SlurmGrow struct {
	slurmStarter
	job   string
	mu    sync.Mutex
	nodes map[string]bool // the job's nodes still in the DVM
}

// Job is the Slurm job id of the grow.
func (g *SlurmGrow) Job() string { return g.job }

// NewSlurmGrow submits a grow job of k nodes (name names it in squeue)
// and waits, at most wait, until it runs. It returns the Starter of its
// nodes and the nodes. opts is the DVM's slurm launcher's.
func NewSlurmGrow(ctx context.Context, opts Options, k int, name string, wait time.Duration) (*SlurmGrow, []alloc.Node, error) {
	if k < 1 {
		return nil, nil, wire.Errorf(wire.ErrInvalid, "launcher: slurm: grow by %d nodes", k)
	}
	opts.Kind = Slurm
	st, err := New(opts)
	if err != nil {
		return nil, nil, err
	}
	base := st.(*slurmStarter).opts
	env := withoutSlurmJob(base.Env, "none") // a job of its own, not the DVM's allocation
	out, err := slurmCmd(ctx, env, SbatchCommand([]string{"sbatch"}, k, name)...)
	if err != nil {
		return nil, nil, wire.Errorf(wire.ErrInternal, "launcher: slurm: sbatch of a %d-node grow job: %w", k, err)
	}
	job, _, _ := strings.Cut(strings.TrimSpace(out), ";") // --parsable: "id" or "id;cluster"
	if job == "" || strings.TrimLeft(job, "0123456789") != "" {
		return nil, nil, wire.Errorf(wire.ErrInternal, "launcher: slurm: sbatch answered %q, not a job id", out)
	}
	base.SlurmJob = job
	g := &SlurmGrow{slurmStarter: slurmStarter{opts: base}, job: job, nodes: map[string]bool{}}
	nodes, err := g.waitRunning(ctx, env, k, wait)
	if err != nil {
		g.Cancel()
		return nil, nil, err
	}
	for _, n := range nodes {
		g.nodes[n.Name] = true
	}
	base.Logger.Info("slurm: grow job runs", "job", job, "nodes", len(nodes))
	return g, nodes, nil
}

func (g *SlurmGrow) waitRunning(ctx context.Context, env []string, k int, wait time.Duration) ([]alloc.Node, error) {
	deadline := time.Now().Add(wait)
	state, reason := "", ""
	for {
		out, err := slurmCmd(ctx, env, "squeue", "-h", "-j", g.job, "-o", SqueueFormat)
		if err == nil {
			var nodes []alloc.Node
			state, reason, nodes, err = ParseSqueueJob(out)
			switch {
			case err != nil:
				return nil, wire.Errorf(wire.ErrInternal, "launcher: slurm: grow job %s: %w", g.job, err)
			case state == "RUNNING":
				return nodes, nil
			case state != "PENDING" && state != "CONFIGURING" && state != "REQUEUED" && state != "RESIZING":
				return nil, wire.Errorf(wire.ErrInternal, "launcher: slurm: grow job %s of %d nodes ended before it ran (%s %s)", g.job, k, state, reason)
			}
		}
		if time.Now().After(deadline) {
			return nil, wire.Errorf(wire.ErrTimeout, "launcher: slurm: Slurm did not grant the %d nodes of grow job %s within %v (state %s, reason %s); the job is cancelled", k, g.job, wait, state, reason)
		}
		select {
		case <-ctx.Done():
			return nil, wire.Errorf(wire.ErrCanceled, "launcher: slurm: grow job %s: %w", g.job, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}

// Release is called once node has left the DVM: the job is cancelled when
// it was its last node.
func (g *SlurmGrow) Release(_ context.Context, node string) error {
	g.mu.Lock()
	delete(g.nodes, node)
	last := len(g.nodes) == 0
	g.mu.Unlock()
	if !last {
		return nil
	}
	return g.Cancel()
}

// MarkStarted tells the job's script that its daemons ran (StartedComment),
// so that it ends with their step even if it never saw that step.
func (g *SlurmGrow) MarkStarted(ctx context.Context) error {
	if _, err := slurmCmd(ctx, withoutSlurmJob(g.opts.Env, "none"), "scontrol", "update", "JobId="+g.job, "Comment="+StartedComment); err != nil {
		return wire.Errorf(wire.ErrInternal, "launcher: slurm: marking grow job %s started: %w", g.job, err)
	}
	return nil
}

// Cancel cancels the grow job (scancel); its daemons end with it.
func (g *SlurmGrow) Cancel() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := slurmCmd(ctx, withoutSlurmJob(g.opts.Env, "none"), "scancel", g.job); err != nil {
		return wire.Errorf(wire.ErrInternal, "launcher: slurm: scancel %s: %w", g.job, err)
	}
	g.opts.Logger.Info("slurm: grow job cancelled", "job", g.job)
	return nil
}

// slurmCmd runs a Slurm client command and returns its stdout; an error
// carries its stderr.
func slurmCmd(ctx context.Context, env []string, argv ...string) (string, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s: %w: %s", argv[0], err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}
