package top

import (
	"testing"

	"github.com/dynrt/dynrt/wire"
)

func TestStateEvents(t *testing.T) {
	s := NewState()
	s.ApplySnapshot(Snapshot{State: wire.DVMState{ID: "d", Nodes: []wire.NodeInfo{{Name: "n0", Slots: 4}, {Name: "n1", Slots: 4}}}})
	ev := func(e wire.Event) { s.ApplyEvent(e) }
	ev(wire.Event{Seq: 1, Kind: wire.EvJobState, Job: "d.1", State: wire.JobStateRunning})
	ev(wire.Event{Seq: 2, Kind: wire.EvProcState, Job: "d.1", Ranks: wire.Span(0, 3), Node: "n0", State: wire.ProcStateRunning})
	ev(wire.Event{Seq: 3, Kind: wire.EvProcState, Job: "d.1", Ranks: wire.Span(4, 5), Node: "n1", State: wire.ProcStateRunning})
	j := s.Job("d.1")
	if j == nil || j.Info.ID != 1 || j.Size() != 6 || j.Info.Size != 6 || j.Info.NextRank != 6 || j.Place["n1"].String() != "4-5" {
		t.Fatalf("after starts: %+v", j)
	}
	ev(wire.Event{Seq: 4, Kind: wire.EvProcState, Job: "d.1", Ranks: wire.Span(3, 4), State: wire.ProcStateExited})
	if j.Place["n0"].String() != "0-2" || j.Place["n1"].String() != "5" || j.Size() != 4 {
		t.Errorf("after exits: %v", j.Place)
	}
	if u := s.Used(); u["n0"] != 3 || u["n1"] != 1 {
		t.Errorf("used %v", u)
	}
	// A set announced without members marks the sets stale until fetched;
	// an attribute-only update keeps the members it had.
	ev(wire.Event{Seq: 5, Kind: wire.EvPsetDef, Job: "d.1", Pset: &wire.PsetInfo{Name: "mpi://app/a", Size: 4, Active: true}})
	if !j.PsetsStale || len(j.Psets) != 1 {
		t.Errorf("stale sets: %v %+v", j.PsetsStale, j.Psets)
	}
	s.ApplyPsets("d.1", []wire.PsetInfo{{Name: "mpi://app/a", Size: 4, Members: wire.Span(0, 3), Active: true}})
	ev(wire.Event{Seq: 6, Kind: wire.EvPsetDef, Job: "d.1", Pset: &wire.PsetInfo{Name: "mpi://app/a", Size: 4, Active: false}})
	if j.PsetsStale || j.Psets[0].Members.String() != "0-3" || j.Psets[0].Active {
		t.Errorf("attribute update: %v %+v", j.PsetsStale, j.Psets)
	}
	ev(wire.Event{Seq: 7, Kind: wire.EvPsetDef, Job: "d.1", Pset: &wire.PsetInfo{Name: "mpi://app/a/b", Size: 2, Members: wire.Span(0, 1)}})
	if j.PsetsStale || len(j.Psets) != 2 || len(j.Tree()) != 1 {
		t.Errorf("set with members: %+v", j.Psets)
	}
	ev(wire.Event{Seq: 8, Kind: wire.EvPsetDel, Job: "d.1", Pset: &wire.PsetInfo{Name: "mpi://app/a/b"}})
	if len(j.Psets) != 1 {
		t.Errorf("after delete: %+v", j.Psets)
	}
	// Changes: the newest update wins, a late old one is ignored; the job
	// points at its change in flight until it is final.
	rc := wire.RC{Delta: "mpi://rte/a/rc/1", Job: "d.1", Type: wire.RCAdd, Status: wire.RCPending, Seq: 3}
	ev(wire.Event{Seq: 9, Kind: wire.EvRCState, Job: "d.1", RC: &rc})
	old := rc
	old.Status, old.Seq = wire.RCAnnounced, 2
	ev(wire.Event{Seq: 10, Kind: wire.EvRCState, Job: "d.1", RC: &old})
	if len(s.RCs) != 1 || s.RCs[0].Status != wire.RCPending || j.Info.Delta != rc.Delta {
		t.Errorf("rc: %+v, job delta %q", s.RCs, j.Info.Delta)
	}
	fin := rc
	fin.Status, fin.Seq = wire.RCFinalized, 4
	ev(wire.Event{Seq: 11, Kind: wire.EvRCState, Job: "d.1", RC: &fin})
	if c := s.Count(); c.RCFinalized != 1 || c.RCFlight != 0 || j.Info.Delta != "" {
		t.Errorf("counts %+v, delta %q", c, j.Info.Delta)
	}
	ev(wire.Event{Seq: 12, Kind: wire.EvNodeSuspect, Node: "n1"})
	if c := s.Count(); s.Nodes[1].State != wire.NodeSuspect || c.NodesUp != 1 || c.NodesSuspect != 1 {
		t.Errorf("node suspect: %+v %+v", s.Nodes, c)
	}
	ev(wire.Event{Seq: 13, Kind: wire.EvNodeDown, Node: "n1"})
	if c := s.Count(); s.Nodes[1].State != wire.NodeDown || c.NodesUp != 1 || c.NodesSuspect != 0 {
		t.Errorf("node down: %+v", s.Nodes)
	}
	ev(wire.Event{Seq: 14, Kind: wire.EvJobState, Job: "d.1", State: wire.JobStateFailed, Code: 3, Time: 99})
	if j.Live() || j.Info.Code != 3 || s.Count().JobsEnded != 1 || s.LastSeq != 14 || s.Events != 14 {
		t.Errorf("job end: %+v %+v", j.Info, s.Count())
	}
}

func TestStateLogBounded(t *testing.T) {
	s := NewState()
	for i := range 3 * logSize {
		s.ApplyEvent(wire.Event{Seq: uint64(i + 1), Kind: wire.EvApp})
	}
	if len(s.Log) > logSize || s.Log[len(s.Log)-1].Seq != 3*logSize || s.Events != 3*logSize {
		t.Fatalf("log %d entries, last %d", len(s.Log), s.Log[len(s.Log)-1].Seq)
	}
}

// A snapshot keeps the sets already fetched, replaces placements and
// marks jobs it no longer lists as ended.
func TestStateSnapshot(t *testing.T) {
	s := NewState()
	s.ApplyJob(wire.JobInfo{ID: 1, Job: "d.1", State: wire.JobStateRunning, Placement: []wire.Placement{pl("n0", 0, 1)}})
	s.ApplyJob(wire.JobInfo{ID: 2, Job: "d.2", State: wire.JobStateRunning})
	s.ApplyPsets("d.1", []wire.PsetInfo{{Name: "mpi://WORLD", Size: 2, Members: wire.Span(0, 1)}})
	s.ApplySnapshot(Snapshot{State: wire.DVMState{ID: "d", Jobs: []wire.JobInfo{{ID: 1, Job: "d.1", State: wire.JobStateRunning, Placement: []wire.Placement{pl("n1", 0, 2)}}}}})
	j := s.Job("d.1")
	if len(j.Psets) != 1 || j.Place["n0"] != nil || j.Place["n1"].String() != "0-2" {
		t.Errorf("job 1: %+v", j)
	}
	if s.Job("d.2").Live() {
		t.Error("job missing from the snapshot still live")
	}
}
