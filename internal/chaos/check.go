package chaos

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// Snapshot is what the harness observed once a step had settled: the
// master's picture (nodes, jobs with their processes and latest sets,
// changes) and the operating system's (the live processes carrying the
// run's mark). Check evaluates the invariants over it; it does no I/O.
type Snapshot struct {
	Nodes   []Node
	Jobs    []Job
	Changes []Change
	// OS holds every live process carrying the run's DYNRT_TEST_MARK, by
	// pid (empty after the DVM is gone: nothing may be left).
	OS map[int]OSProc
	// MasterPID is the master's pid (0 once the DVM is stopped).
	MasterPID int
	// Launchers are the dynrun processes of the harness, by pid: they
	// are the harness's, not the DVM's, and may run.
	Launchers map[int]bool
	// StatusLatency is how long the master took to answer `dvm status`
	// (a dvm.state request) after the step; Stopped means no DVM runs.
	StatusLatency time.Duration
	Stopped       bool
}

// Node is one node as the master reports it.
type Node struct {
	Name  string
	Slots int
	Used  int
	State string // wire.NodeUp, ...
	PID   int    // its daemon
}

// Job is one job with its processes and the latest version of its sets.
type Job struct {
	Job      string
	App      string
	State    string // wire.JobState*
	NextRank uint32
	Procs    []Proc
	Sets     []Set
}

// Proc is one process of a job as the master reports it.
type Proc struct {
	Rank  uint32
	Node  string
	PID   int
	State string // wire.ProcState*
}

// Set is the latest version of one process set.
type Set struct {
	Name    string
	Version uint32
	Active  bool
	Members []uint32
}

// Change is one resource change.
type Change struct {
	Delta     string
	Job       string
	Type      string
	Status    string
	Settled   bool
	Requested time.Time
	// Limit is how long the change may take from its request to a final
	// status: its confirm timeout plus the runtime's slack (placement,
	// launch, the SUB grace). A zero Limit is not checked.
	Limit time.Duration
	// Ranks is the delta's ranks; Failure marks a failure change (the
	// runtime's SUB or REPLACE of lost ranks under --on-failure shrink or
	// replace, RC.Cause), and Lost its lost ranks (a SUB's delta, a
	// REPLACE's replaced ranks).
	Ranks   []uint32
	Failure bool
	Lost    []uint32
}

// OSProc is a live marked process as /proc shows it.
type OSProc struct {
	PID, PPID int
	State     byte // /proc/PID/stat state: 'R', 'S', 'T' (stopped), ...
	Cmd       string
}

// Invariant names a checked invariant (docs/reliability.md).
type Invariant string

// The invariants.
const (
	InvSets    Invariant = "a-sets"    // live processes are in the latest active sets, dead ones are not
	InvSlots   Invariant = "b-slots"   // slots used on a node = live processes placed there
	InvOrphans Invariant = "c-orphans" // no process outlives its job, its daemon or the DVM
	InvChanges Invariant = "d-changes" // changes end in time; an ABORTED one restores sets and slots
	InvExit    Invariant = "e-exit"    // dynrun's exit status follows the documented rule
	InvStatus  Invariant = "f-status"  // the master answers dvm status within 1 s
	InvFailure Invariant = "g-failure" // a failure change removes only dead ranks, and no rank twice
)

// Violation is one broken invariant with what was observed.
type Violation struct {
	Inv  Invariant
	What string
	// Key names what is broken without the figures that change from one
	// look to the next (pids, versions, counts): a violation that
	// persists over steps has the same key, so it is reported once.
	Key string
}

func viol(inv Invariant, key, format string, args ...any) Violation {
	return Violation{Inv: inv, What: fmt.Sprintf(format, args...), Key: string(inv) + " " + key}
}

func (v Violation) String() string { return string(v.Inv) + ": " + v.What }

// StatusLimit is how fast the master must answer `dvm status` (f).
const StatusLimit = time.Second

// Ended is a job whose dynrun ended during the step: its exit status and
// the statuses the documented rule allows (ExitRule).
type Ended struct {
	App     string
	Code    int
	Allowed []int
	Why     string // how the harness expected it to end
	// Shrink: the job ran with --on-failure shrink; a status the rule
	// does not allow means it ended because of a loss although it could
	// be kept, which is invariant (g).
	Shrink bool
}

// Step facts the checker needs besides the two snapshots.
type Facts struct {
	Now   time.Time
	Ended []Ended
	// Refused are the jobs (namespaces) a request of this step was
	// refused for: with no change in the step (none numbered), they must
	// be as before it.
	Refused []string
}

// Check evaluates every invariant over cur, the snapshot after a step
// settled; prev is the snapshot before it (for the rollback of aborted
// changes), nil at the start.
func Check(prev, cur *Snapshot, f Facts) []Violation {
	var out []Violation
	out = append(out, checkSets(cur)...)
	out = append(out, checkSlots(cur)...)
	out = append(out, checkOrphans(cur)...)
	out = append(out, checkChanges(prev, cur, f)...)
	out = append(out, checkExits(f.Ended)...)
	out = append(out, checkFailures(cur)...)
	if !cur.Stopped && cur.StatusLatency > StatusLimit {
		out = append(out, viol(InvStatus, "latency", "dvm status answered after %s (limit %s)", cur.StatusLatency.Round(time.Millisecond), StatusLimit))
	}
	return out
}

// live reports whether p runs by the master's account and the OS's.
func (s *Snapshot) live(p Proc) bool {
	if p.State != wire.ProcStateRunning {
		return false
	}
	_, ok := s.OS[p.PID]
	return ok
}

// activeRanks is the union of the latest versions of the job's active
// sets in its application's namespace (the application set, or the sets
// bound in its place), with the name of a set holding each rank.
func activeRanks(j Job) map[uint32]string {
	app := "mpi://app/" + j.App
	in := map[uint32]string{}
	for _, s := range j.Sets {
		if !s.Active || (s.Name != app && !strings.HasPrefix(s.Name, app+"/")) {
			continue
		}
		for _, r := range s.Members {
			in[r] = fmt.Sprintf("%s@%d", s.Name, s.Version)
		}
	}
	return in
}

// (a)
func checkSets(s *Snapshot) []Violation {
	var out []Violation
	for _, j := range s.Jobs {
		if j.State != wire.JobStateRunning {
			continue
		}
		in := activeRanks(j)
		byRank := map[uint32]Proc{}
		for _, p := range j.Procs {
			byRank[p.Rank] = p
			if s.live(p) {
				if _, ok := in[p.Rank]; !ok {
					out = append(out, viol(InvSets, j.Job+" live "+itoa(int(p.Rank)), "job %s: live rank %d (pid %d on %s) is in no latest active set", j.App, p.Rank, p.PID, p.Node))
				}
			}
		}
		for _, r := range slices.Sorted(maps.Keys(in)) {
			p, ok := byRank[r]
			switch {
			case !ok:
				out = append(out, viol(InvSets, j.Job+" noproc "+itoa(int(r)), "job %s: rank %d in %s has no process", j.App, r, in[r]))
			case !s.live(p):
				out = append(out, viol(InvSets, j.Job+" dead "+itoa(int(r)), "job %s: dead rank %d (state %s, pid %d) is in %s", j.App, r, p.State, p.PID, in[r]))
			}
		}
	}
	return out
}

// (b)
func checkSlots(s *Snapshot) []Violation {
	if s.Stopped {
		return nil
	}
	live := map[string]int{}
	for _, j := range s.Jobs {
		if j.State != wire.JobStateRunning && j.State != wire.JobStateLaunching {
			continue // a process of an ended job holds no slot: (c) reports it
		}
		for _, p := range j.Procs {
			if s.live(p) {
				live[p.Node]++
			}
		}
	}
	var out []Violation
	for _, n := range s.Nodes {
		if n.Used != live[n.Name] {
			out = append(out, viol(InvSlots, n.Name, "node %s: %d slots used, %d live processes placed there", n.Name, n.Used, live[n.Name]))
		}
	}
	return out
}

// (c)
func checkOrphans(s *Snapshot) []Violation {
	known, out := knownProcs(s)
	for _, pid := range slices.Sorted(maps.Keys(s.OS)) {
		if _, ok := known[pid]; ok {
			continue
		}
		p := s.OS[pid]
		why := "belongs to no running job, daemon or DVM"
		if s.Stopped {
			why = "outlives the DVM"
		}
		out = append(out, viol(InvOrphans, itoa(pid), "pid %d (%s, parent %d) %s", pid, p.Cmd, p.PPID, why))
	}
	return out
}

// orphans lists the marked processes (c) finds no owner for.
func orphans(s *Snapshot) []int {
	known, _ := knownProcs(s)
	var out []int
	for pid := range s.OS {
		if _, ok := known[pid]; !ok {
			out = append(out, pid)
		}
	}
	return out
}

// knownProcs maps the processes that may run to what they are: the
// master, the daemons of nodes not down, the harness's launchers, the
// running processes of live jobs. It also reports the processes whose
// daemon is gone.
func knownProcs(s *Snapshot) (map[int]string, []Violation) {
	known := map[int]string{}
	if s.MasterPID != 0 {
		known[s.MasterPID] = "master"
	}
	daemons := map[string]int{}
	for _, n := range s.Nodes {
		if n.PID != 0 && n.State != wire.NodeDown {
			known[n.PID] = "daemon of " + n.Name
			daemons[n.Name] = n.PID
		}
	}
	for pid := range s.Launchers {
		known[pid] = "dynrun launcher"
	}
	var out []Violation
	for _, j := range s.Jobs {
		if j.State != wire.JobStateRunning && j.State != wire.JobStateLaunching {
			continue
		}
		for _, p := range j.Procs {
			if p.State != wire.ProcStateRunning {
				continue
			}
			if _, ok := s.OS[p.PID]; ok && daemons[p.Node] == 0 {
				out = append(out, viol(InvOrphans, itoa(p.PID), "job %s: rank %d (pid %d) outlives the daemon of %s", j.App, p.Rank, p.PID, p.Node))
				continue
			}
			known[p.PID] = fmt.Sprintf("job %s rank %d", j.App, p.Rank)
		}
	}
	return known, out
}

// (d)
func checkChanges(prev, cur *Snapshot, f Facts) []Violation {
	var out []Violation
	for _, c := range cur.Changes {
		final := c.Status == wire.RCFinalized || c.Status == wire.RCAborted
		if !final && c.Limit > 0 && f.Now.Sub(c.Requested) > c.Limit {
			out = append(out, viol(InvChanges, c.Delta+" late", "%s (%s) still %s %s after its request (limit %s)",
				c.Delta, c.Type, c.Status, f.Now.Sub(c.Requested).Round(time.Millisecond), c.Limit))
		}
	}
	if prev == nil {
		return out
	}
	// Rollback: only a job with exactly one new change in the step (not
	// in prev) can be compared with its state before it.
	known := map[string]bool{}
	for _, c := range prev.Changes {
		known[c.Delta] = true
	}
	perJob := map[string][]Change{}
	for _, c := range cur.Changes {
		if !known[c.Delta] {
			perJob[c.Job] = append(perJob[c.Job], c)
		}
	}
	compare := func(job, key, what string, add bool) {
		before, ok1 := prev.job(job)
		after, ok2 := cur.job(job)
		if ok1 && ok2 && after.State == wire.JobStateRunning { // an ended job has nothing to restore
			out = append(out, rollback(key, what, add, prev, before, cur, after)...)
		}
	}
	for job, cs := range perJob {
		if len(cs) == 1 && cs[0].Status == wire.RCAborted {
			// An aborted ADD or REPLACE gives its ranks back once
			// settled (docs/rc.md, DESIGN §9): the next rank is as before.
			compare(job, cs[0].Delta, fmt.Sprintf("%s (%s) ABORTED", cs[0].Delta, cs[0].Type), cs[0].Type != wire.RCSub)
		}
	}
	for _, job := range f.Refused {
		if len(perJob[job]) == 0 {
			compare(job, "refused "+job, "a refused request", true)
		}
	}
	return out
}

func (s *Snapshot) job(ns string) (Job, bool) {
	for _, j := range s.Jobs {
		if j.Job == ns {
			return j, true
		}
	}
	return Job{}, false
}

// rollback compares a job before and after an ABORTED change or a
// refused request (what, key): the same active members and slots per
// node, less the processes that died meanwhile, and (ranks) the same
// next rank.
func rollback(key, what string, ranks bool, prev *Snapshot, before Job, cur *Snapshot, after Job) []Violation {
	died := map[uint32]bool{}
	slotsBefore := map[string]int{}
	for _, p := range before.Procs {
		if !prev.live(p) {
			continue
		}
		slotsBefore[p.Node]++
		if q, ok := procOf(after, p.Rank); !ok || !cur.live(q) {
			died[p.Rank] = true
			slotsBefore[p.Node]--
		}
	}
	slotsAfter := map[string]int{}
	for _, p := range after.Procs {
		if cur.live(p) {
			slotsAfter[p.Node]++
		}
	}
	var out []Violation
	want := rankList(activeRanks(before), died)
	got := rankList(activeRanks(after), nil)
	if !slices.Equal(want, got) {
		out = append(out, viol(InvChanges, key+" sets", "%s but the active members of job %s are %v, were %v before it (less the dead)", what, after.App, got, want))
	}
	if !maps.Equal(nonZero(slotsBefore), nonZero(slotsAfter)) {
		out = append(out, viol(InvChanges, key+" slots", "%s but job %s holds slots %v, held %v before it (less the dead)", what, after.App, nonZero(slotsAfter), nonZero(slotsBefore)))
	}
	if ranks && after.NextRank != before.NextRank {
		out = append(out, viol(InvChanges, key+" next", "%s but job %s's next rank is %d, was %d before it", what, after.App, after.NextRank, before.NextRank))
	}
	return out
}

func procOf(j Job, rank uint32) (Proc, bool) {
	for _, p := range j.Procs {
		if p.Rank == rank {
			return p, true
		}
	}
	return Proc{}, false
}

func rankList(in map[uint32]string, drop map[uint32]bool) []uint32 {
	var out []uint32
	for r := range in {
		if !drop[r] {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func nonZero(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// (e)
func checkExits(ended []Ended) []Violation {
	var out []Violation
	for _, e := range ended {
		switch {
		case slices.Contains(e.Allowed, e.Code):
		case e.Shrink:
			out = append(out, viol(InvFailure, e.App+" ended", "shrink job %s ended with status %d, the rule allows %v: a loss must not end a shrink job that can be kept (%s)", e.App, e.Code, e.Allowed, e.Why))
		default:
			out = append(out, viol(InvExit, e.App, "dynrun of job %s exited %d, the rule allows %v (%s)", e.App, e.Code, e.Allowed, e.Why))
		}
	}
	return out
}

// (g) Failure changes (--on-failure shrink or replace, docs/rc.md
// "Failures as changes"): the lost ranks of a failure change (a SUB's
// delta, a REPLACE's replaced ranks) are only processes that are dead, and
// no lost rank is removed by two failure changes that were not aborted
// (an aborted one hands its ranks on to the next).
func checkFailures(s *Snapshot) []Violation {
	var out []Violation
	seen := map[string]string{} // job + rank → the failure change that removed it
	for _, c := range s.Changes {
		if !c.Failure {
			continue
		}
		j, ok := s.job(c.Job)
		for _, r := range c.Lost {
			if p, found := procOf(j, r); ok && found && s.live(p) {
				out = append(out, viol(InvFailure, c.Delta+" live "+itoa(int(r)), "failure change %s removes rank %d of job %s, which is alive (pid %d on %s)", c.Delta, r, j.App, p.PID, p.Node))
			}
			if c.Status == wire.RCAborted {
				continue
			}
			key := c.Job + " " + itoa(int(r))
			if first, dup := seen[key]; dup {
				out = append(out, viol(InvFailure, key+" twice", "rank %d of job %s is lost twice: in failure changes %s and %s", r, c.Job, first, c.Delta))
				continue
			}
			seen[key] = c.Delta
		}
	}
	return out
}
