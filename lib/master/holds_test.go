package master

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/dynrt/dynrt/wire"
)

// held lists, per node index, whether the master counts job as held by
// that node's daemon (node.hasJob).
func (d *testDVM) held(job string) []bool {
	d.t.Helper()
	var out []bool
	if err := do(context.Background(), d.m, func(s *state) error {
		j := s.jobs[job]
		if j == nil {
			return fmt.Errorf("no job %s", job)
		}
		for _, n := range s.nodes {
			out = append(out, n.hasJob(j))
		}
		return s.checkNodes()
	}); err != nil {
		d.t.Fatal(err)
	}
	return out
}

// TestJobHeldByItsNodes: a job's data and sets go only to the daemons of
// the nodes it runs on, so that a change to a job on a few nodes costs
// what those nodes do (docs/scale.md). A process of another job that asks
// its daemon about a job the daemon does not hold gets the master's
// answer. Before the change every daemon held every job; without the
// master's fallback the ranks on nodes 1 and 2 below failed with "job ...
// is not known here".
func TestJobHeldByItsNodes(t *testing.T) {
	d := startDVM(t, 3, 2)
	a := d.sleeper(1) // on node0
	if got := d.held(a.Job); fmt.Sprint(got) != "[true false false]" {
		t.Fatalf("job on node0 held by %v, want only node0", got)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// One rank on node0 (which holds a) and two on each of the others.
	_, end := d.run(wire.JobLaunchReq{Argv: []string{exe, "pset", "mpi://WORLD", a.Job}, N: 5, Name: "asker", Env: []string{envRole + "=app"}})
	if end.State != wire.JobStateDone {
		t.Fatalf("asker: %s %q: %v", end.State, end.Msg, d.output(end.Job))
	}
	lines := d.output(end.Job)
	if len(lines) != 5 {
		t.Fatalf("asker printed %d lines, want 5: %v", len(lines), lines)
	}
	for _, l := range lines {
		var p wire.PsetInfo
		if err := json.Unmarshal(l.Line, &p); err != nil || p.Job != a.Job || p.Size != 1 || p.Members.String() != "0" {
			t.Errorf("rank %d asked for job %s's WORLD: %s (%v)", l.Rank, a.Job, l.Line, err)
		}
	}
	if got := d.held(a.Job); fmt.Sprint(got) != "[true false false]" {
		t.Errorf("after another job's queries, %s held by %v, want only node0", a.Job, got)
	}

	// An ADD that lands on node1 brings it up first.
	other := d.sleeper(1) // node0's second slot: the ADD goes elsewhere
	rc, err := d.rc(wire.RCRequest{Job: a.Job, Type: wire.RCAdd, N: 1})
	if err != nil {
		t.Fatal(err)
	}
	if ps := d.procs(a.Job); len(ps) != 2 || ps[1].Node != "node1" {
		t.Fatalf("the ADD's process: %+v, want rank 1 on node1", ps)
	}
	if got := d.held(a.Job); fmt.Sprint(got) != "[true true false]" {
		t.Errorf("after an ADD onto node1, %s held by %v, want node0 and node1", a.Job, got)
	}
	if got := d.held(other.Job); fmt.Sprint(got) != "[true false false]" {
		t.Errorf("job %s held by %v, want only node0", other.Job, got)
	}
	if rc.Status != wire.RCFinalized && rc.Status != wire.RCAnnounced {
		t.Errorf("the ADD: %s", rc.Status)
	}
	d.kill(a.Job)
	d.kill(other.Job)
}
