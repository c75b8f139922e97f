package top

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/dynrt/dynrt/lib/psetview"
	"github.com/dynrt/dynrt/wire"
)

// logSize is how many events the log keeps.
const logSize = 1000

// State is what dyntop knows about the DVM: the last snapshot, kept
// current by the event stream. It is plain data updated by Apply* methods;
// the Model owns one.
type State struct {
	ID, Name, Version string
	Started           time.Time // master start (its clock)
	Nodes             []Node
	Jobs              []*Job // by job number
	RCs               []wire.RC
	// Slots is the master's exact slot map: used slots by global index,
	// slot -1 for oversubscribed processes. Empty from an older master;
	// the slot map then falls back to an approximate layout.
	Slots   []wire.SlotUse
	Log     []wire.Event // newest last, at most logSize
	LastSeq uint64       // highest event Seq applied
	Events  uint64       // events applied since start

	// snapNS is the master's clock when the last snapshot was taken:
	// events up to then are already in it and only go to the log (the
	// feeder subscribes with a replay of recent history, and events race
	// with the snapshot).
	snapNS int64

	jobs map[string]*Job
	rcs  map[string]int // delta → index in RCs
}

// Node is one node of the DVM.
type Node struct {
	wire.NodeInfo
}

// Job is one job as dyntop shows it.
type Job struct {
	Info  wire.JobInfo               // Placement is kept current from process events
	Place map[string]wire.RankRanges // live ranks by node name
	Psets []wire.PsetInfo            // latest versions, with members when known
	// PsetsStale is set when an event announced a set change whose
	// members have not been fetched yet.
	PsetsStale bool

	tree    []*psetview.Node // cached hierarchy, rebuilt when Psets change
	treeFor string           // delta the cache was built for
	treeOK  bool
}

// Live reports whether the job is still running.
func (j *Job) Live() bool {
	switch j.Info.State {
	case wire.JobStateDone, wire.JobStateFailed, wire.JobStateKilled:
		return false
	}
	return true
}

// Size is the number of live processes by placement.
func (j *Job) Size() int {
	n := 0
	for _, rr := range j.Place {
		n += rr.Count()
	}
	return n
}

// Tree is the job's set hierarchy (thesis fig. 6.1), cached.
func (j *Job) Tree() []*psetview.Node {
	delta := j.Info.Delta
	if !j.treeOK || j.treeFor != delta {
		j.tree, j.treeFor, j.treeOK = psetview.Tree(j.Psets, delta), delta, true
	}
	return j.tree
}

// NewState returns an empty state.
func NewState() *State {
	return &State{jobs: map[string]*Job{}, rcs: map[string]int{}}
}

// Job returns the job with namespace ns, or nil.
func (s *State) Job(ns string) *Job { return s.jobs[ns] }

func (s *State) job(ns string) *Job {
	j := s.jobs[ns]
	if j == nil {
		j = &Job{Info: wire.JobInfo{Job: ns, ID: jobNumber(ns), State: wire.JobStateLaunching}, Place: map[string]wire.RankRanges{}}
		s.jobs[ns] = j
		s.Jobs = append(s.Jobs, j)
		slices.SortStableFunc(s.Jobs, func(a, b *Job) int { return cmp.Compare(a.Info.ID, b.Info.ID) })
	}
	return j
}

// jobNumber reads the job number from a namespace "<dvm>.<n>".
func jobNumber(ns string) uint32 {
	i := strings.LastIndexByte(ns, '.')
	var n uint32
	for _, c := range ns[i+1:] {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + uint32(c-'0')
	}
	return n
}

// ApplySnapshot replaces what the state knows about nodes, jobs and
// changes by a fresh snapshot. Sets already fetched are kept.
func (s *State) ApplySnapshot(snap Snapshot) {
	st := snap.State
	if st.ID != s.ID || (st.Started != 0 && !s.Started.Equal(time.Unix(0, st.Started))) {
		s.LastSeq = 0 // another DVM (or a restarted master) numbers its events afresh
	}
	s.ID, s.Version = st.ID, st.Version
	if snap.Name != "" {
		s.Name = snap.Name
	}
	if st.Started != 0 {
		s.Started = time.Unix(0, st.Started)
		s.snapNS = max(s.snapNS, st.Started+st.Uptime)
	}
	s.Nodes = s.Nodes[:0]
	for _, n := range st.Nodes {
		s.Nodes = append(s.Nodes, Node{n})
	}
	s.ApplySlots(st.Slots)
	seen := map[string]bool{}
	for _, in := range st.Jobs {
		s.ApplyJob(in)
		seen[in.Job] = true
	}
	// Jobs the master forgot (ended long ago) go; ended jobs that the
	// snapshot does not list (it lists live ones only) stay as ended.
	for _, j := range s.Jobs {
		if !seen[j.Info.Job] && j.Live() {
			j.Info.State = wire.JobStateDone
			j.Place = map[string]wire.RankRanges{}
		}
	}
	rcs := st.RCs
	if snap.RCs != nil {
		rcs = snap.RCs
	}
	for _, rc := range rcs {
		s.ApplyRC(rc)
	}
}

// ApplyJob replaces one job's description (placement included).
func (s *State) ApplyJob(in wire.JobInfo) {
	j := s.job(in.Job)
	j.Info = in
	j.Info.Procs = nil
	j.Place = make(map[string]wire.RankRanges, len(in.Placement))
	for _, p := range in.Placement {
		j.Place[p.Node] = slices.Clone(p.Ranks)
	}
	j.treeOK = false
}

// ApplySlots replaces the slot map.
func (s *State) ApplySlots(slots []wire.SlotUse) { s.Slots = slices.Clone(slots) }

// ApplyPsets replaces the sets of a job.
func (s *State) ApplyPsets(job string, sets []wire.PsetInfo) {
	j := s.job(job)
	j.Psets = sets
	j.PsetsStale = false
	j.treeOK = false
}

// ApplyRC records a change, keeping the newest update of each.
func (s *State) ApplyRC(rc wire.RC) {
	if i, ok := s.rcs[rc.Delta]; ok {
		if rc.Seq != 0 && rc.Seq < s.RCs[i].Seq {
			return // an older update that arrived late
		}
		s.RCs[i] = rc
	} else {
		s.rcs[rc.Delta] = len(s.RCs)
		s.RCs = append(s.RCs, rc)
	}
	if j := s.jobs[rc.Job]; j != nil {
		switch {
		case !rcFinal(rc.Status):
			j.Info.Delta = rc.Delta
		case j.Info.Delta == rc.Delta:
			j.Info.Delta = ""
		}
	}
}

func rcFinal(status string) bool { return status == wire.RCFinalized || status == wire.RCAborted }

// ApplyEvent updates the state from one event of the bus (events older
// than the last snapshot only go to the log).
func (s *State) ApplyEvent(ev wire.Event) {
	if ev.Seq != 0 && ev.Seq <= s.LastSeq {
		// Seen already: after a reconnection to the same DVM the feeder
		// subscribes with a replay of the bus's recent history again.
		return
	}
	s.Events++
	if ev.Seq > s.LastSeq {
		s.LastSeq = ev.Seq
	}
	if len(s.Log) >= logSize {
		// drop the oldest quarter at once, so appends stay amortised O(1)
		n := copy(s.Log, s.Log[logSize/4:])
		clear(s.Log[n:])
		s.Log = s.Log[:n]
	}
	s.Log = append(s.Log, ev)
	if ev.Time != 0 && ev.Time <= s.snapNS {
		return // the snapshot already holds its effect
	}
	switch ev.Kind {
	case wire.EvJobState:
		j := s.job(ev.Job)
		j.Info.State = ev.State
		if !j.Live() {
			j.Info.Code = ev.Code
			j.Info.Ended = ev.Time
			j.Info.Delta = ""
		}
	case wire.EvProcState:
		j := s.job(ev.Job)
		switch ev.State {
		case wire.ProcStateRunning, wire.ProcStateLaunching:
			if ev.Node != "" {
				for name, rr := range j.Place {
					if name != ev.Node {
						j.Place[name] = psetview.Difference(rr, ev.Ranks)
					}
				}
				j.Place[ev.Node] = psetview.Union(j.Place[ev.Node], ev.Ranks)
			}
		default: // exited, failed, killed
			for name, rr := range j.Place {
				if left := psetview.Difference(rr, ev.Ranks); len(left) > 0 {
					j.Place[name] = left
				} else {
					delete(j.Place, name)
				}
			}
		}
		j.Info.Size = uint32(j.Size())
		if top := ev.Ranks; len(top) > 0 && top[len(top)-1].Hi >= j.Info.NextRank {
			j.Info.NextRank = top[len(top)-1].Hi + 1
		}
	case wire.EvPsetDef:
		if ev.Pset == nil {
			return
		}
		j := s.job(ev.Job)
		p := *ev.Pset
		known := p.Members.Count() == int(p.Size)
		i := slices.IndexFunc(j.Psets, func(x wire.PsetInfo) bool { return x.Name == p.Name })
		switch {
		case i >= 0 && !known && j.Psets[i].Version == p.Version:
			p.Members = j.Psets[i].Members // attributes changed only
		case !known:
			j.PsetsStale = true
		}
		if i >= 0 {
			j.Psets[i] = p
		} else {
			j.Psets = append(j.Psets, p)
			slices.SortFunc(j.Psets, func(a, b wire.PsetInfo) int { return cmp.Compare(a.Name, b.Name) })
		}
		j.treeOK = false
	case wire.EvPsetDel:
		if ev.Pset == nil {
			return
		}
		j := s.job(ev.Job)
		j.Psets = slices.DeleteFunc(j.Psets, func(x wire.PsetInfo) bool { return x.Name == ev.Pset.Name })
		j.treeOK = false
	case wire.EvRCState, wire.EvRCUpdate:
		if ev.RC != nil {
			s.ApplyRC(*ev.RC)
		}
	case wire.EvNodeRemoved:
		// The node left the DVM: its row goes at once (the snapshot that
		// follows no longer lists it).
		s.Nodes = slices.DeleteFunc(s.Nodes, func(n Node) bool { return n.Name == ev.Node })
	case wire.EvNodeUp, wire.EvNodeSuspect, wire.EvNodeDown, wire.EvNodeAdded, wire.EvNodeLeaving:
		st := map[string]string{wire.EvNodeUp: wire.NodeUp, wire.EvNodeSuspect: wire.NodeSuspect, wire.EvNodeDown: wire.NodeDown,
			wire.EvNodeAdded: wire.NodeUp, wire.EvNodeLeaving: wire.NodeLeaving}[ev.Kind]
		for i := range s.Nodes {
			if s.Nodes[i].Name == ev.Node {
				s.Nodes[i].State = st
			}
		}
	}
}

// Used returns the number of slots used on each node (by node name),
// counted from the live placement of every job.
func (s *State) Used() map[string]int {
	out := make(map[string]int, len(s.Nodes))
	for _, j := range s.Jobs {
		for node, rr := range j.Place {
			out[node] += rr.Count()
		}
	}
	return out
}

// Counts summarises jobs and changes for the header.
type Counts struct {
	JobsLive, JobsEnded              int
	RCFlight, RCFinalized, RCAborted int
	Slots, Used, NodesUp             int
	NodesSuspect                     int // missing heartbeats; not counted in NodesUp
}

// Count computes the header's numbers.
func (s *State) Count() Counts {
	var c Counts
	for _, j := range s.Jobs {
		if j.Live() {
			c.JobsLive++
		} else {
			c.JobsEnded++
		}
	}
	for _, rc := range s.RCs {
		switch rc.Status {
		case wire.RCFinalized:
			c.RCFinalized++
		case wire.RCAborted:
			c.RCAborted++
		default:
			c.RCFlight++
		}
	}
	used := s.Used()
	for _, n := range s.Nodes {
		c.Slots += int(n.Slots)
		c.Used += min(used[n.Name], int(n.Slots))
		switch n.State {
		case wire.NodeDown:
		case wire.NodeSuspect:
			c.NodesSuspect++
		default:
			c.NodesUp++
		}
	}
	return c
}

// RCsOf lists the changes of one job ("" = all), newest first.
func (s *State) RCsOf(job string) []wire.RC {
	var out []wire.RC
	for i := len(s.RCs) - 1; i >= 0; i-- {
		if job == "" || s.RCs[i].Job == job {
			out = append(out, s.RCs[i])
		}
	}
	return out
}
