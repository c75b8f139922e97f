package main

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/dynrt/dynrt/internal/dvmtest"
	"github.com/dynrt/dynrt/wire"
)

// Losing processes under dynrun --on-failure shrink with --buddy: the
// survivors roll back to the last complete checkpoint, take the lost rows
// from the buddies' copies and go on; the final grid equals the serial
// computation's bit for bit.

// launchShrink starts n processes of heat under the shrink policy.
func (h *heatDVM) launchShrink(t *testing.T, n int, args ...string) (string, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "grid.txt")
	argv := append([]string{h.bin, "--json", "--out", out, "--timeout", "90s"}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := h.c.Launch(ctx, wire.JobLaunchReq{Argv: argv, N: uint32(n), Env: h.d.Env, Output: wire.OutputFlags{Forward: true}, OnFailure: wire.OnFailureShrink})
	if err != nil {
		t.Fatalf("launch %v: %v", args, err)
	}
	return rep.Job, out
}

// lostChanges returns the lost ranks of the failure changes of res, in
// order, and checks that each was FINALIZED and rolled back.
func lostChanges(t *testing.T, res result) []string {
	t.Helper()
	var lost []string
	for _, c := range res.changes {
		l, _ := c["lost"].(string)
		if l == "" {
			continue
		}
		if c["status"] != wire.RCFinalized || c["type"] != wire.RCSub {
			t.Errorf("failure change %v: %v %v, want a FINALIZED SUB", c["delta"], c["type"], c["status"])
		}
		lost = append(lost, l)
	}
	return lost
}

// TestBuddyFailures: heat --buddy on 4 virtual nodes × 2 slots (node k
// runs ranks 2k and 2k+1) under the shrink policy survives kill -9 of a
// rank, of the root, two losses one after the other (the buddies are
// chosen again after the first), and kill -9 of a node's daemon with both
// its ranks; every final grid equals the serial computation's exactly.
func TestBuddyFailures(t *testing.T) {
	const nx, ny, steps = 64, 48, 1500
	h := startHeatDVM(t, 4, 2)
	want := serial(nx, ny, steps)
	args := []string{"--nx", fmt.Sprint(nx), "--ny", fmt.Sprint(ny), "--steps", fmt.Sprint(steps), "--check", "5", "--checkpoint-every", "20", "--buddy"}
	kill := func(t *testing.T, pids map[uint32]int, r uint32) {
		t.Helper()
		if err := syscall.Kill(pids[r], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		loss  func(t *testing.T, job string, pids map[uint32]int)
		lost  []string // the lost ranks of each failure change
		procs float64  // at the end
	}{
		{"kill -9 of rank 3", func(t *testing.T, _ string, pids map[uint32]int) { kill(t, pids, 3) }, []string{"3"}, 7},
		{"kill -9 of the root", func(t *testing.T, _ string, pids map[uint32]int) { kill(t, pids, 0) }, []string{"0"}, 7},
		{"two losses", func(t *testing.T, job string, pids map[uint32]int) {
			kill(t, pids, 5)
			// The second once the first has been handled (its rank
			// gone from the application set).
			dvmtest.RunningPIDs(t, h.c, job, 7)
			time.Sleep(300 * time.Millisecond)
			kill(t, pids, 2)
		}, []string{"5", "2"}, 6},
		{"kill -9 of node1's daemon", func(t *testing.T, _ string, _ map[uint32]int) {
			kill(t, map[uint32]int{0: dvmtest.DaemonPID(t, h.c, "node1")}, 0) // its processes die with it
		}, []string{"2-3"}, 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job, out := h.launchShrink(t, 8, args...)
			pids := dvmtest.RunningPIDs(t, h.c, job, 8)
			time.Sleep(500 * time.Millisecond) // into the steps
			tc.loss(t, job, pids)
			res := h.collect(t, job, out, args)
			if d, err := MaxDiff(want, res.grid); err != nil || d != 0 {
				t.Errorf("final grid differs from the serial computation by %g (%v)", d, err)
			}
			if got := lostChanges(t, res); fmt.Sprint(got) != fmt.Sprint(tc.lost) {
				t.Errorf("failure changes lost %v, want %v (changes %v)", got, tc.lost, res.changes)
			}
			if res.summary["procs"] != tc.procs {
				t.Errorf("summary %v, want %v processes at the end", res.summary, tc.procs)
			}
			if ck, _ := res.summary["checkpoints"].(map[string]any); ck == nil || ck["n"].(float64) < 2 || ck["buddies_apart"] != true {
				t.Errorf("checkpoints in the summary: %v", res.summary["checkpoints"])
			}
		})
	}
}
