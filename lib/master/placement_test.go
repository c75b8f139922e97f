package master

import (
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/wire"
)

// TestPlacementSkipsDeadNodes (issue 11 item 6): with node1 down (its
// daemon killed) or suspect (its daemon stopped, missing heartbeats), an
// ADD and new jobs, by slot and by node, go to the live nodes that have
// room instead of being refused or sent to node1.
func TestPlacementSkipsDeadNodes(t *testing.T) {
	cases := []struct {
		name   string
		sig    syscall.Signal
		misses int    // heartbeat misses before down
		event  string // node event to wait for before placing
	}{
		{"down", syscall.SIGKILL, 8, wire.EvNodeDown},
		{"suspect", syscall.SIGSTOP, 1000, wire.EvNodeSuspect}, // stays suspect for the test
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := startDVM(t, 3, 2, func(cfg *Config) {
				cfg.HeartbeatInterval = 250 * time.Millisecond
				cfg.HeartbeatMisses = c.misses
			})
			ne := d.nodeEvents()
			job := d.sleeper(2) // fills node0
			if c.sig == syscall.SIGSTOP {
				d.stopDaemon(t, 1)
			} else {
				st, _ := d.c.State(t.Context())
				if err := syscall.Kill(st.Nodes[1].PID, c.sig); err != nil {
					t.Fatal(err)
				}
			}
			ne.wait(t, c.event, "node1")

			r, err := d.rc(wire.RCRequest{Job: job.Job, Type: wire.RCAdd, N: 1})
			if err != nil {
				t.Fatalf("ADD with node1 %s: %v", c.name, err)
			}
			for _, p := range d.procs(job.Job) {
				if p.Rank == 2 && p.Node != "node2" {
					t.Errorf("rank 2 of ADD %s placed on %s, want node2", r.Delta, p.Node)
				}
			}
			for _, mapBy := range []string{"slot", "node"} {
				rep, end := d.run(wire.JobLaunchReq{Argv: []string{"true"}, N: 1, MapBy: mapBy})
				if end.State != wire.JobStateDone || len(rep.Placement) != 1 || rep.Placement[0].Node != "node2" {
					t.Errorf("--map-by %s with node1 %s: placed %+v, ended %s", mapBy, c.name, rep.Placement, end.State)
				}
			}
			// No room left on live nodes: refused, naming why.
			if _, err := d.launch(wire.JobLaunchReq{Argv: []string{"true"}, N: 2}); err == nil {
				t.Error("a job that fits only with node1 was placed")
			}
			if st := d.nodeState(1); st != map[string]string{wire.EvNodeDown: wire.NodeDown, wire.EvNodeSuspect: wire.NodeSuspect}[c.event] {
				t.Errorf("node1 is %s", st)
			}
			d.kill(job.Job)
		})
	}
}

// TestPMISpawnSkipsDownNode: an MPI spawn whose hosts include a down node
// places the new processes on the live ones (here the host name of this
// machine, which names every virtual node).
func TestPMISpawnSkipsDownNode(t *testing.T) {
	d := startDVM(t, 3, 2, fastHeartbeat)
	ne := d.nodeEvents()
	st, err := d.c.State(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(st.Nodes[1].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ne.wait(t, wire.EvNodeDown, "node1")
	me, _ := os.Hostname()
	rep, end := d.run(pmiReq(t, 1, "spawnhost", "3", "host", me))
	if end.Code != 0 {
		t.Fatalf("parent ended %d: %s", end.Code, end.Msg)
	}
	if s, _ := pmiReports(t, d, rep.Job)[0]["spawn"].(string); !strings.Contains(s, "rc=0") {
		t.Fatalf("spawn with node1 down: %s", s)
	}
	child := childJob(t, d, rep.Job)
	d.wait(child)
	if got, want := spawnNodes(t, d, child), []string{"node0", "node2", "node2"}; !slices.Equal(got, want) {
		t.Errorf("children ran on %v, want %v", got, want)
	}
}
