package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Op is what a step asks of the DVM.
type Op string

// Operations.
const (
	OpLaunch     Op = "launch"     // start a malleable job (dynrun -n N), maybe split, keep-going, or asking for its own change
	OpAdd        Op = "add"        // ADD N, bound to the application set or to one of a split job's sets
	OpSub        Op = "sub"        // SUB N
	OpSubRanks   Op = "subranks"   // SUB of explicit ranks
	OpCancel     Op = "cancel"     // ADD or SUB, cancelled while in flight
	OpConcurrent Op = "concurrent" // ADD on one job and SUB on another at once, plus a second request that must be refused as busy
	OpEnd        Op = "end"        // end a job: SIGTERM to its dynrun
	OpIdle       Op = "idle"       // nothing but the step's fault
	OpGrow       Op = "grow"       // elastic runs: dvm grow by one virtual node
	OpShrink     Op = "shrink"     // elastic runs: dvm shrink --drain of a node (not node 0)
	OpReplace    Op = "replace"    // replace runs: REPLACE of 1 process (the runtime's choice) by a new one
)

// Fault is a failure a step injects while its operation runs.
type Fault string

// Faults. Process faults hit a process of the step's job: an old member
// (one that stays), a process the step's ADD started, or one its SUB
// removes.
const (
	FaultNone           Fault = ""
	FaultKillOld        Fault = "kill9-old"       // kill -9 an old member
	FaultKillNew        Fault = "kill9-new"       // kill -9 a process an ADD started, before it is FINALIZED
	FaultKillLeaving    Fault = "kill9-leaving"   // kill -9 a process a SUB removes
	FaultStopOld        Fault = "stop-old"        // SIGSTOP an old member, SIGCONT after Delay
	FaultStopNew        Fault = "stop-new"        // SIGSTOP a process an ADD started, SIGCONT after Delay
	FaultStopLeaving    Fault = "stop-leaving"    // SIGSTOP a process a SUB removes, SIGCONT after Delay
	FaultConfirmTimeout Fault = "confirm-timeout" // ADD with a 1 s confirm timeout whose new processes are stopped past it
	FaultKillDaemon     Fault = "kill9-daemon"    // kill -9 a node daemon, then rejoin the node
	FaultHangDaemon     Fault = "hang-daemon"     // SIGSTOP a node daemon for Delay, then SIGCONT
	FaultStopDVM        Fault = "dvm-stop"        // `dvm stop` while the operation runs, then a new DVM
	FaultHostile        Fault = "hostile-client"  // a client that floods requests and never reads, and one that sends garbage
)

// AllFaults lists every fault kind.
var AllFaults = []Fault{FaultKillOld, FaultKillNew, FaultKillLeaving, FaultStopOld, FaultStopNew, FaultStopLeaving,
	FaultConfirmTimeout, FaultKillDaemon, FaultHangDaemon, FaultStopDVM, FaultHostile}

// procFault returns the signal and the target of a process fault (ok is
// false for the other kinds).
func procFault(f Fault) (kill bool, t Target, ok bool) {
	switch f {
	case FaultKillOld, FaultKillNew, FaultKillLeaving:
		kill = true
	case FaultStopOld, FaultStopNew, FaultStopLeaving:
	default:
		return false, "", false
	}
	_, target, _ := strings.Cut(string(f), "-")
	return kill, Target(target), true
}

// Target says which process a process fault hits.
type Target string

// Targets of process faults.
const (
	TargetOld     Target = "old"     // a member that stays
	TargetNew     Target = "new"     // a process the ADD started
	TargetLeaving Target = "leaving" // a process the SUB removes
)

// Step is one step of a chaos run. The Pick fields choose among what the
// DVM has when the step runs (job, process, node), so that a step list
// is a pure function of the seed.
type Step struct {
	N         int           // 1-based step number
	Op        Op            // operation
	Count     int           // processes to launch, add or remove
	Split     bool          // launch: the job splits its application set into two active sets
	KeepGoing bool          // launch: --keep-going
	Request   string        // launch: the change the application asks for itself ("add:1"), else ""
	SubSet    bool          // add/sub: bind to one of a split job's sets rather than the application set
	CancelSub bool          // cancel: the change cancelled is a SUB (else an ADD)
	Fault     Fault         // fault injected during the operation
	Target    Target        // process faults: which process (from Fault)
	Delay     time.Duration // cancel: after the request; stop/hang faults: how long stopped
	JobPick   uint32        // which job
	PeerPick  uint32        // concurrent: the second job
	ProcPick  uint32        // which process (or ranks, for subranks)
	NodePick  uint32        // which node's daemon
}

// String is the step as printed in a run's log and in a failure report.
func (s Step) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s", s.N, s.Op)
	if s.Count > 0 {
		fmt.Fprintf(&b, " n=%d", s.Count)
	}
	for _, f := range []struct {
		on   bool
		word string
	}{{s.Split, "split"}, {s.KeepGoing, "keep-going"}, {s.SubSet, "subset"}, {s.Op == OpCancel && s.CancelSub, "of-sub"}} {
		if f.on {
			b.WriteString(" " + f.word)
		}
	}
	if s.Request != "" {
		b.WriteString(" request=" + s.Request)
	}
	if s.Fault != FaultNone {
		b.WriteString(" fault=" + string(s.Fault))
	}
	if s.Delay > 0 {
		fmt.Fprintf(&b, " delay=%s", s.Delay)
	}
	fmt.Fprintf(&b, " pick=%d/%d/%d/%d", s.JobPick, s.PeerPick, s.ProcPick, s.NodePick)
	return b.String()
}

// GenConfig shapes a generated step list.
type GenConfig struct {
	Steps     int     // how many
	Faults    []Fault // fault kinds that may be injected
	FaultRate float64 // probability that a step injects a fault (0..1)
	// Elastic adds dvm grow and dvm shrink --drain steps (the DVM gains
	// and loses nodes). Off, the steps of a seed are those of before.
	Elastic bool
	// Replace adds REPLACE requests (an operator replacing a process).
	// Off, the steps of a seed are those of before.
	Replace bool
}

// Validate reports a configuration that cannot generate a run.
func (c GenConfig) Validate() error {
	if c.Steps < 1 {
		return fmt.Errorf("chaos: %d steps: want at least 1", c.Steps)
	}
	if c.FaultRate < 0 || c.FaultRate > 1 {
		return fmt.Errorf("chaos: fault rate %g: want a number from 0 to 1", c.FaultRate)
	}
	for _, f := range c.Faults {
		if !slices.Contains(AllFaults, f) {
			return fmt.Errorf("chaos: unknown fault %q (known: %s)", f, FaultNames(AllFaults))
		}
	}
	return nil
}

// FaultNames joins fault kinds with commas.
func FaultNames(fs []Fault) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, ",")
}

// ParseFaults reads a comma-separated list of fault kinds; "all" is every
// kind, "" none.
func ParseFaults(s string) ([]Fault, error) {
	if s == "all" {
		return slices.Clone(AllFaults), nil
	}
	var out []Fault
	for _, w := range strings.Split(s, ",") {
		w = strings.TrimSpace(w)
		if w == "" {
			continue
		}
		f := Fault(w)
		if !slices.Contains(AllFaults, f) {
			return nil, fmt.Errorf("chaos: unknown fault %q (known: %s, or all)", w, FaultNames(AllFaults))
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// Generate returns the step list of seed: the same seed and configuration
// give the same list, so a failing run replays.
func Generate(seed uint64, c GenConfig) ([]Step, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	steps := make([]Step, 0, c.Steps)
	for i := range c.Steps {
		s := Step{N: i + 1, JobPick: r.Uint32(), PeerPick: r.Uint32(), ProcPick: r.Uint32(), NodePick: r.Uint32()}
		// The first steps start jobs, without faults: the others need a
		// job.
		switch {
		case i < 2:
			s.Op = OpLaunch
		default:
			s.Op = pickOp(r, opsOf(c))
		}
		shapeOp(r, &s)
		if i >= 2 && len(c.Faults) > 0 && r.Float64() < c.FaultRate {
			addFault(r, &s, c.Faults)
		}
		steps = append(steps, s)
	}
	return steps, nil
}

// Weights of the operations, in the order of ops.
var ops = []struct {
	op Op
	w  int
}{{OpLaunch, 2}, {OpAdd, 6}, {OpSub, 4}, {OpSubRanks, 2}, {OpCancel, 2}, {OpConcurrent, 2}, {OpEnd, 1}, {OpIdle, 1}}

// elasticOps are the weights of an elastic run: ops plus nodes that join
// and leave.
var elasticOps = append(slices.Clone(ops), []struct {
	op Op
	w  int
}{{OpGrow, 2}, {OpShrink, 2}}...)

// replaceOp is the weight of REPLACE requests in a replace run.
var replaceOp = struct {
	op Op
	w  int
}{OpReplace, 3}

// opsOf is the weight table of a run with configuration c.
func opsOf(c GenConfig) []struct {
	op Op
	w  int
} {
	t := ops
	if c.Elastic {
		t = elasticOps
	}
	if c.Replace {
		t = append(slices.Clone(t), replaceOp)
	}
	return t
}

func pickOp(r *rand.Rand, ops []struct {
	op Op
	w  int
}) Op {
	total := 0
	for _, o := range ops {
		total += o.w
	}
	n := r.IntN(total)
	for _, o := range ops {
		if n < o.w {
			return o.op
		}
		n -= o.w
	}
	return OpIdle
}

func shapeOp(r *rand.Rand, s *Step) {
	switch s.Op {
	case OpLaunch:
		s.Count = 2 + r.IntN(2)
		s.Split = r.IntN(4) == 0
		s.KeepGoing = r.IntN(5) == 0
		if !s.Split && r.IntN(4) == 0 {
			s.Request = "add:1"
		}
	case OpAdd:
		s.Count = 1 + r.IntN(2)
		s.SubSet = r.IntN(3) == 0
	case OpSub, OpSubRanks:
		s.Count = 1
		if s.Op == OpSubRanks {
			s.Count = 1 + r.IntN(2)
		}
		s.SubSet = s.Op == OpSub && r.IntN(3) == 0
	case OpCancel:
		s.Count = 1
		s.CancelSub = r.IntN(2) == 0
		s.Delay = time.Duration(r.IntN(300)) * time.Millisecond
	case OpConcurrent, OpReplace:
		s.Count = 1
	}
}

// addFault picks a fault and shapes the step's operation to carry it.
func addFault(r *rand.Rand, s *Step, enabled []Fault) {
	f := enabled[r.IntN(len(enabled))]
	clearLaunch := func() { s.Split, s.KeepGoing, s.Request = false, false, "" }
	if kill, target, ok := procFault(f); ok {
		switch target {
		case TargetNew:
			if s.Op != OpAdd {
				clearLaunch()
				s.Op, s.Count = OpAdd, 1+r.IntN(2)
			}
		case TargetLeaving:
			if s.Op != OpSub && s.Op != OpSubRanks {
				clearLaunch()
				s.Op, s.Count = OpSub, 1
			}
		case TargetOld:
			if s.Op == OpLaunch || s.Op == OpEnd {
				// The job of a launch has no old members yet, and the one
				// of an end is going anyway: hit a running job at rest.
				clearLaunch()
				s.Op, s.Count = OpIdle, 0
			}
		}
		s.Target = target
		if !kill {
			s.Delay = time.Duration(200+r.IntN(2800)) * time.Millisecond
		}
	}
	switch f {
	case FaultConfirmTimeout:
		// Only an ADD has new processes to confirm.
		*s = Step{N: s.N, Op: OpAdd, Count: 1 + r.IntN(2), JobPick: s.JobPick, PeerPick: s.PeerPick, ProcPick: s.ProcPick, NodePick: s.NodePick}
	case FaultHangDaemon:
		s.Delay = time.Duration(1000+r.IntN(7000)) * time.Millisecond
	}
	s.Fault = f
}
