package main

import (
	"encoding/json"
	"os/exec"
	"syscall"
	"testing"

	"github.com/dynrt/dynrt/internal/leakcheck"
)

// TestMasterStoppedDaemonLeaves (issue 11 item 5): a daemon whose master
// goes silent (SIGSTOP, the stand-in for a cut link) kills its processes
// and exits on its own, while the master is still stopped; the master,
// resumed, books the node as lost and the job fails; nothing is left.
func TestMasterStoppedDaemonLeaves(t *testing.T) {
	dynDir(t)
	id := startDVM(t, "--nodes", "2", "--slots", "1", "--heartbeat", "200ms", "--heartbeat-misses", "3")
	jobDone := startJob(t, "--dvm", id, "-n", "2", "sleep", "300")
	waitFor(t, "2 sleep processes", func() bool { return countMarked("sleep") == 2 })
	st := dvmStatus(t, id, 2)
	master, daemon := st.PID, st.Nodes[1].PID
	if err := syscall.Kill(master, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(master, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	// node1's daemon and its rank go; rank 0 runs on under node0's daemon,
	// which lives in the stopped master.
	waitFor(t, "node1's daemon to exit", func() bool { return !leakcheck.Alive(daemon) })
	waitFor(t, "node1's rank to die", func() bool { return countMarked("sleep") == 1 })
	resume()
	if err := <-jobDone; err == nil {
		t.Error("the job succeeded although node1 was lost")
	} else if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 137 {
		t.Errorf("dynrun: %v, want exit 137 (rank lost with its node)", err)
	}
	jobDone <- nil // for the cleanup
	if code, _, errOut := runBin(t, "dvm", "stop", "--dvm", id); code != 0 {
		t.Errorf("dvm stop: exit %d, %q", code, errOut)
	}
}

// startJob starts dynrun with args in the background; the returned channel
// gets its end. The test's cleanup kills it if it still runs (and, having
// taken its end, puts something back for the cleanup).
func startJob(t *testing.T, args ...string) chan error {
	t.Helper()
	job := exec.Command(bin, args...)
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- job.Wait() }()
	t.Cleanup(func() {
		_ = job.Process.Kill()
		<-done
	})
	return done
}

// dvmStatus returns `dvm status --json` of DVM id, which must have nodes
// nodes.
func dvmStatus(t *testing.T, id string, nodes int) statusJSON {
	t.Helper()
	code, out, errOut := runBin(t, "dvm", "status", "--dvm", id, "--json")
	if code != 0 {
		t.Fatalf("status: exit %d, %q", code, errOut)
	}
	var st statusJSON
	if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Nodes) != nodes {
		t.Fatalf("status: %v %q", err, out)
	}
	return st
}
