package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// Config shapes a chaos run.
type Config struct {
	Dynrun    string // the dynrun binary
	Malleable string // the internal/malleable binary
	Dir       string // rendezvous directory of the run's DVMs (created)
	Mark      string // $DYNRT_TEST_MARK of every process of the run

	Seed      uint64
	Steps     int
	Faults    []Fault
	FaultRate float64 // 0 = 0.35

	Nodes, Slots int      // virtual nodes; 0 = 4 nodes of 4 slots
	DVMArgs      []string // extra `dvm start` flags (heartbeat settings)
	Elastic      bool     // nodes join and leave too (GenConfig.Elastic)
	Replace      bool     // REPLACE requests too (GenConfig.Replace)
	// Policy is the failure policy of every job the harness launches
	// (dynrun --on-failure): "" keeps the step's choice (abort, or
	// --keep-going), wire.OnFailureShrink makes every loss a failure
	// change. The steps are the same either way.
	Policy string

	// ConfirmTimeout of the harness's changes (0 = 10s); SettleLimit
	// bounds the wait for the DVM to settle after a step (0 = 45s).
	ConfirmTimeout, SettleLimit time.Duration
	// JobLogs, when set, is a directory where each job's dynrun output
	// (its processes' lines included) is written when the job ends, as
	// <app>.out: what to read when a run goes wrong.
	JobLogs string
	// StopAtViolation ends the run at the first step that breaks an
	// invariant (the replay then needs only the steps printed).
	StopAtViolation bool

	Log    io.Writer // one line per step; nil = discard
	Logger *slog.Logger
}

// Summary is the outcome of a run.
type Summary struct {
	Seed    uint64
	Steps   int            // steps run
	Ops     map[Op]int     // operations run, by kind
	Faults  map[string]int // faults injected, by kind (and target)
	Refused int            // requests the DVM refused (no slots, busy, ...): not violations
	Rejoins int            // nodes rejoined after their daemon died
	Drained int            // SUBs made by shrinks with --drain (elastic runs)
	// WireUps counts the processes' wire-ups (the malleable app's
	// -wireup: a fence with collect at the start, then a peer's value
	// read) by outcome: ok, fence (broken by a fault), get (the read
	// failed), wrong (a wrong value: the process exits 7, a violation).
	WireUps map[string]int
	// WireUpWhy holds one line of each outcome but ok, as the process
	// printed it.
	WireUpWhy map[string]string
	// FailureChanges counts the failure changes (-policy shrink) that
	// reached a final status, by status.
	FailureChanges map[string]int
	// FenceUp counts the fence requests gathered up the tree of daemons
	// that reached the masters (-tree-radix), and FenceUpEntries the
	// daemons' entries in them, as dvm status showed them before each step.
	FenceUp, FenceUpEntries uint64
	Violations              []Report
	Elapsed                 time.Duration
	Leftover                []int // marked processes alive after the final stop (must be none)
}

// Report is a step that broke an invariant.
type Report struct {
	Seed       uint64
	Step       Step
	Did        string // what the step did (its resolution on the live DVM)
	Violations []Violation
}

func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "VIOLATION seed=%d step %s\n  did: %s\n", r.Seed, r.Step, r.Did)
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	return b.String()
}

// InjectedFaults is the number of faults injected in the run.
func (s Summary) InjectedFaults() int {
	n := 0
	for _, c := range s.Faults {
		n += c
	}
	return n
}

// String is the run's summary as `make chaos` prints it.
func (s Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos summary: seed %d, %d steps in %s, %d faults injected, %d violations, %d processes left\n",
		s.Seed, s.Steps, s.Elapsed.Round(time.Second), s.InjectedFaults(), len(s.Violations), len(s.Leftover))
	b.WriteString("  operations:")
	for _, k := range slices.Sorted(maps.Keys(s.Ops)) {
		fmt.Fprintf(&b, " %s=%d", k, s.Ops[k])
	}
	fmt.Fprintf(&b, " (refused requests: %d, rejoins: %d, drain SUBs: %d)\n", s.Refused, s.Rejoins, s.Drained)
	if len(s.WireUps) > 0 {
		b.WriteString("  wire-ups (fence with collect, then a peer's value):")
		for _, k := range slices.Sorted(maps.Keys(s.WireUps)) {
			fmt.Fprintf(&b, " %s=%d", k, s.WireUps[k])
		}
		b.WriteString("\n")
		for _, k := range slices.Sorted(maps.Keys(s.WireUpWhy)) {
			fmt.Fprintf(&b, "    %s, e.g.: %s\n", k, s.WireUpWhy[k])
		}
	}
	if s.FenceUp > 0 {
		fmt.Fprintf(&b, "  fences up the tree: %d gathered requests with %d daemons' entries\n", s.FenceUp, s.FenceUpEntries)
	}
	if len(s.FailureChanges) > 0 {
		b.WriteString("  failure changes:")
		for _, k := range slices.Sorted(maps.Keys(s.FailureChanges)) {
			fmt.Fprintf(&b, " %s=%d", k, s.FailureChanges[k])
		}
		b.WriteString("\n")
	}
	b.WriteString("  faults:")
	for _, k := range slices.Sorted(maps.Keys(s.Faults)) {
		fmt.Fprintf(&b, " %s=%d", k, s.Faults[k])
	}
	b.WriteString("\n")
	byInv := map[Invariant]int{}
	for _, r := range s.Violations {
		for _, v := range r.Violations {
			byInv[v.Inv]++
		}
	}
	if len(byInv) > 0 {
		b.WriteString("  violations:")
		for _, k := range slices.Sorted(maps.Keys(byInv)) {
			fmt.Fprintf(&b, " %s=%d", k, byInv[k])
		}
		b.WriteString("\n")
	}
	return b.String()
}

// harness runs one chaos run.
type harness struct {
	cfg  Config
	dir  string
	d    *dvm
	dvms int
	log  io.Writer
	sum  Summary
	wg   sync.WaitGroup

	jobs    []*jobRun
	nextID  int
	limits  map[string]time.Duration // change limits by delta
	failed  map[string]bool          // failure changes counted in the summary, by job and delta
	tree    map[int]wire.TreeState   // the last tree statistics seen, by master pid (a DVM's restart starts them again)
	did     []string                 // what the current step did
	refused []string                 // jobs a request of the current step was refused for
	ended   []Ended                  // dynruns that ended, not yet checked

	t0      time.Time  // start of the run
	curPick uint32     // the current step's ProcPick
	curStep int        // the current step's number
	hostile []net.Conn // hostile connections of the current step
	qmu     sync.Mutex // guards queued
	queued  []queuedNote
}

// jobRun is one malleable job and its dynrun.
type jobRun struct {
	app       string
	ns        string
	split     bool
	keepGoing bool
	cmd       *exec.Cmd
	out       *syncBuffer
	done      chan struct{}
	code      int
	facts     ExitFacts
}

func (j *jobRun) exited() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// Run runs the steps of cfg.Seed on a live DVM, checking every invariant
// after every step, then stops the DVM and checks that nothing is left.
func Run(ctx context.Context, cfg Config) (Summary, error) {
	if cfg.FaultRate == 0 {
		cfg.FaultRate = 0.35
	}
	if cfg.Nodes == 0 {
		cfg.Nodes, cfg.Slots = 4, 4
	}
	if cfg.ConfirmTimeout == 0 {
		cfg.ConfirmTimeout = 10 * time.Second
	}
	if cfg.SettleLimit == 0 {
		cfg.SettleLimit = 45 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	steps, err := Generate(cfg.Seed, GenConfig{Steps: cfg.Steps, Faults: cfg.Faults, FaultRate: cfg.FaultRate, Elastic: cfg.Elastic, Replace: cfg.Replace})
	if err != nil {
		return Summary{}, err
	}
	h := &harness{cfg: cfg, dir: cfg.Dir, log: cfg.Log, limits: map[string]time.Duration{},
		sum: Summary{Seed: cfg.Seed, Ops: map[Op]int{}, Faults: map[string]int{}, WireUps: map[string]int{}, WireUpWhy: map[string]string{}}}
	if h.log == nil {
		h.log = io.Discard
	}
	t0 := time.Now()
	h.t0 = t0
	fmt.Fprintf(h.log, "chaos: seed %d, %d steps, faults %s (rate %.2f), %d nodes of %d slots\n",
		cfg.Seed, cfg.Steps, FaultNames(cfg.Faults), cfg.FaultRate, cfg.Nodes, cfg.Slots)
	err = h.run(ctx, steps)
	// Whatever happened: stop the DVM, end the launchers, and check that
	// nothing is left.
	h.finish(ctx)
	h.sum.Elapsed = time.Since(t0)
	for _, t := range h.tree {
		h.sum.FenceUp += t.Up
		h.sum.FenceUpEntries += t.UpParts
	}
	return h.sum, err
}

func (h *harness) run(ctx context.Context, steps []Step) error {
	var prev *Snapshot
	var seen map[string]bool
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := h.prepare(ctx); err != nil {
			return fmt.Errorf("before step %s: %w", s, err)
		}
		if prev == nil || prev.Stopped {
			var err error
			if prev, err = h.observe(ctx); err != nil {
				return err
			}
		}
		h.did, h.refused, h.curPick, h.curStep = nil, nil, s.ProcPick, s.N
		t0 := time.Now()
		err := h.step(ctx, s)
		if err != nil {
			return fmt.Errorf("step %s: %w", s, err)
		}
		cur, vs, keys := h.settle(ctx, prev, seen)
		seen = keys
		h.sum.Steps++
		h.sum.Ops[s.Op]++
		did := strings.Join(h.did, "; ")
		fmt.Fprintf(h.log, "%s -> %s (%s)\n", s, did, time.Since(t0).Round(time.Millisecond))
		if len(vs) > 0 {
			r := Report{Seed: h.cfg.Seed, Step: s, Did: did, Violations: vs}
			h.sum.Violations = append(h.sum.Violations, r)
			fmt.Fprint(h.log, r)
			h.cleanOrphans(cur)
			if h.cfg.StopAtViolation {
				return nil
			}
		}
		h.closeHostile()
		prev = cur
		if h.sum.Steps%100 == 0 {
			fmt.Fprintf(h.log, "chaos: progress: %d steps in %s, %d faults, %d violations\n",
				h.sum.Steps, time.Since(h.t0).Round(time.Second), h.sum.InjectedFaults(), len(h.sum.Violations))
		}
	}
	return nil
}

func (h *harness) note(format string, args ...any) {
	h.did = append(h.did, fmt.Sprintf(format, args...))
}

// prepare brings the DVM back to a usable state before a step: a DVM if
// the last one was stopped, a daemon for every node that is down.
func (h *harness) prepare(ctx context.Context) error {
	if h.d == nil {
		return h.startDVM(ctx)
	}
	st, err := h.d.cl.State(ctx)
	if err != nil {
		return fmt.Errorf("chaos: dvm status: %w", err)
	}
	if st.Tree != nil {
		if h.tree == nil {
			h.tree = make(map[int]wire.TreeState)
		}
		h.tree[st.PID] = *st.Tree
	}
	for _, n := range st.Nodes {
		if n.State != wire.NodeDown {
			continue
		}
		if err := h.rejoin(ctx, n.Name); err != nil {
			fmt.Fprintf(h.log, "chaos: %v\n", err)
			continue
		}
		h.sum.Rejoins++
	}
	return nil
}

// settle waits until the step's changes are final and no invariant is
// newly broken (a violation already reported at the last step, same key,
// is not waited for again), or SettleLimit has passed. It returns the
// last snapshot, the violations new in it, and the keys of all the
// violations seen in it.
func (h *harness) settle(ctx context.Context, prev *Snapshot, seen map[string]bool) (*Snapshot, []Violation, map[string]bool) {
	deadline := time.Now().Add(h.cfg.SettleLimit)
	for {
		h.collectEnded()
		cur, err := h.observe(ctx)
		if err != nil && ctx.Err() != nil {
			return prev, nil, seen // the run was interrupted
		}
		if err != nil {
			v := viol(InvStatus, "answer", "%v", err)
			return prev, []Violation{v}, map[string]bool{v.Key: true}
		}
		h.countFailures(cur)
		all := Check(prev, cur, Facts{Now: time.Now(), Refused: h.refused})
		var fresh []Violation
		keys := map[string]bool{}
		for _, v := range all {
			keys[v.Key] = true
			if !seen[v.Key] {
				fresh = append(fresh, v)
			}
		}
		why := h.busyWhy(cur)
		if (len(fresh) == 0 && why == "") || time.Now().After(deadline) || ctx.Err() != nil {
			if why != "" && len(fresh) == 0 {
				fresh = append(fresh, viol(InvChanges, "settle", "the DVM did not settle within %s: %s", h.cfg.SettleLimit, why))
			}
			fresh = append(fresh, checkExits(h.ended)...)
			h.ended = nil
			return cur, fresh, keys
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// busyWhy says why the DVM is still moving ("" if it is not): a change
// not final or not settled, a job launching, a launcher running after its
// DVM stopped.
func (h *harness) busyWhy(s *Snapshot) string {
	for _, c := range s.Changes {
		if !c.Settled {
			return c.Delta + " is " + c.Status + " (not settled)"
		}
	}
	for _, j := range s.Jobs {
		if j.State == wire.JobStateLaunching {
			return "job " + j.App + " is launching"
		}
	}
	if s.Stopped {
		for _, j := range h.jobs {
			if !j.exited() {
				return "dynrun of job " + j.app + " runs after the DVM stopped"
			}
		}
	}
	return ""
}

// collectEnded moves the dynruns that have ended to h.ended with the
// statuses the rule allows.
func (h *harness) collectEnded() {
	keep := h.jobs[:0]
	for _, j := range h.jobs {
		if !j.exited() {
			keep = append(keep, j)
			continue
		}
		out := j.out.String()
		if h.cfg.JobLogs != "" {
			if err := os.WriteFile(filepath.Join(h.cfg.JobLogs, j.app+".out"), []byte(out), 0o600); err != nil {
				h.note("job %s: %v", j.app, err)
			}
		}
		countWireUps(h.sum.WireUps, h.sum.WireUpWhy, out)
		j.facts.Report = lastLines(out, 6)
		allowed, why := ExitRule(j.facts)
		e := Ended{App: j.app, Code: j.code, Allowed: allowed, Why: why, Shrink: j.facts.Shrink}
		if !slices.Contains(allowed, j.code) {
			e.Why += "; dynrun said: " + lastLines(j.out.String(), 6)
		}
		h.ended = append(h.ended, e)
		h.note("job %s ended: dynrun exit %d", j.app, j.code)
	}
	clear(h.jobs[len(keep):])
	h.jobs = keep
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// countWireUps adds the outcomes of the WIREUP lines in a job's output
// (internal/malleable's wireUp) to n, and the first line of each outcome
// but ok to why.
func countWireUps(n map[string]int, why map[string]string, out string) {
	for _, l := range strings.Split(out, "\n") {
		_, rest, ok := strings.Cut(l, "WIREUP ")
		if !ok {
			continue
		}
		var k string
		switch {
		case strings.Contains(rest, `"ok":true`):
			n["ok"]++
			continue
		case strings.Contains(rest, `"fence":`):
			// By the error's code: aborted (a participant ended),
			// timeout (one stopped past the limit), ...
			code := "?"
			if _, c, ok := strings.Cut(rest, `"code":"`); ok {
				code, _, _ = strings.Cut(c, `"`)
			}
			k = "fence-" + code
		case strings.Contains(rest, `"want":`):
			k = "wrong"
		case strings.Contains(rest, `"get":`):
			k = "get"
		case strings.Contains(rest, `"skipped":`):
			// The process started after a change that took processes of
			// the launch out had finished: the launch is no longer whole.
			k = "skipped"
		default:
			continue
		}
		n[k]++
		if why[k] == "" {
			why[k] = rest
		}
	}
}

// cleanOrphans kills the processes a violation of (c) named, so that they
// do not poison the steps after it.
func (h *harness) cleanOrphans(s *Snapshot) {
	if s == nil {
		return
	}
	for _, pid := range orphans(s) {
		signal(pid, syscall.SIGCONT)
		signal(pid, syscall.SIGKILL)
	}
}

// finish stops the DVM, ends the launchers and records what is left.
func (h *harness) finish(ctx context.Context) {
	h.closeHostile()
	for _, j := range h.jobs {
		if j.facts.EndedBy == "" {
			j.facts.EndedBy, j.facts.EndStep = EndDVMStop, h.curStep
		}
	}
	if err := h.stopDVM(context.WithoutCancel(ctx)); err != nil {
		fmt.Fprintf(h.log, "chaos: %v\n", err)
	}
	for _, j := range h.jobs {
		select {
		case <-j.done:
		case <-time.After(20 * time.Second):
			fmt.Fprintf(h.log, "chaos: dynrun of job %s still runs 20s after the DVM stopped; killing it\n", j.app)
			signal(j.cmd.Process.Pid, syscall.SIGKILL)
			<-j.done
		}
	}
	h.collectEnded()
	var left []int
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		left = slices.Sorted(maps.Keys(osProcs(h.cfg.Mark)))
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	vs := checkExits(h.ended)
	if len(left) > 0 {
		s := &Snapshot{Stopped: true, OS: osProcs(h.cfg.Mark)}
		vs = append(vs, checkOrphans(s)...)
		h.sum.Leftover = left
		for _, pid := range left {
			signal(pid, syscall.SIGCONT)
			signal(pid, syscall.SIGKILL)
		}
	}
	if len(vs) > 0 {
		r := Report{Seed: h.cfg.Seed, Step: Step{N: h.sum.Steps + 1, Op: "final-stop"}, Did: "dvm stop at the end of the run", Violations: vs}
		h.sum.Violations = append(h.sum.Violations, r)
		fmt.Fprint(h.log, r)
	}
	h.wg.Wait()
}

// pickJob returns the job pick chooses among the jobs running (nil if
// none), skipping other.
func (h *harness) pickJob(pick uint32, other *jobRun) *jobRun {
	var js []*jobRun
	for _, j := range h.jobs {
		if !j.exited() && j.ns != "" && j != other {
			js = append(js, j)
		}
	}
	if len(js) == 0 {
		return nil
	}
	sort.Slice(js, func(a, b int) bool { return js[a].app < js[b].app })
	return js[int(pick%uint32(len(js)))]
}

// limitOf is how long a change may take from request to final status.
func (h *harness) limitOf(rc wire.RC) time.Duration {
	if l, ok := h.limits[rc.Delta]; ok {
		return l
	}
	return 30*time.Second + changeSlack // the runtime's default confirm timeout
}

// changeSlack is what a change may take beyond its confirm timeout:
// placement and launch before the announcement, a failure being
// detected (heartbeats), the SUB grace, the abort's kills.
const changeSlack = 15 * time.Second

func itoa(n int) string { return strconv.Itoa(n) }

// countFailures counts the failure changes of s that are final, once each.
func (h *harness) countFailures(s *Snapshot) {
	for _, c := range s.Changes {
		final := c.Status == wire.RCFinalized || c.Status == wire.RCAborted
		if !c.Failure || !final || h.failed[c.Job+" "+c.Delta] {
			continue
		}
		if h.failed == nil {
			h.failed = map[string]bool{}
			h.sum.FailureChanges = map[string]int{}
		}
		h.failed[c.Job+" "+c.Delta] = true
		h.sum.FailureChanges[c.Status]++
	}
}
