package chaos

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

var t0 = time.Unix(1_700_000_000, 0)

// good is a settled DVM: node0 (the master's own) and node1, job j1 with
// rank 0 on node0 and rank 1 on node1, both in mpi://app/j1, its dynrun
// running, one finalized change.
func good() *Snapshot {
	return &Snapshot{
		Nodes: []Node{{Name: "node0", Slots: 2, Used: 1, State: wire.NodeUp, PID: 100}, {Name: "node1", Slots: 2, Used: 1, State: wire.NodeUp, PID: 101}},
		Jobs: []Job{{
			Job: "d.1", App: "j1", State: wire.JobStateRunning, NextRank: 2,
			Procs: []Proc{{Rank: 0, Node: "node0", PID: 200, State: wire.ProcStateRunning}, {Rank: 1, Node: "node1", PID: 201, State: wire.ProcStateRunning}},
			Sets:  []Set{{Name: "mpi://app/j1", Version: 2, Active: true, Members: []uint32{0, 1}}, {Name: "mpi://app/j1/other", Version: 0, Members: []uint32{0, 1, 7}}},
		}},
		Changes:       []Change{{Delta: "mpi://rte/j1/rc/1", Job: "d.1", Type: wire.RCAdd, Status: wire.RCFinalized, Settled: true, Requested: t0, Limit: 20 * time.Second}},
		OS:            map[int]OSProc{100: {PID: 100}, 101: {PID: 101}, 200: {PID: 200}, 201: {PID: 201}, 300: {PID: 300}},
		MasterPID:     100,
		Launchers:     map[int]bool{300: true},
		StatusLatency: 5 * time.Millisecond,
	}
}

// aborted adds to s an ABORTED change of j1 of type typ.
func aborted(s *Snapshot, typ string) *Snapshot {
	s.Changes = append(s.Changes, Change{Delta: "mpi://rte/j1/rc/2", Job: "d.1", Type: typ, Status: wire.RCAborted, Settled: true, Requested: t0, Limit: 20 * time.Second})
	return s
}

func TestCheckCatchesEachInvariant(t *testing.T) {
	for _, tt := range []struct {
		name  string
		prev  *Snapshot
		cur   func(s *Snapshot)
		facts Facts
		want  []Invariant
		frag  string // in the first violation
	}{
		{name: "settled DVM", cur: func(*Snapshot) {}},
		{name: "a: live rank outside the active sets", cur: func(s *Snapshot) { s.Jobs[0].Sets[0].Members = []uint32{0} },
			want: []Invariant{InvSets}, frag: "live rank 1 (pid 201 on node1) is in no latest active set"},
		{name: "a: dead rank in the active set", cur: func(s *Snapshot) {
			s.Jobs[0].Procs[1].State = wire.ProcStateExited
			s.Nodes[1].Used = 0
			delete(s.OS, 201)
		}, want: []Invariant{InvSets}, frag: "dead rank 1 (state exited, pid 201) is in mpi://app/j1@2"},
		{name: "a: member without a process", cur: func(s *Snapshot) { s.Jobs[0].Sets[0].Members = []uint32{0, 1, 5} },
			want: []Invariant{InvSets}, frag: "rank 5 in mpi://app/j1@2 has no process"},
		{name: "a: inactive set of the application does not count", cur: func(s *Snapshot) {
			s.Jobs[0].Sets[0].Active = false
			s.Jobs[0].Sets = append(s.Jobs[0].Sets, Set{Name: "mpi://app/j1/a", Active: true, Members: []uint32{0}}, Set{Name: "mpi://app/j1/b", Active: true, Members: []uint32{1}})
		}},
		{name: "a: another job's active set does not count", cur: func(s *Snapshot) {
			s.Jobs[0].Sets[0] = Set{Name: "mpi://app/j10", Active: true, Members: []uint32{0, 1}}
		}, want: []Invariant{InvSets, InvSets}},
		{name: "b: slots leaked", cur: func(s *Snapshot) { s.Nodes[1].Used = 2 },
			want: []Invariant{InvSlots}, frag: "node node1: 2 slots used, 1 live processes placed there"},
		{name: "b: the master counts a process the OS has lost", cur: func(s *Snapshot) { delete(s.OS, 201) },
			want: []Invariant{InvSets, InvSlots}},
		{name: "c: a process nobody owns", cur: func(s *Snapshot) { s.OS[400] = OSProc{PID: 400, PPID: 1, Cmd: "malleable"} },
			want: []Invariant{InvOrphans}, frag: "pid 400 (malleable, parent 1) belongs to no running job, daemon or DVM"},
		{name: "c: a rank outlives its daemon", cur: func(s *Snapshot) {
			s.Nodes[1].State = wire.NodeDown
			delete(s.OS, 101)
		}, want: []Invariant{InvOrphans, InvOrphans}, frag: "job j1: rank 1 (pid 201) outlives the daemon of node1"},
		{name: "c: a process of an ended job", cur: func(s *Snapshot) {
			s.Jobs = append(s.Jobs, Job{Job: "d.2", App: "j2", State: wire.JobStateKilled, Procs: []Proc{{Rank: 0, Node: "node0", PID: 500, State: wire.ProcStateRunning}}})
			s.OS[500] = OSProc{PID: 500}
		}, want: []Invariant{InvOrphans}},
		{name: "c: anything left after the DVM", cur: func(s *Snapshot) {
			*s = Snapshot{Stopped: true, OS: map[int]OSProc{201: {PID: 201, PPID: 1, Cmd: "malleable"}}}
		}, want: []Invariant{InvOrphans}, frag: "outlives the DVM"},
		{name: "c: the harness's launchers may run", cur: func(s *Snapshot) {
			*s = Snapshot{Stopped: true, OS: map[int]OSProc{300: {PID: 300}}, Launchers: map[int]bool{300: true}}
		}},
		{name: "g: a failure change of a dead rank", cur: func(s *Snapshot) {
			rank1Dead(s)
			s.Changes = append(s.Changes, failureChange("mpi://rte/j1/rc/2", wire.RCSub, wire.RCFinalized, 1))
		}},
		{name: "g: a failure change of a live rank", cur: func(s *Snapshot) {
			s.Changes = append(s.Changes, failureChange("mpi://rte/j1/rc/2", wire.RCSub, wire.RCFinalized, 1))
		}, want: []Invariant{InvFailure}, frag: "failure change mpi://rte/j1/rc/2 removes rank 1 of job j1, which is alive (pid 201 on node1)"},
		{name: "g: a rank lost twice", cur: func(s *Snapshot) {
			rank1Dead(s)
			for _, d := range []string{"mpi://rte/j1/rc/2", "mpi://rte/j1/rc/3"} {
				s.Changes = append(s.Changes, failureChange(d, wire.RCSub, wire.RCFinalized, 1))
			}
		}, want: []Invariant{InvFailure}, frag: "rank 1 of job d.1 is lost twice: in failure changes mpi://rte/j1/rc/2 and mpi://rte/j1/rc/3"},
		{name: "g: an aborted failure change hands its rank on", cur: func(s *Snapshot) {
			rank1Dead(s)
			s.Changes = append(s.Changes,
				failureChange("mpi://rte/j1/rc/2", wire.RCSub, wire.RCAborted, 1),
				failureChange("mpi://rte/j1/rc/3", wire.RCSub, wire.RCFinalized, 1))
		}},
		{name: "g: a failure REPLACE of a dead rank by a live one", cur: func(s *Snapshot) {
			rank1Dead(s)
			s.Changes = append(s.Changes, failureChange("mpi://rte/j1/rc/2", wire.RCReplace, wire.RCAborted, 0))
		}},
		{name: "g: a failure REPLACE of a live rank", cur: func(s *Snapshot) {
			s.Changes = append(s.Changes, failureChange("mpi://rte/j1/rc/2", wire.RCReplace, wire.RCAborted, 0))
		}, want: []Invariant{InvFailure}, frag: "failure change mpi://rte/j1/rc/2 removes rank 1 of job j1, which is alive"},
		{name: "g: a shrink job ended by a loss", cur: func(*Snapshot) {},
			facts: Facts{Ended: []Ended{{App: "j2", Code: 137, Allowed: []int{143}, Why: "sigterm to dynrun", Shrink: true}}},
			want:  []Invariant{InvFailure}, frag: "shrink job j2 ended with status 137, the rule allows [143]"},
		{name: "d: a change past its limit", cur: func(s *Snapshot) { s.Changes[0].Status = wire.RCAnnounced },
			facts: Facts{Now: t0.Add(21 * time.Second)}, want: []Invariant{InvChanges}, frag: "mpi://rte/j1/rc/1 (ADD) still ANNOUNCED 21s after its request (limit 20s)"},
		{name: "d: a change within its limit", cur: func(s *Snapshot) { s.Changes[0].Status = wire.RCPending },
			facts: Facts{Now: t0.Add(19 * time.Second)}},
		{name: "d: aborted ADD restored", prev: good(), cur: func(s *Snapshot) { aborted(s, wire.RCAdd) }},
		{name: "d: aborted ADD kept its ranks counted", prev: good(), cur: func(s *Snapshot) { aborted(s, wire.RCAdd).Jobs[0].NextRank = 4 },
			want: []Invariant{InvChanges}, frag: "next rank is 4, was 2 before it"},
		{name: "d: aborted ADD left a new process in the set", prev: good(), cur: func(s *Snapshot) {
			aborted(s, wire.RCAdd)
			s.Jobs[0].Sets[0].Members = []uint32{0, 1, 2}
			s.Jobs[0].Procs = append(s.Jobs[0].Procs, Proc{Rank: 2, Node: "node1", PID: 202, State: wire.ProcStateRunning})
			s.OS[202] = OSProc{PID: 202}
			s.Nodes[1].Used = 2
		}, want: []Invariant{InvChanges, InvChanges}, frag: "are [0 1 2], were [0 1] before it"},
		{name: "d: aborted SUB removed a member anyway", prev: good(), cur: func(s *Snapshot) {
			aborted(s, wire.RCSub)
			s.Jobs[0].Sets[0].Members = []uint32{0}
		}, want: []Invariant{InvSets, InvChanges}},
		{name: "d: aborted SUB, a member died meanwhile", prev: good(), cur: func(s *Snapshot) {
			aborted(s, wire.RCSub)
			s.Jobs[0].Sets[0].Members = []uint32{0}
			s.Jobs[0].Procs[1].State = wire.ProcStateExited
			delete(s.OS, 201)
			s.Nodes[1].Used = 0
		}},
		{name: "d: a refused request changed nothing", prev: good(), cur: func(*Snapshot) {}, facts: Facts{Refused: []string{"d.1"}}},
		{name: "d: a refused request kept a slot", prev: good(), cur: func(s *Snapshot) {
			s.Nodes[1].Used = 2
			s.Jobs[0].NextRank = 3
		}, facts: Facts{Refused: []string{"d.1"}}, want: []Invariant{InvSlots, InvChanges}, frag: "a refused request but job j1's next rank is 3, was 2 before it"},
		{name: "d: a request refused after it was numbered is judged as its aborted change", prev: good(), cur: func(s *Snapshot) {
			aborted(s, wire.RCSub).Jobs[0].NextRank = 4
		}, facts: Facts{Refused: []string{"d.1"}}},
		{name: "d: a change not of this step is not compared", prev: aborted(good(), wire.RCSub), cur: func(s *Snapshot) {
			aborted(s, wire.RCSub).Jobs[0].Sets[0].Members = []uint32{0, 1, 2}
			s.Jobs[0].Procs = append(s.Jobs[0].Procs, Proc{Rank: 2, Node: "node1", PID: 202, State: wire.ProcStateRunning})
			s.OS[202] = OSProc{PID: 202}
			s.Nodes[1].Used = 2
		}},
		{name: "e: wrong exit status", cur: func(*Snapshot) {}, facts: Facts{Ended: []Ended{{App: "j1", Code: 0, Allowed: []int{137}, Why: "kill -9"}}},
			want: []Invariant{InvExit}, frag: "dynrun of job j1 exited 0, the rule allows [137] (kill -9)"},
		{name: "e: right exit status", cur: func(*Snapshot) {}, facts: Facts{Ended: []Ended{{App: "j1", Code: 137, Allowed: []int{137}}}}},
		{name: "f: slow dvm status", cur: func(s *Snapshot) { s.StatusLatency = 1500 * time.Millisecond },
			want: []Invariant{InvStatus}, frag: "dvm status answered after 1.5s (limit 1s)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cur := good()
			tt.cur(cur)
			if tt.facts.Now.IsZero() {
				tt.facts.Now = t0.Add(time.Second)
			}
			vs := Check(tt.prev, cur, tt.facts)
			var got []Invariant
			for _, v := range vs {
				got = append(got, v.Inv)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("violations %v, want %v:\n%v", got, tt.want, vs)
			}
			if tt.frag != "" && !strings.Contains(vs[0].What, tt.frag) && !strings.Contains(vs[len(vs)-1].What, tt.frag) {
				t.Errorf("violation %q lacks %q", vs, tt.frag)
			}
			for _, v := range vs {
				if !strings.HasPrefix(v.Key, string(v.Inv)+" ") {
					t.Errorf("violation %v: key %q does not name its invariant", v, v.Key)
				}
			}
		})
	}
}

// A violation that persists has the same key whatever figures change.
func TestViolationKeyIgnoresFigures(t *testing.T) {
	a, b := good(), good()
	a.Nodes[1].Used, b.Nodes[1].Used = 3, 4
	va, vb := Check(nil, a, Facts{}), Check(nil, b, Facts{})
	if len(va) != 1 || len(vb) != 1 || va[0].Key != vb[0].Key || va[0].What == vb[0].What {
		t.Errorf("keys of the same leak: %v / %v", va, vb)
	}
}

func TestExitRule(t *testing.T) {
	kill := func(sure bool) JobFailure { return JobFailure{Code: SigKilled, Sure: sure, What: "kill -9"} }
	for _, tt := range []struct {
		name string
		f    ExitFacts
		want []int
	}{
		{"ended by dynrun's SIGTERM", ExitFacts{EndedBy: EndTerm}, []int{143}},
		{"ended by dvm stop", ExitFacts{EndedBy: EndDVMStop}, []int{143}},
		{"ended by itself without a fault", ExitFacts{}, nil},
		{"a member killed", ExitFacts{Failures: []JobFailure{kill(true)}, EndedBy: EndTerm}, []int{137}},
		{"the first failure counts", ExitFacts{Failures: []JobFailure{{Code: 3, Sure: true, What: "exit 3"}, kill(true)}}, []int{3}},
		{"a new process killed: the ADD may abort", ExitFacts{Failures: []JobFailure{kill(false)}, EndedBy: EndTerm}, []int{137, 143}},
		{"keep-going, killed later", ExitFacts{Failures: []JobFailure{kill(true)}, EndedBy: EndTerm, KeepGoing: true}, []int{137, 143}},
		{"a launch refused", ExitFacts{NotRun: true, EndedBy: EndDVMStop}, []int{1}},
		{"keep-going, ended by its failure", ExitFacts{Failures: []JobFailure{kill(true)}, KeepGoing: true}, []int{137}},
		{"shrink: a member killed, ended later", ExitFacts{Shrink: true, Failures: []JobFailure{{Code: 137, Sure: true, Step: 3}}, EndedBy: EndTerm, EndStep: 5}, []int{143}},
		{"shrink: a member killed in the ending step", ExitFacts{Shrink: true, Failures: []JobFailure{{Code: 137, Sure: true, Step: 5}}, EndedBy: EndDVMStop, EndStep: 5}, []int{137, 143}},
		{"shrink: every process lost", ExitFacts{Shrink: true, Failures: []JobFailure{kill(true), kill(true)}, Report: "job j1 (d.1): lost ranks 0-1 (...); " + CannotKeep}, []int{0, 137}},
		{"replace: no slots for the new processes", ExitFacts{Shrink: true, Failures: []JobFailure{kill(true)}, Report: "job j1 (d.1): lost 4-7 (...); " + CannotReplace + " (...)"}, []int{0, 137}},
		{"replace: the new processes failed", ExitFacts{Shrink: true, Failures: []JobFailure{kill(true)}, Report: "job j1 (d.1): lost 1 (...); " + ReplaceFailed + ": ..."}, []int{0, 137}},
		{"replace: a whole set lost", ExitFacts{Shrink: true, Failures: []JobFailure{kill(true)}, Report: "job j2 (d.2): lost 1 (...); every member of mpi://app/j2/b was lost, " + NobodyToAccept + "; the other processes were terminated"}, []int{0, 137}},
		{"shrink: ended by itself", ExitFacts{Shrink: true, Failures: []JobFailure{kill(true)}}, []int{0}},
		// Chaos seed 92 (-policy replace), step 57: a job whose earlier
		// loss (status 1) had become a failure change lost its last
		// process to kill -9 while an ADD was in flight; dynrun ended with
		// that loss's 137, and the rule allowed the first loss's 1.
		{"replace: every process lost, the last of two losses", ExitFacts{Shrink: true, Failures: []JobFailure{{Code: 1, Sure: true, Step: 20, What: "exit 1"}, {Code: 137, Sure: true, Step: 57, What: "kill -9"}},
			Report: "job j7 (d.7): lost 2 (...); " + CannotKeep + "; the other processes were terminated"}, []int{0, 137}},
		// Chaos seed 11, step 526: a job launched while node1's daemon
		// was stopped; the daemon was declared down as its rank there
		// started, and dynrun said "rank 1 on node1 could not start"
		// with 1 (the master had listed the job running, so NotRun did
		// not apply). jobsOn, at the fault's start, had not seen it.
		{"launched during a daemon fault", ExitFacts{Failures: []JobFailure{{Code: 1, What: "could not start"}, kill(false)}}, []int{1, 137}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, why := ExitRule(tt.f)
			if !slices.Equal(got, tt.want) || why == "" {
				t.Errorf("ExitRule = %v (%q), want %v", got, why, tt.want)
			}
		})
	}
}

// rank1Dead makes rank 1 of job j1 (pid 201 on node1) a process that was
// killed and taken out of its set, as after a loss.
func rank1Dead(s *Snapshot) {
	s.Jobs[0].Procs[1].State = wire.ProcStateKilled
	s.Jobs[0].Sets[0].Members = []uint32{0}
	s.Nodes[1].Used = 0
	delete(s.OS, 201)
}

// failureChange is a settled failure change of job d.1 that lost rank 1;
// rank is its delta set's only rank (1 for a SUB, the new one for a
// REPLACE).
func failureChange(delta, typ, status string, rank uint32) Change {
	return Change{Delta: delta, Job: "d.1", Type: typ, Status: status, Settled: true, Requested: t0, Ranks: []uint32{rank}, Failure: true, Lost: []uint32{1}}
}

// TestCountWireUps: the summary counts the app's wire-up outcomes from its
// output, as dynrun forwards it (with a rank tag or not).
func TestCountWireUps(t *testing.T) {
	out := "STATE {}\n" +
		`WIREUP {"ok":true,"peer":1,"rank":0}` + "\n" +
		`[1] WIREUP {"ok":true,"peer":0,"rank":1}` + "\n" +
		`WIREUP {"code":"aborted","fence":"master: fence \"wireup\": rank 2 has ended","rank":3}` + "\n" +
		`WIREUP {"get":"timed out","peer":2,"rank":1}` + "\n" +
		`WIREUP {"got":"x","peer":2,"rank":1,"want":"addr-of-2"}` + "\n" +
		`WIREUP {"rank":2,"skipped":"told a job size of 2 at init"}` + "\n"
	n, why := map[string]int{}, map[string]string{}
	countWireUps(n, why, out)
	if want := map[string]int{"ok": 2, "fence-aborted": 1, "get": 1, "wrong": 1, "skipped": 1}; !maps.Equal(n, want) {
		t.Errorf("counted %v, want %v", n, want)
	}
	if len(why) != 4 || !strings.Contains(why["fence-aborted"], "rank 2 has ended") {
		t.Errorf("examples %v, want one per outcome but ok", why)
	}
}

// TestDrainableNode: a node can be drained when every running job there
// runs on another node too; ended jobs do not count.
func TestDrainableNode(t *testing.T) {
	pl := func(nodes ...string) wire.Placements {
		var out wire.Placements
		for i, n := range nodes {
			out = append(out, wire.Placement{Node: n, Ranks: wire.Span(uint32(i), uint32(i))})
		}
		return out
	}
	st := wire.DVMState{Jobs: []wire.JobInfo{
		{App: "spread", State: wire.JobStateRunning, Placement: pl("node1", "node2")},
		{App: "alone", State: wire.JobStateRunning, Placement: pl("node3")},
		{App: "ended", State: wire.JobStateDone, Placement: pl("node2")},
	}}
	for node, want := range map[string]bool{"node1": true, "node2": true, "node3": false, "node4": true} {
		if got := drainableNode(st, node); got != want {
			t.Errorf("drainableNode(%s) = %v, want %v", node, got, want)
		}
	}
}

// TestRuleReadsWhatMasterSays: the exit rule recognises a job the master
// could not keep by its words; each phrase it looks for must still be in
// the master's source (lib/master/failure.go), or the rule would
// silently stop matching and report a kept job's end as a violation.
func TestRuleReadsWhatMasterSays(t *testing.T) {
	src, err := os.ReadFile("../../lib/master/failure.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, phrase := range []string{CannotKeep, CannotReplace, ReplaceFailed, NobodyToAccept} {
		if !strings.Contains(string(src), phrase) {
			t.Errorf("lib/master/failure.go no longer says %q", phrase)
		}
	}
}
